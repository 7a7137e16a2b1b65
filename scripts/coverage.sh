#!/usr/bin/env bash
# Runs the ONNX backend conformance suites and the model zoo through `tactician check` and
# writes docs/coverage.md (summary + per-op table), for the reference interpreter and for
# default-route engines. With --update-pass it also rewrites the no-regression lists
# tests/conformance/<suite>.<reference|engine>.pass (only ever do that after a real gain).
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
  echo "| suite | runs on | passed | failed | unsupported | errors | total |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
} > "$out"
row() {  # row SUITE MODE JSONLINE
  python3 - "$1" "$2" "$3" >> "$out" <<'PY'
import json, sys
s = json.loads(sys.argv[3])
print(f"| {sys.argv[1]} | {sys.argv[2]} | {s['passed']} | {s['failed']} | {s['unsupported']} | {s['errors']} | {s['total']} |")
PY
}
for suite in node simple pytorch-converted pytorch-operator; do
  for mode in reference engine; do
    extra=()
    [ $mode = reference ] && extra+=(--reference)
    [ $update -eq 1 ] && extra+=(--write-pass "tests/conformance/$suite.$mode.pass")
    build/tactician check "$backend/$suite" --json --markdown "$tmp/$suite.$mode.md" "${extra[@]}" > "$tmp/$suite.$mode.txt" || true
    row "$suite" "$mode" "$(tail -1 "$tmp/$suite.$mode.txt")"
  done
done
for mode in reference engine; do
  extra=()
  [ $mode = reference ] && extra+=(--reference)
  build/tactician check "$models" --rtol 1e-3 --atol 1e-4 --json "${extra[@]}" > "$tmp/models.$mode.txt" || true
  row "models (../shared/models)" "$mode" "$(tail -1 "$tmp/models.$mode.txt")"
done
{
  echo
  echo "## Per op: node suite, reference interpreter"
  echo
  cat "$tmp/node.reference.md"
  echo
  echo "## Per op: node suite, default-route engines"
  echo
  cat "$tmp/node.engine.md"
  echo
  for mode in reference engine; do
    echo "## Tests that do not pass (node suite, $mode), with the reason"
    echo
    echo '```'
    grep -E '^(FAIL|UNSUPPORTED|ERROR|CRASH|TIMEOUT) ' "$tmp/node.$mode.txt" | cut -c1-200 || true
    echo '```'
    echo
  done
} >> "$out"
rm -rf "$tmp"
echo "wrote $out"
