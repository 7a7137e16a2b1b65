#!/usr/bin/env python3
"""PyTorch side of the CUDA benchmark (bench/run_cuda.sh), run on the GPU machine.

usage: python3 bench/cuda_torch.py [--models resnet50:1,resnet50:32,mobilenet_v2:1,bert-base:1,bert-base:8]
                                   [--modes eager,compile,max-autotune] [--export DIR] [--ceilings]
                                   [--runs 100] [--warmup 20]

The models are bench/export_models.py's (torchvision resnet50 / mobilenet_v2 with randomized BN,
the BERT-base-like encoder), built with torch.manual_seed(0): the same definitions and seeds the
ONNX files come from. Every mode runs the model in fp16 on the GPU (model.half(), fp16 inputs;
token ids stay int64), eval mode, torch.inference_mode().

  --export DIR   first export each named model to DIR/<name>/model.onnx (fp32, dynamic batch, with
                 test_data_set_0 at batch 1) with this machine's torch: the ONNX files (100-400 MB)
                 are too large to carry to the GPU machine, so they are made there.
  --modes        eager; compile (torch.compile, default mode); max-autotune (torch.compile
                 mode="max-autotune": minutes of autotuning per model, so run it in parts).
  --ceilings     measure the ceilings first: device-to-device copy bandwidth (256 MiB, read +
                 write bytes), an fp16 8192^3 matmul rate and, where torch._scaled_mm runs (sm_89+),
                 the fp8 (E4M3) one.

Timing: CUDA events around each call after the warm-up (compile modes: the first call, which
compiles, is timed separately as compile_s), median / p10 / p90 over --runs calls, inputs from a
pool of 4 random sets rotated per call. FLOPs per call come from torch.utils.flop_counter (matmuls
and convolutions, 2 per multiply-add; BERT-base: the formula in bert_base_flops, as the counter
misses torch's fused encoder fast path). nonfinite_outputs counts inf/NaN in the fp16 eager output. One JSON line per measurement on stdout; progress on stderr.
"""
import argparse, json, os, statistics, sys, time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models as em  # noqa: E402  (model definitions and the exporter)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_inputs(name, batch, sets=4):
    """`sets` input tuples for one call each: float tensors in fp16, integer ones (token ids, masks)
    as they are, on the GPU. resnet50 / mobilenet_v2 / bert-base draw as they always did; the other
    models use export_models.py's input maker (batch 1, repeated along dim 0 for larger batches)."""
    g = torch.Generator().manual_seed(1000 + batch)
    out = []
    for k in range(sets):
        if name == 'bert-base':
            out.append((torch.randint(0, 30522, (batch, 128), generator=g).cuda(),))
        elif name in ('resnet50', 'mobilenet_v2'):
            out.append((torch.randn(batch, 3, 224, 224, generator=g).half().cuda(),))
        else:
            torch.manual_seed(1000 + batch + k)
            x = em.MODELS[name][1]()
            xs = x if isinstance(x, tuple) else (x,)
            xs = tuple(t.repeat(batch, *[1] * (t.dim() - 1)) if batch > 1 else t for t in xs)
            out.append(tuple(t.half().cuda() if t.is_floating_point() else t.cuda() for t in xs))
    return out


def time_calls(fn, inputs, runs, warmup):
    for i in range(warmup):
        fn(*inputs[i % len(inputs)])
    torch.cuda.synchronize()
    ms = []
    for i in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x = inputs[i % len(inputs)]
        a.record()
        fn(*x)
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    ms.sort()
    return {'median_ms': statistics.median(ms), 'p10_ms': ms[int(0.1 * (len(ms) - 1) + 0.5)],
            'p90_ms': ms[int(0.9 * (len(ms) - 1) + 0.5)], 'runs': runs}


def bert_base_flops(batch, seq=128, d=768, ffn=3072, layers=12):
    """2 x multiply-adds of the BERT-base encoder: QKV and output projections, FFN, Q.K^T and P.V
    (FlopCounterMode misses the fused fast-path encoder layers torch runs in inference mode)."""
    return 2 * batch * layers * (seq * (4 * d * d + 2 * d * ffn) + 2 * seq * seq * d)


def count_flops(model, x):
    try:
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as fc:
            model(*x)
        return int(fc.get_total_flops())
    except Exception as e:  # the count is a label, never a reason to fail
        log(f'flop count failed: {e}')
        return None


