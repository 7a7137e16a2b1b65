#!/usr/bin/env bash
# Distributed tuning (issue 6) on the bundled model, on the CPU, ranks on one machine:
#  1. equality: a fixed candidate list (--strategy full on one convolution's tactics, planted
#     faults included: ok, crashed, timeout and rejected candidates) gives the same rows (route,
#     status, accuracy metrics) in one process and under `mpirun -np 3`;
#  2. a short default (tpe) search under `mpirun -np 3` finishes with a valid best, writes its
#     outputs, and every evaluator rank evaluated candidates;
#  3. a planted worker death (--mpi-test-lose 2, under mpirun --enable-recovery): the search goes
#     on with rank 1, the lost candidate is recorded as crashed naming rank 2; the same for a
#     worker that hangs (it is killed at its deadline, and the MPI job still ends); an evaluator
#     pins itself inside the CPU mask its launcher was given (taskset), not onto CPU 0;
#  4. bad input: a model no rank can read is a clear error, no hang.
# Skipped (exit 77) when mpirun is absent. Usage: tune_mpi_test.sh path/to/tactician path/to/model/dir
set -u
bin="$1"
model="$2/model.onnx"
command -v mpirun > /dev/null || { echo "SKIP: mpirun not found (Debian: openmpi-bin)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails+1)); }
# Every mpirun is bounded by `timeout`: a hang fails the test instead of blocking CI.
mpirun_flags=(--oversubscribe --allow-run-as-root --bind-to none)
mpi() { timeout 300 mpirun "${mpirun_flags[@]}" "$@"; }

# 1. Equality on a fixed candidate list.
space=(--plant-faults --strategy full --knobs "tactic.Conv_0" --budget 300s --threads 1 --timeout 5s --json --quiet)
"$bin" tune "$model" "${space[@]}" --db "$tmp/one.db" > "$tmp/one.out" 2> "$tmp/one.err" || { fail "single-process tune exited $?"; cat "$tmp/one.err"; }
mpi -np 3 "$bin" tune "$model" "${space[@]}" --db "$tmp/mpi.db" > "$tmp/mpi.out" 2> "$tmp/mpi.err" || { fail "mpirun -np 3 tune exited $?"; cat "$tmp/mpi.err"; }
python3 - "$tmp/one.db" "$tmp/mpi.db" "$(tail -1 "$tmp/one.out")" "$(tail -1 "$tmp/mpi.out")" <<'PY' || fail "equality of single-process and distributed rows"
import json, sqlite3, sys
def rows(path):
    db = sqlite3.connect(path)
    return {r[0]: r[1:] for r in db.execute("select route, status, metrics_json from candidates")}
one, mpi = rows(sys.argv[1]), rows(sys.argv[2])
assert len(one) >= 5, one
assert one.keys() == mpi.keys(), (sorted(one), sorted(mpi))
for route in one:
    assert one[route] == mpi[route], (route, one[route], mpi[route])
statuses = sorted({v[0] for v in one.values()})
assert {"ok", "crashed", "timeout", "rejected"} <= set(statuses), statuses
s1, s2 = json.loads(sys.argv[3]), json.loads(sys.argv[4])
assert s1["stop_reason"] == s2["stop_reason"] == "search space exhausted by full", (s1["stop_reason"], s2["stop_reason"])
assert "planted" not in s2["best_route"], s2["best_route"]
by = s2["candidates_by_rank"]
assert set(by) == {"1", "2"} and min(by.values()) >= 1, by
print(f"equal rows: {len(one)} candidates, statuses {statuses}; per rank {by}")
PY

# 2. A short default search over 2 evaluator ranks.
mpi -np 3 "$bin" tune "$model" --budget 35s --threads 1 --db "$tmp/tpe.db" --out "$tmp/out" --json --quiet \
  > "$tmp/tpe.out" 2> "$tmp/tpe.err" || { fail "mpirun -np 3 tune (tpe) exited $?"; cat "$tmp/tpe.err"; }
python3 - "$(tail -1 "$tmp/tpe.out")" "$tmp/tpe.db" <<'PY' || fail "tpe summary"
import json, sqlite3, sys
s = json.loads(sys.argv[1])
assert s["best_ms"] > 0 and s["default_ms"] > 0 and s["speedup"] > 0, s
by = s["candidates_by_rank"]
assert set(by) == {"1", "2"} and min(by.values()) >= 1, by
# Each rank timed the default once; times are relative to the reference rank (1), which is 1.
sp = s["rank_speed"]
assert set(sp) == {"1", "2"} and sp["1"] == 1 and 0.2 < sp["2"] < 5, sp
# The database records who evaluated each candidate ("rank N (host)").
who = {r[0].split(" (")[0] for r in sqlite3.connect(sys.argv[2]).execute("select evaluator from candidates")}
assert who == {"rank 1", "rank 2"}, who
print(f"tpe: {s['candidates']} candidates, per rank {by}, rank speed {sp}, best {s['best_ms']:.3f} ms ({s['speedup']:.3f}x)")
PY
for f in best.plan best.route summary.json report.html; do [ -s "$tmp/out/$f" ] || fail "missing $f"; done
"$bin" run "$model" --plan "$tmp/out/best.plan" --random-inputs > /dev/null 2>&1 || fail "best.plan does not run"
# Resume: rank 0 reads the database it wrote.
# (stdout only: the JSON summary is its last line; a warning on stderr, e.g. about timings on a
# loaded machine, may come after it.)
mpi -np 3 "$bin" tune "$model" --budget 25s --threads 1 --db "$tmp/tpe.db" --json --quiet > "$tmp/tpe2.out" \
  2> "$tmp/tpe2.err" || { fail "resumed mpirun tune exited $?"; cat "$tmp/tpe2.err"; }
python3 - "$(tail -1 "$tmp/tpe2.out")" <<'PY' || { fail "distributed resume"; tail -5 "$tmp/tpe2.out" "$tmp/tpe2.err"; }
import json, sys
s = json.loads(sys.argv[1])
assert s["resumed"] >= 3, s["resumed"]
PY

# 3. A worker that dies on its first job.
mpi --enable-recovery -np 3 "$bin" tune "$model" --strategy full --knobs "memory.*,pass.fuse_*" --budget 35s --threads 1 \
  --timeout 5s --db "$tmp/dead.db" --json --mpi-test-lose 2 > "$tmp/dead.out" 2> "$tmp/dead.err"
rc=$?
[ $rc -eq 0 ] || { fail "tune with a dead rank exited $rc"; tail -20 "$tmp/dead.err"; }
python3 - "$tmp/dead.db" "$(tail -1 "$tmp/dead.out")" <<'PY' || fail "dead rank"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
lost = db.execute("select route, status, reason from candidates where reason like '%rank 2 lost%'").fetchall()
assert len(lost) == 1 and lost[0][1] == "crashed", lost
ok = db.execute("select count(*) from candidates where status = 'ok'").fetchone()[0]
s = json.loads(sys.argv[2])
assert ok >= 5 and s["best_ms"] > 0, (ok, s)
by = s["candidates_by_rank"]
assert by.get("2") == 1 and by.get("1", 0) >= 5, by
print(f"dead rank 2: its candidate recorded as {lost[0][1]} ({lost[0][2]}); rank 1 went on: {by}")
PY
grep -q "rank 2 lost" "$tmp/dead.err" || fail "the loss of rank 2 was not reported"

# 3b. A worker that hangs on its first job: lost at its deadline, killed, the job still ends.
mpi --enable-recovery -np 3 "$bin" tune "$model" --strategy full --knobs "memory.*" --budget 30s --threads 1 \
  --timeout 5s --db "$tmp/hang.db" --json --mpi-test-lose 2:hang > "$tmp/hang.out" 2> "$tmp/hang.err"
rc=$?
[ $rc -eq 0 ] || { fail "tune with a hung rank exited $rc"; tail -20 "$tmp/hang.err"; }
python3 - "$tmp/hang.db" <<'PY' || fail "hung rank"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
lost = db.execute("select status, reason from candidates where reason like '%rank 2 lost%'").fetchall()
assert len(lost) == 1 and lost[0][0] == "crashed" and "killed" in lost[0][1], lost
PY

# 3c. Placement stays inside the launcher's CPU mask (taskset, cgroup; ranks inherit it under
# --bind-to none): one evaluator under a one-CPU mask pins itself to that CPU, not to CPU 0.
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
if [ "$cpu" -gt 0 ]; then
  taskset -c "$cpu" timeout 300 mpirun "${mpirun_flags[@]}" -np 2 "$bin" tune "$model" \
    --strategy full --knobs "memory.planner" --budget 20s --threads 1 --db "$tmp/pin.db" > "$tmp/pin.out" 2> "$tmp/pin.err" ||
    fail "tune under taskset -c $cpu exited $?"
  grep -q "^rank 1 (reference): .*cores $cpu\$" "$tmp/pin.err" ||
    { fail "rank 1 not pinned to CPU $cpu, the one its launcher may use"; grep "^rank" "$tmp/pin.err"; }
fi

# 4. Bad input: nothing to read, no hang.
mpi -np 2 "$bin" tune "$tmp/nosuch.onnx" --budget 30s --threads 1 --db "$tmp/bad.db" > "$tmp/bad.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "tune of a missing model under mpirun: exit code $rc"
grep -q "cannot read the model" "$tmp/bad.out" || { fail "no clear error for a missing model"; cat "$tmp/bad.out"; }

[ $fails -eq 0 ] && echo "tune MPI test passed" || { echo "$fails tune MPI checks failed"; exit 1; }
