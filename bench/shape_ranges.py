#!/usr/bin/env python3
"""One plan over shape ranges against plans built for exactly one shape (issue 29, measured item 2).

bert-toy (batch and sequence length symbolic) is built once with --shapes batch=1..8:4,
max_seq_len_in_batch=16..256:128; at every (batch, seq) in {1,3,8}x{16,100,256} it runs, its
outputs are compared with the exact-shape engine's, and both are timed in interleaved rounds
(median of the per-round medians). Also printed: the first run at a new size, which builds the
specialized engine.

  PYTHONPATH=build/python /usr/bin/python3 bench/shape_ranges.py [--threads 1] [--rounds 5] [--runs 50]"""
import argparse
import os
import statistics
import time

import numpy as np

import tactician

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--model", default=os.path.join(here, "..", "..", "shared", "models", "bert-toy"))
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--runs", type=int, default=50)
ap.add_argument("--backend", default="cpu")
a = ap.parse_args()

SHAPES = "batch=1..8:4,max_seq_len_in_batch=16..256:128"
model = tactician.Model(a.model)
ranged = tactician.build(model, backend=a.backend, threads=a.threads, shapes=SHAPES)


def feeds(batch, seq, seed):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq - seq // 4:] = 0
    return {"input_ids": rng.integers(0, 99, (batch, seq), dtype=np.int64),
            "token_type_ids": rng.integers(0, 2, (batch, seq), dtype=np.int64), "input_mask": mask}


def median_ms(engine, f, runs):
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        engine.run(f)
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


print(f"{a.model}, {a.backend}, {a.threads} thread(s), --shapes {SHAPES}; medians of {a.rounds} interleaved rounds "
      f"of {a.runs} runs")
print(f"{'batch':>5} {'seq':>4} {'first run ms':>12} {'ranged ms':>10} {'exact ms':>9} {'ranged/exact':>12} {'max |diff|':>10}")
ratios = []
for batch, seq in [(b, s) for b in (1, 3, 8) for s in (16, 100, 256)] + [(4, 128)]:
    f = feeds(batch, seq, batch * 1000 + seq)
    t0 = time.perf_counter()
    got = ranged.run(f)
    first = (time.perf_counter() - t0) * 1e3
    exact = tactician.build(model, backend=a.backend, threads=a.threads,
                            dims={"batch": batch, "max_seq_len_in_batch": seq})
    want = exact.run(f)
    diff = max(float(np.max(np.abs(got[k] - want[k]))) for k in want)
    r_ms, e_ms = [], []
    for _ in range(a.rounds):
        r_ms.append(median_ms(ranged, f, a.runs))
        e_ms.append(median_ms(exact, f, a.runs))
    r, e = statistics.median(r_ms), statistics.median(e_ms)
    ratios.append(r / e)
    opt = "  (opt)" if (batch, seq) == (4, 128) else ""
    print(f"{batch:>5} {seq:>4} {first:>12.3f} {r:>10.3f} {e:>9.3f} {r / e:>12.3f} {diff:>10.2e}{opt}")
print(f"ranged/exact: geomean {statistics.geometric_mean(ratios):.3f}, worst {max(ratios):.3f}")
