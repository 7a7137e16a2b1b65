#!/usr/bin/env python3
"""Fits the default ranking's cost table (src/kernels/cost_table.inc) to isolated timings.

    build/cost_samples $(models) > samples.tsv          # every applicable tactic of every conv /
                                                          # matmul step, timed alone (1 thread)
    bench/fit_costs.py samples.tsv --write src/kernels/cost_table.inc
    bench/fit_costs.py samples.tsv                       # report only: fit error, ranking quality

Model (src/kernels/cost_model.h): estimate = formula * a * s1^b1 * s2^b2 * s3^b3 per (family,
tactic, regime level), the most specific level with a row winning (s1..s3: the step's sizes, as
the sampler wrote them). Per row, in log space: y = log(measured / formula) against
x = log(s1, s2, s3); b by ridge regression (RIDGE, slopes clamped to B_RANGE) on the sizes that
vary over the row's samples when it has >= MIN_SLOPE_SAMPLES, else b = 0; a = exp(median(y - b.x)).

Reported, on the samples given (each step = one (model, route, node); candidates = its tactics):
  fit error     median and 90th percentile of |log(estimate / measured)| as a percentage, in
                sample and leave-one-model-out (refit without the model, predict the model);
  ranking       share of steps where the tactic the ranking picks measures within 5% of the
                isolated-fastest candidate, and the time lost summed over steps, for the ranking
                the samples were taken with ("chosen" column), the fitted table in sample, and
                leave-one-model-out.
Every tactic is fitted, oneDNN's Winograd included: ranked on its measured speed, it costs no accuracy
on the models sampled (docs/results.md, "Winograd in the default route").
"""
import argparse
import collections
import datetime
import gzip
import math
import platform
import re
import statistics
import sys

import numpy as np

MIN_SAMPLES = 8
MIN_SLOPE_SAMPLES = 8
RIDGE = 0.05
B_RANGE = (-1.0, 1.0)
RANK_ITERS, RANK_LR, RANK_TAU = 400, 0.02, 0.1
ANCHOR, RIDGE_RANK = 0.05, 0.001


def levels(regime):
    parts = regime.split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 0, -1)] + ["*"]


def load(path):
    rows = []
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(header, line.rstrip("\n").split("\t")))
            for k in ("formula_ns", "estimate_ns", "measured_ns", "s1", "s2", "s3"):
                r[k] = float(r[k])
            r["chosen"] = r["chosen"] == "1"
            r["count"] = int(r.get("count", 1))
            if not (0 < r["formula_ns"] < 1e29 and 0 < r["measured_ns"] < math.inf):
                continue
            r["step"] = (r["model"], r["route"], r["node"])
            rows.append(r)
    return rows


def fit_one(samples):
    x = np.log(np.maximum([[r["s1"], r["s2"], r["s3"]] for r in samples], 1e-6))
    y = np.log([r["measured_ns"] / r["formula_ns"] for r in samples])
    b = np.zeros(3)
    vary = x.std(axis=0) >= 0.3
    if len(samples) >= MIN_SLOPE_SAMPLES and vary.any():
        xc = x[:, vary] - x[:, vary].mean(axis=0)
        yc = y - y.mean()
        k = xc.shape[1]
        b[vary] = np.linalg.solve(xc.T @ xc + RIDGE * len(samples) * np.eye(k), xc.T @ yc)
        b = np.clip(b, *B_RANGE)
    a = math.exp(float(np.median(y - x @ b)))
    return a, [float(v) for v in b]


def regress(rows):
    """Per row, the least-squares fit of log(measured / formula) (fit_one)."""
    groups = collections.defaultdict(list)
    for r in rows:
        for lv in levels(r["regime"]):
            groups[(r["family"], r["tactic"], lv)].append(r)
    return {k: (*fit_one(v), len(v)) for k, v in groups.items() if len(v) >= MIN_SAMPLES}


