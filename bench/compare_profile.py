#!/usr/bin/env python3
"""Tactician's per-step profile beside ONNX Runtime's own per-node profile, per op type.

    build/tactician profile MODEL.onnx --threads 1 --json | tail -1 > tac.json
    node bench/ort/bench_ort.js MODEL.onnx --threads 1 --profile /tmp/ort   # writes /tmp/ort_<date>.json
    bench/compare_profile.py tac.json /tmp/ort_*.json [--top 25]

or, both in one go:  bench/compare_profile.py --model MODEL.onnx [--threads 1] [--nodes]

Per op type (as each engine names it after its own fusions: Tactician's FusedConv, Reformat,
...; ORT's FusedConv, ReorderInput, ...): steps / nodes per run and milliseconds per run (Tactician:
the sum of the steps' medians; ORT: the kernel times of its last RUNS runs, averaged), sorted by the
larger of the two, then both totals. An op type one engine has and the other has not is where the
fusions differ; the same op type slower on one side is a kernel to look at.

--nodes: per node instead, Tactician's steps paired with ORT's nodes by name (ORT names a node it
rewrote after its output, "<node>_output_0_nchwc"; both sides sanitized to [A-Za-z0-9.]), an ORT
node no step matched that is no convolution or matmul (a separate activation, a reorder) counted with
the matched node before it; a step ORT renamed (a Conv fused with its Relu is named after the Relu's
output) shows "-", and the ORT nodes left over are summed at the end.
"""
import argparse
import collections
import glob
import json
import os
import re
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


def ort_kernels(path, runs=None):
    """ORT's kernel events inside its last RUNS timed runs (all runs by default), in time order, the
    number of those runs and their median time in ms."""
    with open(path) as f:
        events = json.load(f)
    model_runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                        key=lambda e: e["ts"])
    if not model_runs:
        sys.exit(f"compare_profile: {path} has no model_run events (not an ONNX Runtime profile?)")
    last = model_runs[-runs:] if runs else model_runs
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in last]
    kernels = [e for e in sorted(events, key=lambda e: e["ts"])
               if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")
               and any(a <= e["ts"] <= b for a, b in windows)]
    run_ms = sorted(e["dur"] / 1000.0 for e in last)
    return kernels, len(windows), run_ms[len(run_ms) // 2]


def ort_ops(path, runs=None):
    kernels, n, median = ort_kernels(path, runs)
    ops = collections.defaultdict(lambda: [0, 0.0])
    for e in kernels:
        op = e.get("args", {}).get("op_name", "?")
        ops[op][0] += 1
        ops[op][1] += e["dur"] / 1000.0
    return {k: [c / n, ms / n] for k, (c, ms) in ops.items()}, median


def node_key(name):
    name = re.sub(r"_output_\d+(_nchwc)?$", "", name)
    return re.sub(r"[^A-Za-z0-9.]+", "_", name).strip("_")


def ort_nodes(path, runs=None):
    """ORT's kernels of one run in execution order, [(name, op, ms per run)], averaged over the last RUNS runs."""
    kernels, n, _ = ort_kernels(path, runs)
    total = collections.defaultdict(float)
    order = []
    for e in kernels:
        name = e["name"][:-len("_kernel_time")]
        if name not in total:
            order.append((name, e.get("args", {}).get("op_name", "?")))
        total[name] += e["dur"] / 1000.0
    return [(name, op, total[name] / n) for name, op in order]


def fused_names(model):
    """ORT names a node it fused after the fusion's last output ("<tensor>_nchwc"): maps that key to
    the key of the convolution / matmul the fusion started from (walking back from the tensor's
    producer through up to 3 single-producer activations, adds and muls), as Tactician names its step."""
    try:
        import onnx
    except ImportError:
        return {}
    g = onnx.load(model, load_external_data=False).graph
    producer = {o: n for n in g.node for o in n.output}
    heads = ("Conv", "MatMul", "Gemm", "ConvTranspose")
    out = {}
    for n in g.node:
        for o in n.output:
            cur = n
            for _ in range(4):
                if cur.op_type in heads:
                    out[node_key(o)] = node_key(cur.name)
                    break
                ins = [producer[i] for i in cur.input if i in producer]
                if not ins:
                    break
                cur = ins[0]
    return out


def print_nodes(tac_json, ort_json, runs, top, model=None):
    with open(tac_json) as f:
        steps = sorted(json.loads(f.read().strip().splitlines()[-1])["steps"], key=lambda s: s["step"])
    ort = ort_nodes(ort_json, runs)
    by_key = {node_key(n): i for i, (n, _, _) in enumerate(ort)}
    if model:  # ORT's fused nodes under the name of the convolution or matmul they start from
        for k, head in fused_names(model).items():
            if k in by_key and head not in by_key:
                by_key[head] = by_key[k]
    rows, used = [], set()
    step_keys = {node_key(t["node"]) for t in steps}
    for s in steps:
        i = by_key.get(node_key(s["node"]))
        extra = []
        if i is not None:
            used.add(i)
            # ORT nodes that follow the matched one and match no step and are no convolution or matmul
            # of their own: its separate activations (QuickGelu, ...) and reorders.
            j = i + 1
            while (j < len(ort) and j not in used and node_key(ort[j][0]) not in step_keys and
                   ort[j][1] not in ("Conv", "FusedConv", "MatMul", "FusedMatMul", "Gemm")):
                extra.append(ort[j])
                used.add(j)
                j += 1
        ort_ms = (ort[i][2] if i is not None else 0.0) + sum(x[2] for x in extra)
        rows.append((s, ort[i] if i is not None else None, extra, ort_ms))
    rows.sort(key=lambda r: -max(r[0]["engine_us"] / 1000.0, r[3]))
    print(f"{'tactician step':48} {'tactic':22} {'ms':>7}   {'ORT (+ the nodes after it)':40} {'ms':>7} {'ratio':>6}")
    for s, o, extra, ort_ms in rows[:top]:
        tm = s["engine_us"] / 1000.0
        desc = (o[1] + "".join(" +" + x[1] for x in extra)) if o else "-"
        ratio = f"{tm / ort_ms:6.2f}" if ort_ms > 0 else "     -"
        print(f"{s['node'][:48]:48} {s['tactic'][:22]:22} {tm:7.3f}   {desc[:40]:40} {ort_ms:7.3f} {ratio}")
    unmatched = sum(ms for k, (_, _, ms) in enumerate(ort) if k not in used)
    print(f"ORT nodes no step matched: {unmatched:.3f} ms per run")


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
    ap.add_argument("--nodes", action="store_true", help="per node, steps paired with ORT nodes by name")
    a = ap.parse_args()
    if a.model:
        a.tactician_json, a.ort_json, timed = profile_both(a.model, a.threads, os.path.dirname(os.path.abspath(__file__)))
        a.runs = a.runs or timed
    elif not (a.tactician_json and a.ort_json):
        ap.error("give TACTICIAN_JSON and ORT_JSON, or --model")
    if a.nodes:
        print_nodes(a.tactician_json, a.ort_json, a.runs, a.top, a.model)
        return
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
