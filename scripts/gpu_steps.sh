#!/usr/bin/env bash
# One device call as a list of steps (replaces a script per call): unpacks DEVPACK's binaries,
# exports the bench models this machine's torch needs, then runs each step in order, logging to
# OUT/steps.log and OUT/<step>.txt. Steps:
#   profile:MODEL:BATCH[:ROUTE]     tactician profile (CUDA, per-step times vs isolated), route default
#                                   "precision.default=fp16" (spaces as '+') -> OUT/profile-<n>-MODEL-bBATCH.txt
#   torch:MODES:MODELS              bench/cuda_torch.py --modes MODES (e.g. max-autotune) on MODELS
#                                   ("resnet50:1,bert-base:8") -> OUT/torch.jsonl
#   bench:CONFIGS:MODELS            bench/run_cuda.sh with TAC_CONFIGS=CONFIGS (',' separated) on MODELS
#                                   ("resnet50:1,bert-base:8"), torch skipped -> OUT/bench/
#   ncu:MODEL:BATCH:REGEX[:ROUTE]   Nsight Compute, full set, on the 2nd launch of the kernels matching REGEX in one
#                                   `tactician run` (clocks left alone, warm caches) -> OUT/ncu-MODEL-bBATCH-REGEX.txt
#   ncutimes:MODEL:BATCH[:ROUTE]    every kernel's duration in one `tactician run` under Nsight Compute (serialized,
#                                   warm caches) -> OUT/ncutimes-MODEL-bBATCH.csv
#   pin:MODEL:BATCH:TACTICS          per tactic of TACTICS (',' separated): every node that offers it pinned to it
#                                   (fp16 default route otherwise), `bench` end to end and the median duration of
#                                   the kernels named *attention* under Nsight Compute -> OUT/pins.txt
#   pinbench:MODEL:BATCH:TACTICS[:NODES]  as pin:, `bench` end to end only (no Nsight Compute); NODES: a
#                                   regex the pinned knobs' node names must match -> OUT/pins.txt
#   unit                            the CUDA unit tests (scripts/gpu_check.sh --unit)
#   unit:FILTER                     unit_tests --gtest_filter=FILTER (e.g. 'CudaTactics.BatchNorm:CudaEngine.Dynamic*'),
#                                   its failures and verdicts -> OUT/unit-filter.txt
#   check:NAME[:ROUTE:RTOL:ATOL]     `check` of every DEVPACK zoo model on CUDA (route spaces as '+')
#                                   -> OUT/check-NAME/summary.txt
#   checktune:BUDGET                `tune --backend cuda --budget BUDGET` of every DEVPACK zoo model (default
#                                   tolerance), then `check` of its best.route -> OUT/checktune/summary.txt
#   fallbacks:MODELS                per model of MODELS ("yolo_head:1,lstm_audio:1"; export_models.py names,
#                                   exported here): `build` on CUDA (fp16 default route) and its host-step
#                                   warnings, `bench` of that plan, `check` at cos>=0.999 -> OUT/fallbacks.txt
#                                   (one line per model), OUT/fallbacks-detail.txt (every warning)
#   compare:MODEL:BATCH[:ROUTE[:OUTPUTS]]  `compare` of MODEL on CUDA (ROUTE, fp16 default route otherwise) against the
#                                   CPU default route at cos>=0.999; OUTPUTS (',' separated) may name intermediate
#                                   values, which become outputs of both engines -> OUT/compare-<n>-MODEL.txt
#   nodes[:TIMEOUT]                 the ONNX node conformance tests of DEVPACK/node.tar.xz (the CPU engines' pass
#                                   list) through CUDA engines (`check --backend cuda`, default route), held to
#                                   tests/conformance/node.cuda.pass (no regression) -> OUT/nodes.txt (failures,
#                                   unsupported, JSON counts), OUT/nodes.pass (this run's pass list)
#   tune:MODEL:BATCH:BUDGET:EVAL[:TOL]  `tune --backend cuda --route precision.default=fp16 --evaluator EVAL` of bench
#                                   MODEL at batch BATCH, --tolerance TOL (default "cos>=0.999") -> OUT/tune-<n>-MODEL-
#                                   bBATCH-EVAL.txt (its output) and .json (summary.json: candidates, time split);
#                                   its database (every evaluation) in OUT/logs.tgz, tunedb/
#   overhead:MODEL:BATCH:N          bench/evaluator_overhead.py (fresh child vs persistent worker per request) on CUDA,
#                                   fp16 default route -> OUT/overhead-MODEL-bBATCH.txt
#   faults                          tests/cli/tune_faults_test.sh on CUDA (squeezenet1.1 of DEVPACK, else ../shared): planted
#                                   crash, hang, wrong numbers and illegal device access -> OUT/faults.txt
#   shapes[:ROUTE]                  bench/shape_ranges.cc: bert-toy (DEVPACK/bert-toy, else ../shared) built once over
#                                   shape ranges on CUDA against exact-shape engines (route spaces as '+', default
#                                   "precision.default=fp16") -> OUT/shapes.txt
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
    profile:*|ncutimes:*|pin:*|pinbench:*|compare:*|tune:*|overhead:*) IFS=: read -r _ m b _ <<< "$s"; echo "$m:$b" ;;
    ncu:*) IFS=: read -r _ m b _ _ <<< "$s"; echo "$m:$b" ;;
    torch:*) IFS=: read -r _ _ ms <<< "$s"; echo "$ms" | tr ',' '\n' ;;
    bench:*) IFS=: read -r _ _ ms <<< "$s"; echo "$ms" | tr ',' '\n' ;;
    fallbacks:*) IFS=: read -r _ ms <<< "$s"; echo "$ms" | tr ',' '\n' ;;
  esac
