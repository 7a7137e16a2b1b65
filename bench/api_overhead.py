#!/usr/bin/env python3
"""Python call overhead of `import tactician` against the C++ API (issue 29): the same engine
(default route, 1 thread, CPU) run on the model's test input, median wall time per run, measured
in rounds that alternate the two sides so that machine noise hits both.

  PYTHONPATH=build/python /usr/bin/python3 bench/api_overhead.py [MODEL_DIR] [--rounds 5] [--runs 2000]
Prints per round the C++ and Python medians, then the median over rounds of the difference."""
import argparse
import os
import statistics
import subprocess
import time

import tactician

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("model", nargs="?", default=os.path.join(here, "..", "..", "shared", "models", "tiny-gpt"))
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--runs", type=int, default=2000)
ap.add_argument("--cpp", default=os.path.join(here, "..", "build", "api_overhead"))
a = ap.parse_args()

model = tactician.Model(a.model)
feeds = {i["name"]: tactician.load_tensor(os.path.join(a.model, "test_data_set_0", f"input_{k}.pb"))
         for k, i in enumerate(model.inputs)}
# The model's symbolic dims bound to the test data's sizes, as api_overhead.cc does.
dims = {d: feeds[i["name"]].shape[j] for i in model.inputs for j, d in enumerate(i["shape"]) if isinstance(d, str)}
engine = tactician.build(model, backend="cpu", threads=1, dims=dims)


def python_median_us(runs):
    for _ in range(runs // 5):
        engine.run(feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        engine.run(feeds)
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


diffs = []
print(f"model {a.model}, {a.runs} runs per side per round, 1 thread")
for r in range(a.rounds):
    cpp = float(subprocess.run([a.cpp, a.model, str(a.runs)], check=True, capture_output=True, text=True).stdout.split()[1])
    py = python_median_us(a.runs)
    diffs.append(py - cpp)
    print(f"round {r}: C++ {cpp:.2f} us, Python {py:.2f} us, overhead {py - cpp:+.2f} us")
print(f"Python overhead per run: median {statistics.median(diffs):+.2f} us over {a.rounds} rounds "
      f"(C++ run {cpp:.2f} us)")
