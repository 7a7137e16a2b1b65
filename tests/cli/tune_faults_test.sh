#!/usr/bin/env bash
# Planted faults (issue 4): with --plant-faults the first convolution may be given a tactic that
# crashes, one that hangs and one that returns wrong numbers. The tuner must record each as that
# candidate's outcome (crashed, timeout, rejected), keep going, and return a best route that
# uses none of them and passes the accuracy gate. No --timeout: the hang is killed at the search
# candidates' own limit, 10x the default route's evaluation time, 30 s at least (not the 300 s of
# --timeout's default).
# On CUDA (third argument "cuda", a GPU present: scripts/gpu_steps.sh's faults step) the same, with
# a fourth fault: an illegal device memory access, which poisons the worker's
# CUDA context; the candidate is recorded as failed and the worker replaced.
# Usage: tune_faults_test.sh path/to/tactician path/to/bundled/model/dir [cuda]
set -u
bin="$1"
model="$2/model.onnx"
backend=${3:-cpu}
knob=tactic.Conv_0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" tune "$model" --plant-faults --strategy full --knobs "$knob" --budget 300s --threads 1 --backend "$backend" \
  --db "$tmp/t.db" --out "$tmp/out" --json --quiet > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: tune exited $rc"; cat "$tmp/err.txt"; exit 1; fi
python3 - "$tmp/t.db" "$(tail -1 "$tmp/out.txt")" "$backend" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select route, status, reason from candidates").fetchall()
want = {"planted_crash": "crashed", "planted_hang": "timeout", "planted_wrong": "rejected"}
if sys.argv[3] == "cuda":
    want["planted_cuda_error"] = "failed"
by = {}
for route, status, reason in rows:
    for fault in want:
        if "=" + fault + " " in route + " ":
            by[fault] = (status, reason)
for fault, status in want.items():
    assert fault in by, f"{fault} was never evaluated: {rows}"
    assert by[fault][0] == status, f"{fault}: recorded {by[fault]}, wanted {status}"
import re
m = re.fullmatch(r"killed after (\d+) s", by["planted_hang"][1])
assert m and 30 <= int(m.group(1)) <= 120, f"planted_hang not killed at the candidates' limit: {by['planted_hang']}"
ok = [r for r in rows if r[1] == "ok"]
assert len(ok) >= 3, f"too few good candidates: {rows}"
s = json.loads(sys.argv[2])
assert "planted" not in s["best_route"], s["best_route"]
assert s["failed"] >= 2 and s["rejected"] >= 1, s
print("planted faults recorded:", {k: v[0] for k, v in by.items()}, "; best:", s["best_route"])
PY
[ $? -eq 0 ] || { echo "FAIL: planted faults"; exit 1; }
grep -q planted "$tmp/out/best.route" && { echo "FAIL: best.route uses a planted fault"; exit 1; }
echo "tune fault-handling test passed"
