#!/usr/bin/env python3
"""The CUDA benchmark's table from OUT/{tactician,torch}.jsonl (bench/run_cuda.sh writes them).

usage: python3 bench/cuda_report.py OUT

Medians in ms (device time, CUDA events; Tactician: its engine's steps or their CUDA graph's replay
with inputs already on the device; PyTorch: one call of the module). Ratios are PyTorch / Tactician
fp16 (above 1: Tactician is faster). TFLOP/s = torch's FLOP count / Tactician fp16's median; GB/s =
the compulsory bytes (fp16 weights read once, input read, output written) / that median; the
ceilings line gives the measured copy bandwidth and fp16 matmul rate. A missing or failed side is
n/a, never a number. Later lines for the same model, batch and config replace earlier ones.
"""
import json, math, os, sys


def load(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith('{'):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def fmt(v, nd=3):
    return 'n/a' if v is None else f'{v:.{nd}f}'


def main():
    out = sys.argv[1]
    tac, torch_rows = load(os.path.join(out, 'tactician.jsonl')), load(os.path.join(out, 'torch.jsonl'))
    t, tune_s = {}, {}
    for r in tac:
        res = r.get('result', {})
        if r.get('config') == 'fp16-tuned-search':
            tune_s[(r['model'], r['batch'])] = (r.get('tune_s'), res.get('candidates'))
            continue
        t[(r['model'], r['batch'], r.get('config'))] = res.get('median_ms')
    p, flops, nbytes, ceil = {}, {}, {}, None
    for r in torch_rows:
        if r.get('ceiling'):
            ceil = r
            continue
        p[(r['model'], r['batch'], r['mode'])] = r.get('median_ms')
        if r.get('flops'):
            flops[(r['model'], r['batch'])] = r['flops']
        if r.get('bytes'):
            nbytes[(r['model'], r['batch'])] = r['bytes']
        if r.get('nonfinite_outputs'):
            p[(r['model'], r['batch'], 'nonfinite')] = r['nonfinite_outputs']
        if r.get('compile_s') is not None:
            p[(r['model'], r['batch'], r['mode'] + '_s')] = r['compile_s']
    keys = []
    for k in list(t) + list(p):
        mb = (k[0], k[1])
        if mb not in keys:
            keys.append(mb)
    print('| model | batch | GFLOP | Tactician fp32 | Tactician fp16 | fp16, graphs off | fp16, cold L2 | Tactician bf16 | '
          'fp16 tuned (tuning s, candidates) | eager | compile | max-autotune | eager / Tac | compile / Tac | max-autotune / Tac | '
          'max-autotune / tuned | Tac TFLOP/s | Tac GB/s |')
    print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    ratios = {'eager': [], 'compile': [], 'max-autotune': [], 'eager_b1': []}
    for m, b in keys:
        tf = t.get((m, b, 'fp16'))
        f = flops.get((m, b))
        cells = [m, str(b), fmt(f / 1e9 if f else None, 1), fmt(t.get((m, b, 'fp32'))), fmt(tf), fmt(t.get((m, b, 'fp16-nographs'))),
                 fmt(t.get((m, b, 'fp16-cold'))), fmt(t.get((m, b, 'bf16')))]
        tu = t.get((m, b, 'fp16-tuned'))
        ts, nc = tune_s.get((m, b), (None, None))
        cells.append(fmt(tu) + (f' ({ts:.0f} s, {nc})' if ts is not None else ''))
        for mode in ('eager', 'compile', 'max-autotune'):
            v = p.get((m, b, mode))
            s = fmt(v)
            if p.get((m, b, mode + '_s')) is not None:
                s += f' ({p[(m, b, mode + "_s")]:.0f} s)'
            cells.append(s)
        for mode in ('eager', 'compile', 'max-autotune'):
            v = p.get((m, b, mode))
            r = v / tf if v and tf else None
            if r:
                ratios[mode].append(r)
                if mode == 'eager' and b == 1:
                    ratios['eager_b1'].append(r)
            cells.append(fmt(r, 2))
        ma = p.get((m, b, 'max-autotune'))
        r = ma / tu if ma and tu else None
        if r:
            ratios.setdefault('max-autotune (tuned)', []).append(r)
        cells.append(fmt(r, 2))
        cells.append(fmt(f / tf / 1e9 if f and tf else None, 1))
        nb = nbytes.get((m, b))
        cells.append(fmt(nb / tf / 1e6 if nb and tf else None, 0))
        print('| ' + ' | '.join(cells) + ' |')
    print()
    # Every Tactician configuration measured (the route variants of run_cuda.sh), fp16 = 1.
    configs = []
    for (_, _, c) in t:
        if c not in configs:
            configs.append(c)
    print('| model | batch | ' + ' | '.join(f'{c} (ms, fp16 / it)' for c in configs) + ' |')
    print('| --- | ---: | ' + ' | '.join('---:' for _ in configs) + ' |')
    for m, b in keys:
        tf = t.get((m, b, 'fp16'))
        cells = []
        for c in configs:
            v = t.get((m, b, c))
            cells.append(fmt(v) + (f' ({tf / v:.2f}x)' if v and tf else ''))
        print(f'| {m} | {b} | ' + ' | '.join(cells) + ' |')
    print()
    for (m, b, k), v in p.items():
        if k == 'nonfinite':
            print(f'{m} batch {b}: PyTorch fp16 eager output has {v} inf/NaN values (fp16 range)')
    for k, v in ratios.items():
        if v:
            label = 'max-autotune / Tactician fp16 tuned' if k == 'max-autotune (tuned)' else f'{k} / Tactician fp16'
            print(f'geomean {label}: {math.exp(sum(map(math.log, v)) / len(v)):.2f} over {len(v)}')
    if ceil:
        print(f'ceilings ({ceil.get("device")}, torch {ceil.get("torch")}): copy {ceil["copy_GBps"]} GB/s (read + write), '
              f'fp16 matmul 8192^3 {ceil["fp16_matmul_TFLOPs"]} TFLOP/s')


if __name__ == '__main__':
    main()
