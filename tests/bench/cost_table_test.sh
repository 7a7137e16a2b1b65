#!/usr/bin/env bash
# The cost table in the tree is what bench/fit_costs.py writes from the samples it names: refitting
# the stored samples must reproduce src/kernels/cost_table.inc line for line (nobody edited the
# table by hand, and the fit is deterministic).  usage: cost_table_test.sh PYTHON SOURCE_DIR
set -u
py=$1 src=$2
samples=$(sed -n 's|^// samples: \([^ ]*\) .*|\1|p' "$src/src/kernels/cost_table.inc")
[ -n "$samples" ] || { echo "cost_table.inc names no samples file"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
(cd "$src" && "$py" bench/fit_costs.py "$samples" --write "$out" > /dev/null) || { echo "fit_costs.py failed"; exit 1; }
# The date of the fit is the day it ran: compare the rest.
if ! diff <(grep -v "^// samples:" "$src/src/kernels/cost_table.inc") <(grep -v "^// samples:" "$out"); then
  echo "src/kernels/cost_table.inc differs from a refit of $samples (bench/fit_costs.py $samples --write src/kernels/cost_table.inc)"
  exit 1
fi
echo "cost table reproduced from $samples"