def ceilings():
    n = 256 << 20
    a = torch.empty(n, dtype=torch.uint8, device='cuda')
    b = torch.empty_like(a)
    a.random_(0, 255)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(20):
        b.copy_(a)
    e1.record()
    e1.synchronize()
    gbs = 2 * n * 20 / (e0.elapsed_time(e1) * 1e-3) / 1e9
    m = 8192
    x = torch.randn(m, m, dtype=torch.float16, device='cuda')
    y = torch.randn(m, m, dtype=torch.float16, device='cuda')
    for _ in range(3):
        x @ y
    torch.cuda.synchronize()
    e0.record()
    for _ in range(20):
        x @ y
    e1.record()
    e1.synchronize()
    tfs = 2 * m ** 3 * 20 / (e0.elapsed_time(e1) * 1e-3) / 1e12
    # fp8 (E4M3, per-tensor scales, fp16 output) where torch offers it (torch._scaled_mm, sm_89+):
    # the ceiling of issue 28's fp8 figures. B column-major, as cuBLASLt's fp8 kernels require.
    tfs8 = None
    try:
        x8 = x.to(torch.float8_e4m3fn)
        y8 = y.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device='cuda')
        for _ in range(3):
            torch._scaled_mm(x8, y8, scale_a=one, scale_b=one, out_dtype=torch.float16)
        torch.cuda.synchronize()
        e0.record()
        for _ in range(20):
            torch._scaled_mm(x8, y8, scale_a=one, scale_b=one, out_dtype=torch.float16)
        e1.record()
        e1.synchronize()
        tfs8 = round(2 * m ** 3 * 20 / (e0.elapsed_time(e1) * 1e-3) / 1e12, 1)
    except Exception as e:  # no fp8 on this GPU or this torch
        log(f'fp8 ceiling not measured: {e}')
    print(json.dumps({'ceiling': True, 'copy_GBps': round(gbs, 1), 'fp16_matmul_TFLOPs': round(tfs, 1),
                      'fp8_matmul_TFLOPs': tfs8, 'device': torch.cuda.get_device_name(), 'torch': torch.__version__}),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--models', default='resnet50:1,resnet50:32,mobilenet_v2:1,bert-base:1,bert-base:8')
    ap.add_argument('--modes', default='eager,compile')
    ap.add_argument('--export')
    ap.add_argument('--ceilings', action='store_true')
    ap.add_argument('--runs', type=int, default=100)
    ap.add_argument('--warmup', type=int, default=20)
    a = ap.parse_args()
    specs = [(s.split(':')[0], int(s.split(':')[1]) if ':' in s else 1) for s in a.models.split(',') if s]
    for name, _ in specs:
        if name not in em.MODELS:
            sys.exit(f'unknown model {name}; known: {list(em.MODELS)}')
    if a.export:
        torch.set_num_threads(8)
        for name in dict.fromkeys(n for n, _ in specs):
            if os.path.exists(os.path.join(a.export, name, 'model.onnx')):
                continue
            em.export_one(name, em.MODELS[name], a.export)
    if a.ceilings:
        ceilings()
    modes = [m for m in a.modes.split(',') if m]
    for name, batch in specs:
        for mode in modes:
            torch.manual_seed(0)
            model = em.MODELS[name][0]().eval().half().cuda()
            inputs = make_inputs(name, batch)
            rec = {'model': name, 'batch': batch, 'mode': mode, 'dtype': 'fp16', 'torch': torch.__version__}
            try:
                with torch.inference_mode():
                    rec['flops'] = count_flops(model, inputs[0]) or (bert_base_flops(batch) if name == 'bert-base' else None)
                    y = model(*inputs[0])
                    y = y[0] if isinstance(y, (tuple, list)) else y
                    rec['nonfinite_outputs'] = int((~torch.isfinite(y)).sum())  # fp16 range: inf/NaN in the output
                    # Compulsory traffic: every weight read once, the input read and the output written once.
                    rec['bytes'] = (sum(t.numel() * t.element_size() for t in model.state_dict().values())
                                    + sum(t.numel() * t.element_size() for t in inputs[0]) + y.numel() * y.element_size())
                    fn = model
                    if mode != 'eager':
                        fn = torch.compile(model, mode=None if mode == 'compile' else mode)
                        t0 = time.time()
                        fn(*inputs[0])
                        torch.cuda.synchronize()
                        rec['compile_s'] = round(time.time() - t0, 1)
                    rec.update(time_calls(fn, inputs, a.runs, a.warmup))
            except Exception as e:
                rec['error'] = f'{type(e).__name__}: {str(e)[:300]}'
            log(f'{name} b{batch} {mode}: {rec.get("median_ms", rec.get("error"))}')
            print(json.dumps(rec), flush=True)
            del model
            torch._dynamo.reset()
            torch.cuda.empty_cache()


if __name__ == '__main__':
    main()