def row_of(table, r):
    for lv in levels(r["regime"]):
        if (r["family"], r["tactic"], lv) in table:
            return (r["family"], r["tactic"], lv)
    return None


def refine_for_ranking(rows, table):
    """Adjusts the regressed rows so that, step by step, the measured-faster tactic is estimated
    faster: gradient descent on a pairwise logistic loss (every pair of candidates of a step
    whose times differ by more than 5%, weighted by the log time at stake and the step's node
    count), anchored by the squared log error (ANCHOR) and a ridge on the slopes."""
    keys = sorted(table)
    index = {k: i for i, k in enumerate(keys)}
    theta = np.array([[math.log(table[k][0]), *table[k][1]] for k in keys])
    samples = [r for r in rows if row_of(table, r)]
    if not samples:
        return table
    pos = {id(r): i for i, r in enumerate(samples)}
    ri = np.array([index[row_of(table, r)] for r in samples])
    feats = np.hstack([np.ones((len(samples), 1)),
                       np.log(np.maximum([[r["s1"], r["s2"], r["s3"]] for r in samples], 1e-6))])
    base = np.log([r["formula_ns"] for r in samples])
    meas = np.log([r["measured_ns"] for r in samples])
    fast, slow, w = [], [], []
    for cands in by_step(samples).values():
        for x in cands:
            for y in cands:
                if y["measured_ns"] > 1.05 * x["measured_ns"]:
                    fast.append(pos[id(x)])
                    slow.append(pos[id(y)])
                    w.append(x["count"] * min(math.log(y["measured_ns"] / x["measured_ns"]), 1.0))
    fast, slow, w = np.array(fast, dtype=int), np.array(slow, dtype=int), np.array(w)
    if not len(w):
        return table
    w /= w.sum()
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for it in range(1, RANK_ITERS + 1):
        pred = base + np.einsum("ij,ij->i", feats, theta[ri])
        z = (pred[fast] - pred[slow]) / RANK_TAU
        g_pair = w / RANK_TAU / (1 + np.exp(-z))  # d softplus(z) / d(pred_fast - pred_slow)
        g_pred = np.zeros(len(samples))
        np.add.at(g_pred, fast, g_pair)
        np.add.at(g_pred, slow, -g_pair)
        g_pred += ANCHOR * 2 * (pred - meas) / len(samples)
        grad = np.zeros_like(theta)
        np.add.at(grad, ri, g_pred[:, None] * feats)
        grad[:, 1:] += RIDGE_RANK * 2 * theta[:, 1:]
        m = 0.9 * m + 0.1 * grad  # Adam
        v = 0.999 * v + 0.001 * grad ** 2
        theta -= RANK_LR * (m / (1 - 0.9 ** it)) / (np.sqrt(v / (1 - 0.999 ** it)) + 1e-9)
        theta[:, 1:] = np.clip(theta[:, 1:], *B_RANGE)
    return {k: (math.exp(theta[i, 0]), [float(b) for b in theta[i, 1:]], table[k][2]) for k, i in index.items()}


def fit(rows):
    return refine_for_ranking(rows, regress(rows))


def predict(table, r):
    for lv in levels(r["regime"]):
        row = table.get((r["family"], r["tactic"], lv))
        if row:
            a, b, _ = row
            return r["formula_ns"] * a * math.prod(max(r[k], 1e-6) ** bk for k, bk in zip(("s1", "s2", "s3"), b))
    return r["formula_ns"]


def errors(pairs):
    e = sorted(abs(math.log(p / m)) for p, m in pairs)
    if not e:
        return "n/a"
    pct = lambda v: 100 * (math.exp(v) - 1)
    return f"median {pct(e[len(e) // 2]):.0f}%, p90 {pct(e[int(len(e) * 0.9)]):.0f}% over {len(e)} samples"


def by_step(rows):
    steps = collections.defaultdict(list)
    for r in rows:
        steps[r["step"]].append(r)
    return steps


