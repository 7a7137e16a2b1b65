#!/usr/bin/python3
"""Export the benchmark models (resnet50, mobilenet_v2, bert-base) to ONNX, with one test data set each.

usage: /usr/bin/python3 bench/export_models.py [OUTDIR] [--only NAME[,NAME...]] [--list]

Writes OUTDIR/<name>/model.onnx and OUTDIR/<name>/test_data_set_0/{input,output}_0.pb (serialized
onnx.TensorProto with raw_data, named after the graph input/output). OUTDIR defaults to bench/models
(gitignored: the files are large; this script regenerates them byte for byte).

Needs Debian's python3-torch (1.13), python3-torchvision (0.14), python3-onnx: run it with /usr/bin/python3.

Conventions are those of ../shared/models/export_models.py (the helpers below are copied from it so
that this script stands alone):
  * opset 17, torch.manual_seed(0) before building each model, random weights (no download), eval
    mode, constant folding on, batch dim dynamic ('batch'), every other dim fixed; batch 1.
  * BatchNorm affine params randomized and running stats measured on 8 random images (generator seed 1).
  * Transformers: LayerNorm weight/bias and attention biases randomized (generator seed 2), every
    encoder layer has its own weights.
  * Reference output = the torch module's output (CPU, eval, no_grad).
  * Inputs: images torch.randn(1, 3, 224, 224); token ids torch.randint(0, vocab, (1, seq)),
    drawn right after the model is built.
"""
import argparse, os, sys, time
import numpy as np
import torch, torchvision, onnx
from onnx import numpy_helper

OPSET = 17


