#!/usr/bin/env bash
# One device call as a list of steps (replaces a script per call): unpacks DEVPACK's binaries,
# exports the bench models this machine's torch needs, then runs each step in order, logging to
# OUT/steps.log and OUT/<step>.txt. Steps:
#   profile:MODEL:BATCH[:ROUTE]     tactician profile (CUDA, per-step times vs isolated), route default
#                                   "precision.default=fp16" (spaces as '+') -> OUT/profile-<n>-MODEL-bBATCH.txt
#   torch:MODES:MODEL:BATCH         bench/cuda_torch.py --modes MODES (e.g. max-autotune) -> OUT/torch.jsonl
#   bench:CONFIGS:MODELS            bench/run_cuda.sh with TAC_CONFIGS=CONFIGS (',' separated) on MODELS
#                                   ("resnet50:1,bert-base:8"), torch skipped -> OUT/bench/
#   unit                            the CUDA unit tests (scripts/gpu_check.sh --unit)
#   check:NAME[:ROUTE:RTOL:ATOL]     `check` of every DEVPACK zoo model on CUDA (route spaces as '+')
#                                   -> OUT/check-NAME/summary.txt
#   mpi:MODEL:BUDGET:NPS            tune DEVPACK's zoo MODEL on CUDA (fp16 default route, random strategy,
#                                   seed 1) in one process, then under the carried mpirun with each -np
#                                   of NPS (',' separated) -> OUT/mpi/<np>/summary.json, OUT/mpi-<np>.txt
#
#   bash scripts/gpu_steps.sh DEVPACK OUT STEP...
set -u
dp=$(cd "$1" && pwd) out=$2
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
( cd /tmp && tar xJf "$dp/tactician-gpu.tar.xz" )
pkg=/tmp/tactician-gpu
source "$pkg/env.sh"
mdir=/tmp/bench-models
need=$(for s in "$@"; do
  case "$s" in
    profile:*) IFS=: read -r _ m b _ <<< "$s"; echo "$m:$b" ;;
    torch:*) IFS=: read -r _ _ m b <<< "$s"; echo "$m:$b" ;;
    bench:*) IFS=: read -r _ _ ms <<< "$s"; echo "$ms" | tr ',' '\n' ;;
  esac
done | sort -u | tr '\n' ',' | sed 's/,$//')
log() { echo "[$(date -u +%T)] $*" >> "$out/steps.log"; }
if [ -n "$need" ]; then
  timeout 300 python3 "$root/bench/cuda_torch.py" --export "$mdir" --models "$need" --modes "" --ceilings \
    >> "$out/torch.jsonl" 2>> "$out/torch.log"
  log "export $need: rc=$?"
fi
n=0
for s in "$@"; do
  log "start $s"
  case "$s" in
    profile:*)
      IFS=: read -r _ m b route <<< "$s"
      route=${route:-precision.default=fp16}
      n=$((n + 1))
      timeout 200 tactician profile "$mdir/$m/model.onnx" --backend cuda --route "${route//+/ }" --dim batch=$b --top 400 \
        > "$out/profile-$n-$m-b$b.txt" 2>&1 ;;
    torch:*)
      IFS=: read -r _ modes m b <<< "$s"
      timeout 500 python3 "$root/bench/cuda_torch.py" --models "$m:$b" --modes "$modes" >> "$out/torch.jsonl" 2>> "$out/torch.log" ;;
    bench:*)
      IFS=: read -r _ configs ms <<< "$s"
      TAC_CONFIGS="${configs//,/ }" LOW=fp16 bash "$root/bench/run_cuda.sh" "$pkg" "$out/bench" --skip-torch \
        --models "${ms//,/ }" --models-dir "$mdir" > "$out/bench.txt" 2>&1 ;;
    unit)
      bash "$root/scripts/gpu_check.sh" "$pkg" "$out/unit" --unit ;;
    check:*)
      IFS=: read -r _ name route rtol atol <<< "$s"
      extra=()
      [ -n "$route" ] && extra=(--route "${route//+/ }" --rtol "${rtol:-1e-3}" --atol "${atol:-1e-4}")
      bash "$root/scripts/gpu_check.sh" "$pkg" "$out/check-$name" "${extra[@]}" "$dp"/models/*/ ;;
    mpi:*)
      IFS=: read -r _ m budget nps <<< "$s"
      args=("$dp/models/$m/model.onnx" --backend cuda --route precision.default=fp16 --tolerance "cos>=0.999"
            --budget "$budget" --strategy random --seed 1 --json)
      mkdir -p "$out/mpi"
      timeout 300 tactician tune "${args[@]}" --db "$out/mpi/single.db" --out "$out/mpi/single" > "$out/mpi-single.txt" 2>&1
      log "mpi single: rc=$?"
      for np in ${nps//,/ }; do
        timeout 300 mpirun --allow-run-as-root --oversubscribe --enable-recovery --bind-to none -np "$np" \
          tactician tune "${args[@]}" --db "$out/mpi/np$np.db" --out "$out/mpi/np$np" > "$out/mpi-np$np.txt" 2>&1
        log "mpi -np $np: rc=$?"
      done ;;
    *) log "unknown step $s" ;;
  esac
  log "done $s: rc=$?"
done
