#!/usr/bin/env bash
# The CUDA benchmark, run on the GPU machine in one call (or in parts: --models, --modes, --skip-*):
# Tactician (default route in fp16: precision.default=fp16, CUDA graphs on) against PyTorch eager,
# torch.compile and torch.compile(mode="max-autotune"), all fp16, on ResNet-50 (batch 1, 32),
# MobileNetV2 (1) and BERT-base (seq 128; batch 1, 8). Writes OUT/{tactician,torch}.jsonl and
# logs; prints the table (bench/cuda_report.py) last.
#
#   bench/run_cuda.sh PKG_DIR OUT [--models "resnet50:1 resnet50:32 mobilenet_v2:1 bert-base:1 bert-base:8"]
#                     [--modes eager,compile[,max-autotune]] [--skip-torch] [--skip-tactician] [--models-dir D]
#   env: TAC_CONFIGS="fp32 fp16 fp16-nographs fp16-cold bf16 fp16-nhwc fp16-nhwc-fused fp16-noattn fp16-iso fp16-tuned"
#        (which Tactician runs: fp16-nhwc / fp16-nchw add layout.default=nhwc / nchw, fp16-nhwc-fused also pins cuDNN's fused
#        conv call on every convolution it takes, fp16-noattn turns pass.fuse_attention off, fp16-nomove
#        pass.move_transposes, fp16-iso picks each node's
#        tactic by timing each alone on the device: builder.selection=isolated), LOW="fp16 bf16"
#        (checks), BENCH_SECONDS (per Tactician timing, default 1), TORCH_LIMIT (seconds per torch mode),
#        TUNE_BUDGET (fp16-tuned: `tactician tune --route precision.default=fp16 --budget B`, default 2m),
#        TUNE_TOL (its tolerance against the fp32 reference interpreter, default "cos>=0.999")
#
# PKG_DIR: an unpacked scripts/pack_gpu.sh archive. The ONNX models are exported here with this
# machine's torch (bench/cuda_torch.py --export; 100-400 MB each, too large to carry). Budget on an
# H200: export ~1 min, Tactician ~20 s per model/batch, eager ~5 s, compile ~1 min and max-autotune
# ~4 min per model/batch (PyTorch 2.11): run max-autotune in its own call, per model.
set -u
pkg=$1 out=$2
shift 2
models="resnet50:1 resnet50:32 mobilenet_v2:1 bert-base:1 bert-base:8"
modes="eager,compile"
skip_torch=0 skip_tac=0
# Tactician configurations (TAC_CONFIGS): fp32, fp16, fp16-nographs, fp16-cold (the fp16 plan with
# --l2-flush), bf16, fp8 (precision.default=fp8: MatMuls with constant weights in fp8, Ada/Hopper); LOW: the lower precisions `check` runs at batch 1.
configs=${TAC_CONFIGS:-"fp32 fp16 fp16-nographs fp16-cold"}
low=${LOW:-fp16}
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mdir=$bench_dir/models
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models=$2; shift ;;
    --modes) modes=$2; shift ;;
    --skip-torch) skip_torch=1 ;;
    --skip-tactician) skip_tac=1 ;;
    --models-dir) mdir=$2; shift ;;
    *) echo "run_cuda.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
source "$pkg/env.sh"  # (sets its own $here)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
csv=$(echo $models | tr ' ' ',')
{
  echo "== $(date -u +%FT%TZ) $(head -1 "$pkg/COMMIT")"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv
} >> "$out/env.txt" 2>&1
# Export (only what is missing) and the two ceilings.
timeout 400 python3 "$bench_dir/cuda_torch.py" --export "$mdir" --models "$csv" --modes "" --ceilings \
  >> "$out/torch.jsonl" 2>> "$out/torch.log"
echo "export + ceilings: rc=$?" >> "$out/env.txt"
if [ $skip_tac = 0 ]; then
  for spec in $models; do
    name=${spec%%:*} batch=${spec##*:}
    m=$mdir/$name
    [ -f "$m/model.onnx" ] || { echo "{\"model\": \"$name\", \"batch\": $batch, \"error\": \"no model.onnx\"}" >> "$out/tactician.jsonl"; continue; }
    if [ "$batch" = 1 ]; then
      for p in fp32 $low; do
        # resnet50's logits (randomized BN) have a std of ~7.5e3: absolute tolerances scale with it.
        scale=1; [ "$name" = resnet50 ] && scale=100
        tol="--rtol 1e-3 --atol $(python3 -c "print(1e-4*$scale*5 if $scale > 1 else 1e-4)")"
        [ $p != fp32 ] && tol="--rtol 0.05 --atol $(python3 -c "print(0.05*$scale)")"
        echo "===== $name check $p" >> "$out/tactician.log"
        timeout 300 tactician check "$m" --backend cuda --route "precision.default=$p" $tol >> "$out/tactician.log" 2>&1
        echo "check $name $p: rc=$?" >> "$out/tactician.log"
      done
    fi
    # fp16-tuned: a tune with precision.default=fp16 fixed (the rest searched; candidates checked
    # against the fp32 reference interpreter on seeded random inputs of this batch), its best.route.
    tuned_route=""
    if [[ " $configs " == *" fp16-tuned "* ]]; then
      td=/tmp/tune-$name-$batch
      t0=$(date +%s.%N)
      timeout 900 tactician tune "$m/model.onnx" --backend cuda --route "precision.default=fp16" --dim batch=$batch \
        --budget "${TUNE_BUDGET:-2m}" --tolerance "${TUNE_TOL:-cos>=0.999}" --db "$td/tune.db" --out "$td" --json \
        > "$td.log" 2>&1
      rc=$? t1=$(date +%s.%N)
      echo "===== $name b$batch tune (rc=$rc)" >> "$out/tactician.log"; cat "$td.log" >> "$out/tactician.log"
      python3 - "$td" >> "$out/tactician.log" 2>&1 <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1] + '/tune.db')