def randomize_bn(m):
    """Give every BatchNorm random affine parameters and the statistics of real data (generator
    seed 1): the running mean and variance are measured on a batch of 8 random images (train-mode
    forward, cumulative average). Statistics drawn at random instead leave the activations of a
    deep residual network unnormalized: ResNet-50's grew past fp16's range (Inf in fp16 engines and
    in PyTorch's fp16 alike), which no trained network does."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                n = mod.num_features
                mod.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                mod.bias.copy_(torch.randn(n, generator=g) * 0.1)
                mod.reset_running_stats()
                mod.momentum = None  # cumulative average over the calibration batch
        m.train()
        m(torch.randn(8, 3, 224, 224, generator=g))
    return m.eval()


def randomize_transformer(m):
    """Randomize LayerNorm affine params and the (zero-initialized) attention biases (generator seed 2)."""
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                n = mod.weight.numel()
                mod.weight.copy_((torch.rand(n, generator=g) * 0.5 + 0.75).view_as(mod.weight))
                mod.bias.copy_((torch.randn(n, generator=g) * 0.1).view_as(mod.bias))
            elif isinstance(mod, torch.nn.MultiheadAttention):
                if mod.in_proj_bias is not None:
                    mod.in_proj_bias.copy_(torch.randn(mod.in_proj_bias.shape, generator=g) * 0.1)
                if mod.out_proj.bias is not None:
                    mod.out_proj.bias.copy_(torch.randn(mod.out_proj.bias.shape, generator=g) * 0.1)
    return m


def encoder(d, heads, layers, ffn, norm_first, final_norm):
    layer = torch.nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation='gelu', batch_first=True,
                                             norm_first=norm_first)
    enc = torch.nn.TransformerEncoder(layer, layers, norm=torch.nn.LayerNorm(d) if final_norm else None,
                                      enable_nested_tensor=False)
    # nn.TransformerEncoder deep-copies one layer: give each layer its own weights
    for lyr in enc.layers:
        lyr.self_attn._reset_parameters()
        lyr.linear1.reset_parameters()
        lyr.linear2.reset_parameters()
    return enc


class BertLike(torch.nn.Module):
    """BERT-style encoder: token + learned position embeddings, LayerNorm (post-LN), then
    nn.TransformerEncoder (gelu, no attention mask). Returns the last hidden state [batch, seq, d]."""

    def __init__(self, vocab, d, heads, layers, ffn, norm_first=False, max_pos=512):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(max_pos, d)
        self.emb_ln = None if norm_first else torch.nn.LayerNorm(d)
        self.enc = encoder(d, heads, layers, ffn, norm_first, final_norm=norm_first)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        h = self.tok(ids) + self.pos(pos)
        if self.emb_ln is not None:
            h = self.emb_ln(h)
        return self.enc(h)


def image(n=1, h=224, w=224):
    return lambda: torch.randn(n, 3, h, w)


def ids(vocab, seq, n=1):
    return lambda: torch.randint(0, vocab, (n, seq))


# name: (build the model, make the input, input name, output name, description)
MODELS = {
    'resnet50': (lambda: randomize_bn(torchvision.models.resnet50(weights=None)), image(),
                 'input', 'logits', 'torchvision resnet50, batch 1, 224x224'),
    'mobilenet_v2': (lambda: randomize_bn(torchvision.models.mobilenet_v2(weights=None)), image(),
                     'input', 'logits', 'torchvision mobilenet_v2, batch 1, 224x224'),
    'bert-base': (lambda: randomize_transformer(BertLike(30522, 768, 12, 12, 3072, norm_first=False)),
                  ids(30522, 128), 'input_ids', 'last_hidden_state',
                  'BERT-base-like encoder: vocab 30522, d 768, 12 heads, 12 layers, ffn 3072, gelu, post-LN, '
                  'seq 128, batch 1'),
}


def save_pb(arr, name, path):
    with open(path, 'wb') as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(arr), name).SerializeToString())


def export_one(name, spec, outdir):
    build, make_input, in_name, out_name, desc = spec
    t0 = time.time()
    torch.manual_seed(0)
    m = build().eval()
    x = make_input()
    with torch.no_grad():
        y = m(x)
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, 'test_data_set_0'), exist_ok=True)
    f = os.path.join(d, 'model.onnx')
    kw = dict(opset_version=OPSET, input_names=[in_name], output_names=[out_name],
              dynamic_axes={in_name: {0: 'batch'}, out_name: {0: 'batch'}}, do_constant_folding=True)
    if int(torch.__version__.split('.')[0]) >= 2:  # newer torch (the GPU machine's): the TorchScript exporter
        kw['dynamo'] = False
    try:
        torch.onnx.export(m, (x,), f, **kw)
    except Exception as e:  # a torch without it: the dynamo exporter (other op patterns)
        if kw.pop('dynamo', True):
            raise
        print(f'{name}: TorchScript exporter failed ({type(e).__name__}: {str(e)[:200]}); trying dynamo=True', flush=True)
        torch.onnx.export(m, (x,), f, dynamo=True, **kw)
    mp = onnx.load(f)
    onnx.checker.check_model(f)  # by path: works for files near the 2 GB protobuf limit too
    save_pb(x.numpy(), in_name, os.path.join(d, 'test_data_set_0', 'input_0.pb'))
    save_pb(y.numpy(), out_name, os.path.join(d, 'test_data_set_0', 'output_0.pb'))
    nparams = sum(p.numel() for p in m.parameters())
    print(f'{name}: {desc}; exported in {time.time() - t0:.1f}s, {os.path.getsize(f) / 1e6:.2f} MB, '
          f'{nparams / 1e6:.1f} M params, {len(mp.graph.node)} nodes, input {list(x.shape)}, '
          f'output {list(y.shape)} std {y.std():.3g}', flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('outdir', nargs='?', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'models'))
    ap.add_argument('--only', help='comma-separated model names')
    ap.add_argument('--list', action='store_true')
    a = ap.parse_args()
    if a.list:
        for k, v in MODELS.items():
            print(f'{k}: {v[4]}')
        return
    names = a.only.split(',') if a.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f'unknown model(s): {unknown}; known: {list(MODELS)}')
    torch.set_num_threads(1)  # the machine is shared; the export is deterministic either way
    print(f'torch {torch.__version__}, torchvision {torchvision.__version__}, onnx {onnx.__version__}, '
          f'opset {OPSET}', flush=True)
    failed = []
    for n in names:
        try:
            export_one(n, MODELS[n], a.outdir)
        except Exception as e:  # report and go on with the others
            failed.append(n)
            print(f'{n}: EXPORT FAILED {type(e).__name__}: {str(e)[:500]}', flush=True)
    if failed:
        sys.exit(f'failed: {failed}')


if __name__ == '__main__':
    main()