done | sort -u | tr '\n' ',' | sed 's/,$//')
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)  # Nsight Compute, if any
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
    ncu:*|ncutimes:*)
      IFS=: read -r kind m b rx route <<< "$s"
      [ "$kind" = ncutimes ] && { route=$rx; rx=""; }
      route=${route:-precision.default=fp16}
      run=(tactician run "$mdir/$m/model.onnx" --backend cuda --route "${route//+/ }" --random-inputs --dim batch=$b)
      if [ "$kind" = ncu ]; then
        timeout 300 "$ncu_bin" --clock-control none --cache-control none --kernel-name "regex:$rx" --launch-skip 1 \
          --launch-count 1 --set full "${run[@]}" > "$out/ncu-$m-b$b-$rx.txt" 2>&1
      else
        timeout 300 "$ncu_bin" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
          "${run[@]}" > "$out/ncutimes-$m-b$b.csv" 2>&1
      fi ;;
    pin:*|pinbench:*)
      IFS=: read -r kind m b tacs nodes <<< "$s"
      model=$mdir/$m/model.onnx
      tactician knobs "$model" --backend cuda --dim batch=$b --json > /tmp/knobs-$m-$b.json 2>> "$out/pins.txt"
      for tac in ${tacs//,/ }; do
        route="precision.default=fp16 $(python3 -c 'import json, re, sys
t, rx = sys.argv[2], sys.argv[3]
print(" ".join(k["name"] + "=" + t for k in json.load(open(sys.argv[1]))
               if k["name"].startswith("tactic.") and t in k["values"] and re.search(rx, k["name"])))' /tmp/knobs-$m-$b.json $tac "${nodes:-.}")"
        r=$(timeout 120 tactician bench "$model" --backend cuda --route "$route" --dim batch=$b --min-seconds 1 --json 2>&1 | tail -1)
        [ "$kind" = pinbench ] && { echo "$m b$b $tac${nodes:+ on $nodes}: bench $r" >> "$out/pins.txt"; continue; }
        k=$(timeout 200 "$ncu_bin" --clock-control none --cache-control none --kernel-name regex:attention \
              --metrics gpu__time_duration.sum --csv tactician run "$model" --backend cuda --route "$route" --random-inputs \
              --dim batch=$b 2>&1 | python3 -c 'import csv, statistics, sys
v = [float(r[-1].replace(",", "")) / 1e3 for r in csv.reader(sys.stdin) if len(r) > 5 and r[-3] == "gpu__time_duration.sum"]
print("%d kernels, median %.2f us" % (len(v), statistics.median(v)) if v else "no kernels")')
        echo "$m b$b $tac: $k; bench $r" >> "$out/pins.txt"
      done ;;
    torch:*)
      IFS=: read -r _ modes ms <<< "$s"
      timeout 500 python3 "$root/bench/cuda_torch.py" --models "$ms" --modes "$modes" >> "$out/torch.jsonl" 2>> "$out/torch.log" ;;
    bench:*)
      IFS=: read -r _ configs ms <<< "$s"
      TAC_CONFIGS="${configs//,/ }" LOW=fp16 bash "$root/bench/run_cuda.sh" "$pkg" "$out/bench" --skip-torch \
        --models "${ms//,/ }" --models-dir "$mdir" > "$out/bench.txt" 2>&1 ;;
    unit)
      bash "$root/scripts/gpu_check.sh" "$pkg" "$out/unit" --unit ;;
    unit:*)
      timeout 300 unit_tests --gtest_filter="${s#unit:}" > /tmp/unit-filter.txt 2>&1
      log "unit ${s#unit:}: rc=$?"
      grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[       OK |Failure|Expected|Which is|actual|got " /tmp/unit-filter.txt |
        head -300 > "$out/unit-filter.txt" ;;
    check:*)
      IFS=: read -r _ name route rtol atol <<< "$s"
      extra=()
      [ -n "$route" ] && extra=(--route "${route//+/ }" --rtol "${rtol:-1e-3}" --atol "${atol:-1e-4}")
      bash "$root/scripts/gpu_check.sh" "$pkg" "$out/check-$name" "${extra[@]}" "$dp"/models/*/ ;;
    checktune:*)
      bash "$root/scripts/gpu_check.sh" "$pkg" "$out/checktune" --tune "${s#checktune:}" "$dp"/models/*/ ;;
    fallbacks:*)
      IFS=: read -r _ ms <<< "$s"
      for mb in ${ms//,/ }; do
        m=${mb%%:*}
        timeout 120 tactician build "$mdir/$m/model.onnx" --backend cuda --route precision.default=fp16 -o "/tmp/$m.plan" \
          > "/tmp/build-$m.txt" 2>&1
        rc=$?
        grep 'runs on the host' "/tmp/build-$m.txt" | sed "s|^|$m: |" >> "$out/fallbacks-detail.txt"
        b=$(timeout 60 tactician bench "/tmp/$m.plan" --min-seconds 1 --json 2>&1 | tail -1)
        c=$(timeout 120 tactician check "$mdir/$m" --backend cuda --route precision.default=fp16 --tolerance "cos>=0.999" 2>&1 |
            grep -E "^(FAIL|ERROR|CRASH)|tests in" | tr '\n' ' ')
        echo "$m: build rc=$rc, host steps $(grep -c 'runs on the host' "/tmp/build-$m.txt"); bench $b; check $c" >> "$out/fallbacks.txt"
        [ $rc = 0 ] || tail -3 "/tmp/build-$m.txt" | sed "s|^|$m: |" >> "$out/fallbacks-detail.txt"
      done ;;
    compare:*)
      IFS=: read -r _ m b route outs <<< "$s"
      route=${route:-precision.default=fp16}
      n=$((n + 1))
      extra=()
      for o in ${outs//,/ }; do extra+=(--output "$o"); done
      timeout 200 tactician compare "$mdir/$m/model.onnx" --a "${route//+/ }" --a-backend cuda --b default --b-backend cpu \
        --dim batch=$b --tolerance "cos>=0.999" "${extra[@]}" > "$out/compare-$n-$m.txt" 2>&1 ;;
    nodes*)
      t=${s#nodes}; t=${t#:}
      mkdir -p /tmp/node && tar xJf "$dp/node.tar.xz" -C /tmp/node
      timeout "${t:-400}" tactician check /tmp/node --backend cuda --json -j "$(nproc)" --timeout 60 \
        --expect-pass "$root/tests/conformance/node.cuda.pass" --write-pass "$out/nodes.pass" > /tmp/nodes.txt 2>&1
      log "nodes: rc=$?"
      grep -E "^FAIL|^CRASH|^ERROR|^TIMEOUT|^UNSUP|^REGRESSION" /tmp/nodes.txt | head -400 > "$out/nodes.txt"; tail -4 /tmp/nodes.txt >> "$out/nodes.txt" ;;
    tune:*)
      IFS=: read -r _ m b budget ev tol <<< "$s"
      n=$((n + 1))
      td=/tmp/tune-$n-$m-b$b-$ev
      rm -rf "$td" && mkdir -p "$td"
      timeout 500 tactician tune "$mdir/$m/model.onnx" --backend cuda --route precision.default=fp16 --dim batch=$b \
        --budget "$budget" --tolerance "${tol:-cos>=0.999}" --evaluator "$ev" --db "$td/tune.db" --out "$td" \
        > "$out/tune-$n-$m-b$b-$ev.txt" 2>&1
      log "tune $m b$b $ev: rc=$?"
      cp "$td/summary.json" "$out/tune-$n-$m-b$b-$ev.json" 2>/dev/null
      mkdir -p "$out/tunedb" && cp "$td/tune.db" "$out/tunedb/tune-$n-$m-b$b-$ev.db" 2>/dev/null ;;
    overhead:*)
      IFS=: read -r _ m b nreq <<< "$s"
      timeout 400 python3 "$root/bench/evaluator_overhead.py" --bin "$pkg/bin/tactician" --model "$mdir/$m" --backend cuda \
        --route "precision.default=fp16" --dim batch=$b --n "${nreq:-5}" > "$out/overhead-$m-b$b.txt" 2>&1 ;;
    faults)
      sq=$dp/squeezenet1.1
      [ -d "$sq" ] || sq=$root/../shared/models/squeezenet1.1
      timeout 500 bash "$root/tests/cli/tune_faults_test.sh" "$pkg/bin/tactician" "$sq" cuda > "$out/faults.txt" 2>&1 ;;
    shapes|shapes:*)
      IFS=: read -r _ route <<< "$s"
      route=${route:-precision.default=fp16}
      toy=$dp/bert-toy
      [ -d "$toy" ] || toy=$root/../shared/models/bert-toy
      timeout 400 "$pkg/bin/shape_ranges" "$toy" cuda "${route//+/ }" 5 50 > "$out/shapes.txt" 2>&1 ;;
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
# Folders of logs travel as one archive (a call returns at most 8 files).
dirs=$(cd "$out" && ls -d */ 2>/dev/null | tr -d /)
[ -n "$dirs" ] && tar czf "$out/logs.tgz" -C "$out" $dirs && (cd "$out" && rm -rf $dirs)