def ranking(steps, pick):
    """Share of nodes (steps with >= 2 candidates, each counted once per node sharing its
    signature) whose pick is within 5% of the fastest candidate, and the time lost."""
    n = within = 0
    lost = best = 0.0
    for cands in steps.values():
        if len(cands) < 2:
            continue
        chosen = pick(cands)
        if chosen is None:
            continue
        fastest = min(c["measured_ns"] for c in cands)
        w = cands[0]["count"]
        n += w
        within += w * (chosen["measured_ns"] <= 1.05 * fastest)
        lost += w * (chosen["measured_ns"] - fastest)
        best += w * fastest
    if not n:
        return "no steps with two or more candidates"
    return f"{within}/{n} nodes within 5% ({100 * within / n:.0f}%), {100 * lost / best:.1f}% time lost over the isolated-fastest"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def write_table(path, table, header_lines):
    with open(path, "w") as f:
        f.write("// Written by bench/fit_costs.py; do not edit by hand (src/kernels/cost_model.h says how it is read).\n")
        for line in header_lines:
            f.write(f"// {line}\n")
        f.write("// {family, tactic, regime, a, {b1, b2, b3}, samples}: factor = a * s1^b1 * s2^b2 * s3^b3\n")
        for (fam, tac, lv), (a, b, n) in sorted(table.items()):
            bs = ", ".join(f"{round(v, 4) + 0.0:g}" for v in b)
            f.write(f'{{"{fam}", "{tac}", "{lv}", {a:.4g}, {{{bs}}}, {n}}},\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("samples")
    ap.add_argument("--write", help="the cost table to write (src/kernels/cost_table.inc)")
    ap.add_argument("--eval", default="bench/models/", help="substring of the model paths the ranking is reported on "
                                                           "separately (default: the wide models of export_models.py)")
    a = ap.parse_args()
    rows = load(a.samples)
    if not rows:
        sys.exit(f"fit_costs: no usable samples in {a.samples}")
    table = fit(rows)
    steps = by_step(rows)
    models = sorted({r["model"] for r in rows})
    # Leave one model out: refit without it, predict its samples.
    lomo = {}
    for m in models:
        t = fit([r for r in rows if r["model"] != m])
        for s, cands in steps.items():
            if s[0] == m:
                for c in cands:
                    lomo[id(c)] = predict(t, c)
    fitted = {id(c): predict(table, c) for cands in steps.values() for c in cands}

    def pick_by(est):
        return lambda cands: min(cands, key=lambda c: est[id(c)])

    lines = [
        f"samples: {a.samples} ({len(rows)} timings, {len(steps)} steps, {len(models)} models), "
        f"fitted {datetime.date.today().isoformat()}; timed on: {cpu_model()}",
        "models: " + " ".join(re.sub(r"/model\.onnx$", "", m).split("/")[-1] for m in models),
        "fit error |log(estimate / measured)|, in sample: " + errors((fitted[id(r)], r["measured_ns"]) for r in rows),
        "  leave one model out: " + errors((lomo[id(r)], r["measured_ns"]) for r in rows),
        "  the estimates the samples were ranked with: " + errors((r["estimate_ns"], r["measured_ns"]) for r in rows),
    ]
    for name, sel in (("all models", lambda s: True), (f"models under {a.eval}", lambda s: a.eval in s[0]),
                      ("the others", lambda s: a.eval not in s[0])):
        sub = {s: c for s, c in steps.items() if sel(s)}
        if not sub:
            continue
        lines.append(f"ranking on {name}:")
        lines.append("  as sampled (the plan's choice): " +
                     ranking(sub, lambda cands: next((c for c in cands if c["chosen"]), None)))
        lines.append("  fitted, in sample:              " + ranking(sub, pick_by(fitted)))
        lines.append("  fitted, leave one model out:    " + ranking(sub, pick_by(lomo)))
    print("\n".join(lines))
    if a.write:
        write_table(a.write, table, lines)
        print(f"wrote {a.write}: {len(table)} rows")


if __name__ == "__main__":
    main()
