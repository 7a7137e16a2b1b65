#!/usr/bin/env bash
# Runs the ONNX backend conformance suites and the model zoo through `tactician check` and
# writes docs/coverage.md (summary + per-op table). With --update-pass it also rewrites the
# no-regression lists tests/conformance/<suite>.pass (only ever do that after a real gain).
# Usage: scripts/coverage.sh [--update-pass]
set -euo pipefail
cd "$(dirname "$0")/.."
backend="${TAC_ONNX_BACKEND_DIR:-../shared/onnx-backend}"
models="${TAC_MODELS_DIR:-../shared/models}"
update=0
[ "${1:-}" = "--update-pass" ] && update=1
out=docs/coverage.md
tmp=$(mktemp -d)
{
  echo "# Reference interpreter coverage"
  echo
  echo "Produced by \`scripts/coverage.sh\` on commit $(git rev-parse --short HEAD) ($(date -u +%Y-%m-%d)),"
  echo "data: \`$backend\` (ONNX backend test data, onnx 1.23) and \`$models\`."
  echo "Tolerance: the ONNX backend runner's (rtol 1e-3, atol 1e-7); models: rtol 1e-3, atol 1e-4."
  echo "A test counts for every op type its model uses; *unsupported* means an op, data type or"
  echo "attribute Tactician does not implement (reported as such, never as a pass)."
  echo
  echo "| suite | passed | failed | unsupported | errors | total |"
  echo "| --- | --- | --- | --- | --- | --- |"
} > "$out"
for suite in node simple pytorch-converted pytorch-operator; do
  extra=()
  [ $update -eq 1 ] && extra=(--write-pass "tests/conformance/$suite.pass")
  build/tactician check "$backend/$suite" --json --markdown "$tmp/$suite.md" "${extra[@]}" > "$tmp/$suite.txt" || true
  json=$(tail -1 "$tmp/$suite.txt")
  python3 - "$suite" "$json" >> "$out" <<'PY'
import json, sys
s = json.loads(sys.argv[2])
print(f"| {sys.argv[1]} | {s['passed']} | {s['failed']} | {s['unsupported']} | {s['errors']} | {s['total']} |")
PY
done
build/tactician check "$models" --rtol 1e-3 --atol 1e-4 --json > "$tmp/models.txt" || true
json=$(tail -1 "$tmp/models.txt")
python3 - "models" "$json" >> "$out" <<'PY'
import json, sys
s = json.loads(sys.argv[2])
print(f"| {sys.argv[1]} (../shared/models) | {s['passed']} | {s['failed']} | {s['unsupported']} | {s['errors']} | {s['total']} |")
PY
{
  echo
  echo "## Per op: node suite"
  echo
  cat "$tmp/node.md"
  echo
  echo "## Tests that do not pass (node suite), with the reason"
  echo
  echo '```'
  grep -E '^(FAIL|UNSUPPORTED|ERROR|CRASH|TIMEOUT) ' "$tmp/node.txt" | cut -c1-200 || true
  echo '```'
} >> "$out"
rm -rf "$tmp"
echo "wrote $out"
