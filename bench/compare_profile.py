#!/usr/bin/env python3
"""Tactician's per-step profile beside ONNX Runtime's own per-node profile, per op type.

    build/tactician profile MODEL.onnx --threads 1 --json | tail -1 > tac.json
    node bench/ort/bench_ort.js MODEL.onnx --threads 1 --profile /tmp/ort   # writes /tmp/ort_<date>.json
    bench/compare_profile.py tac.json /tmp/ort_*.json [--top 25]

or, both in one go:  bench/compare_profile.py --model MODEL.onnx [--threads 1]

Per op type (as each engine names it after its own fusions: Tactician's FusedConv, Reformat,
...; ORT's FusedConv, ReorderInput, ...): steps / nodes per run and milliseconds per run (Tactician:
the sum of the steps' medians; ORT: the kernel times of its last RUNS runs, averaged), sorted by the
larger of the two, then both totals. An op type one engine has and the other has not is where the
fusions differ; the same op type slower on one side is a kernel to look at.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile


def tactician_ops(path):
    with open(path) as f:
        prof = json.loads(f.read().strip().splitlines()[-1])
    ops = collections.defaultdict(lambda: [0, 0.0])
    for s in prof["steps"]:
        ops[s["op"]][0] += 1
        ops[s["op"]][1] += s["engine_us"] / 1000.0
    return ops, prof.get("median_ms")


def ort_ops(path, runs=None):
    with open(path) as f:
        events = json.load(f)
    model_runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                        key=lambda e: e["ts"])
    if not model_runs:
        sys.exit(f"compare_profile: {path} has no model_run events (not an ONNX Runtime profile?)")
    last = model_runs[-runs:] if runs else model_runs
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in last]
    ops = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        if any(a <= e["ts"] <= b for a, b in windows):
            op = e.get("args", {}).get("op_name", "?")
            ops[op][0] += 1
            ops[op][1] += e["dur"] / 1000.0
    n = len(windows)
    run_ms = sorted(e["dur"] / 1000.0 for e in last)
    return {k: [c / n, ms / n] for k, (c, ms) in ops.items()}, run_ms[len(run_ms) // 2]


def profile_both(model, threads, here):
    tac = os.environ.get("TACTICIAN", os.path.join(here, "..", "build", "tactician"))
    tmp = tempfile.mkdtemp(prefix="compare_profile_")
    out = subprocess.run([tac, "profile", model, "--threads", str(threads), "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_profile: tactician profile failed: {out.stderr.strip()}")
    tac_json = os.path.join(tmp, "tactician.json")
    with open(tac_json, "w") as f:
        f.write(out.stdout.strip().splitlines()[-1])
    ort = subprocess.run(["node", os.path.join(here, "ort", "bench_ort.js"), model, "--threads", str(threads),
                          "--profile", os.path.join(tmp, "ort")], capture_output=True, text=True)
    if ort.returncode != 0:
        sys.exit(f"compare_profile: bench_ort.js failed: {ort.stderr.strip()}")
    found = sorted(glob.glob(os.path.join(tmp, "ort*.json")))
    if not found:
        sys.exit(f"compare_profile: ONNX Runtime wrote no profile under {tmp}")
    return tac_json, found[-1], json.loads(ort.stdout.strip().splitlines()[-1])["runs"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tactician_json", nargs="?")
    ap.add_argument("ort_json", nargs="?")
    ap.add_argument("--model", help="profile MODEL with both engines first (build/tactician or $TACTICIAN, node)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=None, help="ORT: the last RUNS runs (default: all, or the timed "
                                                            "runs with --model)")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    if a.model:
        a.tactician_json, a.ort_json, timed = profile_both(a.model, a.threads, os.path.dirname(os.path.abspath(__file__)))
        a.runs = a.runs or timed
    elif not (a.tactician_json and a.ort_json):
        ap.error("give TACTICIAN_JSON and ORT_JSON, or --model")
    tac, tac_median = tactician_ops(a.tactician_json)
    ort, ort_median = ort_ops(a.ort_json, a.runs)
    keys = sorted(set(tac) | set(ort), key=lambda k: -max(tac.get(k, [0, 0])[1], ort.get(k, [0, 0])[1]))
    print(f"{'op':28} {'tactician steps':>15} {'ms':>8}   {'ORT nodes':>9} {'ms':>8}")
    for k in keys[:a.top]:
        tc, tm = tac.get(k, [0, 0.0])
        oc, om = ort.get(k, [0, 0.0])
        print(f"{k:28} {tc:15d} {tm:8.3f}   {oc:9.0f} {om:8.3f}")
    if len(keys) > a.top:
        print(f"... {len(keys) - a.top} more op types")
    st, so = sum(v[1] for v in tac.values()), sum(v[1] for v in ort.values())
    print(f"{'sum of steps / nodes':28} {sum(v[0] for v in tac.values()):15d} {st:8.3f}   "
          f"{sum(v[0] for v in ort.values()):9.0f} {so:8.3f}")
    print(f"end to end (median run, ms): tactician {tac_median:.3f}, ORT {ort_median:.3f} (the profiled runs; "
          f"profiling adds overhead to both)")


if __name__ == "__main__":
    main()
