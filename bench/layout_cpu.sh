#!/usr/bin/env bash
# layout.default=nchw vs blocked vs nhwc on the CPU, interleaved, several rounds; prints a Markdown
# table (median of the per-round medians, ratio to nchw in the same rounds) and the load.
#
# usage: bench/layout_cpu.sh [--rounds R] [--threads "1 2"] [--models "mobilenet_v2 squeezenet1.1 resnet18"]
#                            [--layouts "nchw blocked nhwc"] [--min-seconds S]
#
# Plans are built once per model, layout and thread count (`tactician build --route
# "layout.default=L" --threads N -o`); each round then runs `tactician bench PLAN --threads N
# --json` for every layout in turn (A B C A B C ...), each a separate process.
# Environment: TACTICIAN (default build/tactician), SHARED_MODELS (default ../shared/models).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
ROUNDS=5
THREADS="1 2"
MODELS="mobilenet_v2 squeezenet1.1 resnet18"
LAYOUTS="nchw blocked nhwc"
MIN_S=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --layouts) LAYOUTS=$2; shift 2 ;;
    --min-seconds) MIN_S=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "layout_cpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
TACTICIAN=${TACTICIAN:-build/tactician}
SHARED_MODELS=${SHARED_MODELS:-$ROOT/../shared/models}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

model_path() {
  case "$1" in
    resnet50|bert-base) [ -f "$ROOT/bench/models/$1/model.onnx" ] && { echo "$ROOT/bench/models/$1/model.onnx"; return; } ;;
  esac
  echo "$SHARED_MODELS/$1/model.onnx"
}

echo "# layout.default: nchw vs blocked vs nhwc"
echo
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty'), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores,"
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "command: bench/layout_cpu.sh --rounds $ROUNDS --threads \"$THREADS\" --models \"$MODELS\" --layouts \"$LAYOUTS\" --min-seconds $MIN_S"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
echo
for m in $MODELS; do
  for t in $THREADS; do
    for l in $LAYOUTS; do
      "$TACTICIAN" build "$(model_path "$m")" --route "layout.default=$l" --threads "$t" -o "$TMP/$m-$t-$l.plan" \
        > "$TMP/$m-$t-$l.build" 2>&1 || echo "build failed: $m $t $l" >&2
    done
  done
done
for r in $(seq 1 "$ROUNDS"); do
  for m in $MODELS; do
    for t in $THREADS; do
      for l in $LAYOUTS; do
        "$TACTICIAN" bench "$TMP/$m-$t-$l.plan" --threads "$t" --min-seconds "$MIN_S" --json 2>/dev/null | tail -1 \
          | python3 -c "import json,sys; print(json.load(sys.stdin)['median_ms'])" >> "$TMP/$m-$t-$l.ms" 2>/dev/null
      done
    done
  done
  echo "round $r done, $(uptime | sed 's/.*load average/load average/')" >&2
done
echo "load after: $(uptime | sed 's/.*load average/load average/')"
echo
python3 - "$TMP" "$MODELS" "$THREADS" "$LAYOUTS" <<'EOF'
import statistics, sys, os, re
tmp, models, threads, layouts = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
def ms(m, t, l):
    p = os.path.join(tmp, f"{m}-{t}-{l}.ms")
    return [float(x) for x in open(p)] if os.path.exists(p) else []
def reformats(m, t, l):
    p = os.path.join(tmp, f"{m}-{t}-{l}.build")
    r = re.search(r"reformats inserted: (\d+)", open(p).read()) if os.path.exists(p) else None
    return r.group(1) if r else "?"
head = "| model | threads | " + " | ".join(f"{l} ms (reformats)" for l in layouts) + " | " + \
       " | ".join(f"{l}/nchw (per-round range)" for l in layouts if l != "nchw") + " |"
print(head)
print("|" + " --- |" * (head.count("|") - 1))
for m in models:
    for t in threads:
        base = ms(m, t, "nchw")
        cells = []
        for l in layouts:
            v = ms(m, t, l)
            cells.append(f"{statistics.median(v):.2f} ({reformats(m, t, l)})" if v else "n/a")
        for l in layouts:
            if l == "nchw": continue
            v = ms(m, t, l)
            if v and base and len(v) == len(base):
                rs = [a / b for a, b in zip(v, base)]
                cells.append(f"{statistics.median(v) / statistics.median(base):.2f} ({min(rs):.2f}-{max(rs):.2f})")
            else:
                cells.append("n/a")
        print(f"| {m} | {t} | " + " | ".join(cells) + " |")
EOF
