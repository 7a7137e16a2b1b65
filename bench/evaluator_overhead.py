#!/usr/bin/env python3
"""What one tuner candidate costs beyond its build and measurement (issue 28): the same request
(the default route, checked against the test data, timed for --min-seconds) evaluated N times by a
fresh `tactician evaluate` child each (how the tuner worked before) and by one persistent
`tactician evaluate --serve` worker (tuner/evaluator.h, EvalWorker), interleaved.

  bench/evaluator_overhead.py --bin build/tactician --model ../shared/models/squeezenet1.1 \
      [--backend cpu|cuda] [--route "threads=1"] [--dim S=N]... [--n 10] [--min-seconds 0.1]

Prints per mode the median wall time per request, the child's own build time and the time it
measured, and the rest (process start, library and CUDA initialisation, model and data loading,
checking), then the ratio of the medians (fresh / persistent)."""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def field(key, value):
    b = value.encode()
    return key.encode() + b" %d\n" % len(b) + b + b"\n"


def request_text(a, data):
    fields = [("model_path", os.path.join(a.model, "model.onnx")), ("data_dir", data), ("route", a.route),
              ("tolerance", "cos>=0.999")] + [("dim", d) for d in a.dim] + [("min_seconds", repr(a.min_seconds)), ("min_runs", "10"),
              ("save_plan", ""), ("shapes", ""), ("check", "1"), ("measure", "1"), ("planted_faults", "0"),
              ("profile", "0"), ("calibration_dir", ""), ("calibration_cache", ""), ("backend", a.backend),
              ("compare_route", ""), ("compare_rounds", "4")]
    return b"".join(field(k, v) for k, v in fields)


def parse(out):
    r = {}
    for line in out.decode(errors="replace").splitlines():
        k, _, v = line.partition(" ")
        if k in ("status", "reason", "build_ms", "median_ms", "runs"):
            r[k] = v
    if r.get("status") != "ok":
        raise SystemExit("evaluation failed: %s" % r)
    return r


def fresh(a, data):
    args = [a.bin, "evaluate", "--model", os.path.join(a.model, "model.onnx"), "--data", data, "--route", a.route,
            "--tolerance", "cos>=0.999", "--min-seconds", str(a.min_seconds), "--min-runs", "10", "--check", "1",
            "--measure", "1", "--profile", "0", "--plant-faults", "0", "--backend", a.backend]
    for d in a.dim:
        args += ["--dim", d]
    t0 = time.perf_counter()
    out = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False).stdout
    return time.perf_counter() - t0, parse(out)


class Worker:
    def __init__(self, a):
        self.sock, child = socket.socketpair()
        self.proc = subprocess.Popen([a.bin, "evaluate", "--serve"], stdin=child, stdout=child,
                                     stderr=subprocess.DEVNULL)
        child.close()

    def evaluate(self, text):
        t0 = time.perf_counter()
        self.sock.sendall(b"%d\n" % len(text) + text)
        out = b""
        while not (out == b"end\n" or out.endswith(b"\nend\n")):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("the worker died")
            out += chunk
        return time.perf_counter() - t0, parse(out[:-4])

    def close(self):
        self.sock.close()
        self.proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/tactician")
    p.add_argument("--model", required=True, help="a folder with model.onnx and test_data_set_0/")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--route", default="threads=1")
    p.add_argument("--dim", action="append", default=[], help="SYMBOL=N, as the test data binds it")
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--min-seconds", type=float, default=0.1)
    a = p.parse_args()
    data = tempfile.mkdtemp(prefix="tac-evo-")
    try:
        src = os.path.join(a.model, "test_data_set_0")
        for f in sorted(os.listdir(src)):
            kind, _, k = f.partition("_")
            shutil.copy(os.path.join(src, f), os.path.join(data, ("input_" if kind == "input" else "expected_") + k))
        text = request_text(a, data)
        worker = Worker(a)
        rows = {"fresh": [], "persistent": []}
        for _ in range(a.n):  # interleaved: a slow spell of the machine falls on both
            rows["fresh"].append(fresh(a, data))
            rows["persistent"].append(worker.evaluate(text))
        worker.close()
    finally:
        shutil.rmtree(data, ignore_errors=True)
    print("%s on %s, %d requests per mode, --min-seconds %g" % (os.path.basename(a.model.rstrip("/")), a.backend,
                                                                a.n, a.min_seconds))
    med = {}
    for mode, rs in rows.items():
        wall = statistics.median(w * 1e3 for w, _ in rs)
        build = statistics.median(float(r["build_ms"]) for _, r in rs)
        timed = statistics.median(float(r["median_ms"]) * int(r["runs"]) for _, r in rs)
        engine = statistics.median(float(r["median_ms"]) for _, r in rs)
        med[mode] = wall
        print("  %-10s  wall %8.1f ms  build %7.1f ms  timed runs %7.1f ms  rest %7.1f ms  (engine %.3f ms; medians)" %
              (mode, wall, build, timed, wall - build - timed, engine))
    print("  fresh / persistent wall per request: %.2fx" % (med["fresh"] / med["persistent"]))


if __name__ == "__main__":
    main()
