#!/usr/bin/env bash
# Fixed candidate list (--strategy full on memory.*,pass.fuse_*: 768 points, same order for every
# configuration), 45 s budget, configurations interleaved over 2 rounds (bench/results/mpi-cpu-2026-12-03.md).
# Usage: [B=build-mpi/tactician] [M=model.onnx] [OUT=dir] bench/mpi_cpu_rounds.sh; then bench/mpi_cpu_table.py OUT 45
set -u
cd "$(dirname "$0")/.."
B=${B:-build-mpi/tactician}
M=${M:-../shared/models/squeezenet1.1/model.onnx}
D=${OUT:-/tmp/mpibench/rounds}
rm -rf $D; mkdir -p $D
MPI="mpirun --oversubscribe --allow-run-as-root --bind-to none --enable-recovery"
ARGS="--strategy full --knobs memory.*,pass.fuse_* --budget 45s --threads 1 --json"
run() {
  tag=$1; shift
  echo "CMD $tag: $* $ARGS --db $D/$tag.db  loadavg: $(cat /proc/loadavg)" >> $D/cmds
  start=$(date +%s.%N)
  "$@" $ARGS --db $D/$tag.db > $D/$tag.out 2> $D/$tag.err
  echo "rc=$? $tag wall=$(echo "$(date +%s.%N) - $start" | bc)" >> $D/cmds
}
for r in 1 2; do
  run np1-core0.r$r taskset -c 0 $B tune $M
  run np2.r$r $MPI -np 2 $B tune $M
  run np3.r$r $MPI -np 3 $B tune $M
  run np1.r$r $B tune $M
done
echo done >> $D/cmds