for r in c.execute("select status, substr(reason, 1, 200), count(*) from candidates where status != 'ok' group by 1, 2"):
    print('tune not ok:', r)
PY
      summ=$(tail -1 "$td.log"); case "$summ" in \{*) ;; *) summ="{}" ;; esac
      echo "{\"model\": \"$name\", \"batch\": $batch, \"config\": \"fp16-tuned-search\", \"tune_s\": $(python3 -c "print(round($t1 - $t0, 1))"), \"result\": $summ}" >> "$out/tactician.jsonl"
      [ -f "$td/best.route" ] && tuned_route=$(grep -v '^#' "$td/best.route" | tr '\n' ' ')
    fi
    # fp16-nhwc-fused: nhwc, and every convolution cuDNN's fused conv + bias + relu call takes pinned to it.
    fused_pins=""
    if [[ " $configs " == *" fp16-nhwc-fused "* ]]; then
      fused_pins=$(timeout 300 tactician knobs "$m/model.onnx" --backend cuda --dim batch=$batch --json 2>/dev/null | python3 -c '
import json, sys
print(" ".join(k["name"] + "=cudnn_fused" for k in json.load(sys.stdin) if k["name"].startswith("tactic.") and "cudnn_fused" in k["values"]))')
    fi
    # One plan per route (BERT-base builds take seconds); the cold-L2 run reuses the fp16 plan.
    for run in "fp32|" "fp16|precision.default=fp16" "fp16-nographs|precision.default=fp16 cuda.graphs=off" "bf16|precision.default=bf16" "fp8|precision.default=fp8" \
               "fp16-nhwc|precision.default=fp16 layout.default=nhwc" "fp16-nchw|precision.default=fp16 layout.default=nchw" "fp16-nhwc-fused|precision.default=fp16 layout.default=nhwc $fused_pins" \
               "fp16-noattn|precision.default=fp16 pass.fuse_attention=off" "fp16-nomove|precision.default=fp16 pass.move_transposes=off" \
               "fp16-iso|precision.default=fp16 builder.selection=isolated" "fp16-tuned|$tuned_route"; do
      IFS='|' read -r label route <<< "$run"
      [[ " $configs " == *" $label "* ]] || continue
      [ $label = fp16-tuned ] && [ -z "$tuned_route" ] && continue
      echo "===== $name b$batch build $label [$route]" >> "$out/tactician.log"
      timeout 300 tactician build "$m/model.onnx" --backend cuda --route "$route" --dim batch=$batch -o "/tmp/$name-$batch-$label.plan" \
        >> "$out/tactician.log" 2>&1 || echo "build $name b$batch $label failed" >> "$out/tactician.log"
    done
    for run in "fp32|fp32|" "fp16|fp16|" "fp16-tuned|fp16-tuned|" "fp16-nographs|fp16-nographs|" "fp16-cold|fp16|--l2-flush" "bf16|bf16|" "fp8|fp8|" \
               "fp16-nhwc|fp16-nhwc|" "fp16-nchw|fp16-nchw|" "fp16-nhwc-fused|fp16-nhwc-fused|" "fp16-noattn|fp16-noattn|" \
               "fp16-nomove|fp16-nomove|" "fp16-iso|fp16-iso|"; do
      IFS='|' read -r label plan flag <<< "$run"
      [[ " $configs " == *" $label "* ]] || continue
      r=$(timeout 120 tactician bench "/tmp/$name-$batch-$plan.plan" --min-seconds ${BENCH_SECONDS:-1} --warmup 10 $flag --json \
            2>> "$out/tactician.log" | tail -1)
      case "$r" in \{*) ;; *) r="{\"error\": \"bench failed\"}" ;; esac
      echo "{\"model\": \"$name\", \"batch\": $batch, \"config\": \"$label\", \"result\": $r}" >> "$out/tactician.jsonl"
      echo "tactician $name b$batch $label: $r" >&2
    done
  done
fi
if [ $skip_torch = 0 ] && [ -n "$modes" ]; then
  for mode in $(echo "$modes" | tr ',' ' '); do
    timeout ${TORCH_LIMIT:-3000} python3 "$bench_dir/cuda_torch.py" --models "$csv" --modes "$mode" >> "$out/torch.jsonl" 2>> "$out/torch.log"
    echo "torch $mode: rc=$?" >> "$out/env.txt"
  done
fi
python3 "$bench_dir/cuda_report.py" "$out" | tee "$out/table.md"
