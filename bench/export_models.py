#!/usr/bin/python3
"""Export the benchmark models to ONNX, with one test data set each.

usage: /usr/bin/python3 bench/export_models.py [OUTDIR] [--only NAME|GROUP[,...]] [--list] [--ops]

Groups (--only takes model names and group names, mixed):
  default  resnet50, mobilenet_v2, bert-base: what a bare run exports (bench/run_cpu.sh, tune_cpu.sh,
           layout_cpu.sh and cuda_torch.py / run_cuda.sh use these).
  wide     models outside the project's zoo (../shared/models), for coverage of the CUDA backend (every
           model without host fallbacks) and of the CPU default route off the zoo:
             mobilenet_v3_large, efficientnet_b1 (240x240), shufflenet_v2_x0_5, densenet121, mnasnet1_0,
             regnet_y_400mf, resnext50_32x4d, convnext_tiny (torchvision, random weights);
             yolo_head (small YOLO-style detector, 320x320: Conv/BN/SiLU, SPPF MaxPools, nearest Resize
             + Concat top-down path, three heads reshaped/permuted, sigmoid, box decode, one output);
             distilbert_mask (6-layer d-384 encoder with two int64 inputs input_ids and attention_mask
             whose padding is an additive finfo(float32).min bias, HF-style; outputs the masked hidden
             state and the mean-pooled sentence embedding);
             lstm_audio (Conv1d front end on 40x200 features, 2-layer LSTM, bidirectional GRU, linear
             head, log-softmax: ONNX LSTM and GRU ops);
             resnet18_fp16 (resnet18 stored in fp16: fp16 initializers, input and output; see to_fp16).
  all      both.

Writes OUTDIR/<name>/model.onnx and OUTDIR/<name>/test_data_set_0/{input,output}_<K>.pb (serialized
onnx.TensorProto with raw_data, named after the graph input/output, K = position among the graph
inputs/outputs). OUTDIR defaults to bench/models (gitignored: the files are large; this script
regenerates them byte for byte). --list prints the models and their groups; --ops prints the op types
(with counts) of the selected models already in OUTDIR, then which models use each op type.

Needs Debian's python3-torch (1.13), python3-torchvision (0.14), python3-onnx: run it with /usr/bin/python3.

Conventions are those of ../shared/models/export_models.py (the helpers below are copied from it so
that this script stands alone):
  * opset 17, torch.manual_seed(0) before building each model, random weights (no download), eval
    mode, constant folding on, batch dim dynamic ('batch') on every input and output, every other dim
    fixed; batch 1.
  * BatchNorm affine params randomized and running stats measured on 8 random inputs (generator
    seed 1). The wide models put Dropout / StochasticDepth in eval mode for that forward.
  * Transformers: LayerNorm weight/bias and attention biases randomized (generator seed 2), every
    encoder layer has its own weights. convnext_tiny: LayerNorm randomized the same way and its
    layer scales (1e-6 at init) drawn in [0.1, 0.5) (generator seed 3).
  * Reference output = the torch module's output (CPU, eval, no_grad); it must be finite and have
    the shapes the ONNX graph declares (checked at export, with onnx.checker).
  * Inputs: images torch.randn(1, 3, H, W); token ids torch.randint(0, vocab, (1, seq)),
    drawn right after the model is built.
  * resnet18_fp16: torch 1.13 has no fp16 Conv on the CPU, so the model is exported in fp32 with its
    weights rounded to fp16 and the ONNX file converted to fp16 (to_fp16); the reference is the fp32
    module (fp16-rounded weights) on the fp16-rounded input, stored rounded to fp16.
"""
import argparse, collections, math, os, sys, time
import numpy as np
import torch, torchvision, onnx
from onnx import numpy_helper, TensorProto, AttributeProto

OPSET = 17


def randomize_bn(m, shape=(3, 224, 224), drop_eval=False):
    """Give every BatchNorm random affine parameters and the statistics of real data (generator
    seed 1): the running mean and variance are measured on a batch of 8 random inputs of `shape`
    (train-mode forward, cumulative average). Statistics drawn at random instead leave the activations of a
    deep residual network unnormalized: ResNet-50's grew past fp16's range (Inf in fp16 engines and
    in PyTorch's fp16 alike), which no trained network does. drop_eval: Dropout and StochasticDepth
    stay in eval mode during that forward (the statistics are those of the eval-mode network)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                n = mod.num_features
                mod.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                mod.bias.copy_(torch.randn(n, generator=g) * 0.1)
                mod.reset_running_stats()
                mod.momentum = None  # cumulative average over the calibration batch
        m.train()
        if drop_eval:
            for mod in m.modules():
                if isinstance(mod, (torch.nn.modules.dropout._DropoutNd, torchvision.ops.StochasticDepth)):
                    mod.eval()
        m(torch.randn(8, *shape, generator=g))
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


def randomize_convnext(m):
    """ConvNeXt: LayerNorms as randomize_transformer (generator seed 2), then the per-channel layer
    scales, 1e-6 at init (which makes every block a near identity), drawn in [0.1, 0.5) (seed 3)."""
    randomize_transformer(m)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith('layer_scale'):
                p.copy_(torch.rand(p.shape, generator=g) * 0.4 + 0.1)
    return m


def conv_bn_silu(cin, cout, k=3, s=1):
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, k, s, k // 2, bias=False), torch.nn.BatchNorm2d(cout),
                               torch.nn.SiLU())


class Bottleneck(torch.nn.Module):
    """YOLOv5-style residual bottleneck: 1x1 then 3x3 conv-BN-SiLU, plus the input."""

    def __init__(self, c):
        super().__init__()
        self.cv1, self.cv2 = conv_bn_silu(c, c, 1), conv_bn_silu(c, c, 3)

    def forward(self, x):
        return x + self.cv2(self.cv1(x))


class SPPF(torch.nn.Module):
    """YOLOv5's spatial pyramid pooling (fast): three chained 5x5 stride-1 max pools, concatenated."""

    def __init__(self, cin, cout):
        super().__init__()
        self.cv1, self.cv2 = conv_bn_silu(cin, cin // 2, 1), conv_bn_silu(cin * 2, cout, 1)
        self.pool = torch.nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat((x, y1, y2, self.pool(y2)), 1))


class YoloHead(torch.nn.Module):
    """Small YOLO-style detector for a fixed size x size input: a strided Conv/BN/SiLU backbone with
    residual bottlenecks (P3/P4/P5 at strides 8/16/32) and SPPF, an FPN-like top-down path (1x1 conv,
    nn.Upsample(scale_factor=2, mode='nearest') = ONNX Resize, torch.cat with the lateral feature,
    3x3 conv), three 1x1 detection heads. Each head's output is viewed as (n, anchors, 5 + classes, h, w),
    permuted to (n, anchors, h, w, 5 + classes), sigmoid'ed, decoded like YOLOv5's export (xy = (2s - 0.5
    + grid) * stride, wh = (2s)^2 * anchor), flattened to (n, anchors*h*w, 5 + classes); the three are
    concatenated into one output (n, 6300, 85) for 320x320, 80 classes, 3 anchors."""

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))

    def __init__(self, classes=80, size=320):
        super().__init__()
        self.no, self.na = 5 + classes, 3
        c = conv_bn_silu
        self.p3 = torch.nn.Sequential(c(3, 16, 3, 2), c(16, 32, 3, 2), Bottleneck(32), c(32, 64, 3, 2), Bottleneck(64))
        self.p4 = torch.nn.Sequential(c(64, 128, 3, 2), Bottleneck(128))
        self.p5 = torch.nn.Sequential(c(128, 256, 3, 2), Bottleneck(256), SPPF(256, 256))
        self.up = torch.nn.Upsample(scale_factor=2, mode='nearest')
        self.lat5, self.td4 = c(256, 128, 1), c(256, 128, 3)
        self.lat4, self.td3 = c(128, 64, 1), c(128, 64, 3)
        self.heads = torch.nn.ModuleList(torch.nn.Conv2d(ch, self.na * self.no, 1) for ch in (64, 128, 256))
        for i, s in enumerate((8, 16, 32)):
            n = size // s
            yv, xv = torch.meshgrid(torch.arange(n), torch.arange(n), indexing='ij')
            self.register_buffer(f'grid{i}', (torch.stack((xv, yv), 2).view(1, 1, n, n, 2).float() - 0.5) * s)
            self.register_buffer(f'anchor{i}', torch.tensor(self.ANCHORS[i], dtype=torch.float32).view(1, 3, 1, 1, 2))
        self.strides = (8, 16, 32)

    def forward(self, x):
        p3 = self.p3(x)
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        l5 = self.lat5(p5)
        n4 = self.td4(torch.cat((self.up(l5), p4), 1))
        l4 = self.lat4(n4)
        n3 = self.td3(torch.cat((self.up(l4), p3), 1))
        out = []
        for i, f in enumerate((n3, n4, p5)):
            y = self.heads[i](f)
            bs, _, ny, nx = y.shape
            y = y.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).sigmoid()
            xy, wh, conf = y.split((2, 2, self.no - 4), 4)
            xy = xy * (2 * self.strides[i]) + getattr(self, f'grid{i}')
            wh = (wh * 2) ** 2 * getattr(self, f'anchor{i}')
            out.append(torch.cat((xy, wh, conf), 4).view(bs, self.na * ny * nx, self.no))
        return torch.cat(out, 1)


class MaskedEncoderLayer(torch.nn.Module):
    """DistilBERT / BERT encoder layer written out (post-LN, gelu): separate q/k/v/out projections,
    scores = q.k^T / sqrt(dh) + bias (the additive attention-mask bias), softmax, then the FFN."""

    def __init__(self, d, heads, ffn):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.ff1, self.ff2 = torch.nn.Linear(d, ffn), torch.nn.Linear(ffn, d)

    def forward(self, x, bias):
        n, t, d = x.shape
        q, k, v = (p(x).view(n, t, self.h, self.dh).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + bias, -1)
        x = self.ln1(x + self.o(torch.matmul(a, v).transpose(1, 2).reshape(n, t, d)))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class DistilBertMask(torch.nn.Module):
    """DistilBERT-like encoder (all-MiniLM-L6 shape by default: vocab 30522, d 384, 12 heads, 6 layers,
    ffn 1536) with two inputs, input_ids and attention_mask (int64, 1 = token, 0 = padding). The mask
    becomes the HF-style additive bias (1 - mask[:, None, None, :].float()) * finfo(float32).min
    (Unsqueeze, Cast, Sub, Mul in the graph), added to every layer's attention scores. Outputs: the last
    hidden state with padded positions zeroed (Where) and the mean over the unpadded positions
    (sentence-transformers pooling: ReduceSum, Clip, Div)."""

    def __init__(self, vocab=30522, d=384, heads=12, layers=6, ffn=1536, max_pos=512):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(max_pos, d)
        self.emb_ln = torch.nn.LayerNorm(d)
        self.layers = torch.nn.ModuleList(MaskedEncoderLayer(d, heads, ffn) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        h = self.emb_ln(self.tok(input_ids) + self.pos(pos))
        bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        for lyr in self.layers:
            h = lyr(h, bias)
        keep = attention_mask.unsqueeze(-1)
        h = torch.where(keep.bool(), h, torch.zeros((), dtype=h.dtype))
        m = keep.to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return h, pooled


def masked_ids(vocab, seq, valid, n=1):
    """(input_ids, attention_mask): random ids, the last seq - valid positions padding (id 0, mask 0)."""
    def make():
        i = torch.randint(0, vocab, (n, seq))
        mask = torch.ones(n, seq, dtype=torch.int64)
        mask[:, valid:] = 0
        return i * mask, mask
    return make


class LstmAudio(torch.nn.Module):
    """Small speech-style acoustic model on (n, 40, 200) log-mel-like features: Conv1d-BN-ReLU front
    end (the second conv stride 2: 100 frames), 2-layer LSTM (batch_first, hidden 256), bidirectional
    GRU (hidden 128), linear head to 32 classes, log-softmax: (n, 100, 32)."""

    def __init__(self, feats=40, ch=128, hidden=256, gru=128, classes=32):
        super().__init__()
        self.front = torch.nn.Sequential(
            torch.nn.Conv1d(feats, ch, 5, padding=2, bias=False), torch.nn.BatchNorm1d(ch), torch.nn.ReLU(),
            torch.nn.Conv1d(ch, ch, 5, stride=2, padding=2, bias=False), torch.nn.BatchNorm1d(ch), torch.nn.ReLU())
        self.lstm = torch.nn.LSTM(ch, hidden, num_layers=2, batch_first=True)
        self.gru = torch.nn.GRU(hidden, gru, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(2 * gru, classes)

    def forward(self, x):
        h = self.front(x).transpose(1, 2)
        h, _ = self.lstm(h)
        h, _ = self.gru(h)
        return torch.log_softmax(self.head(h), -1)


def fp16_weights(m):
    """Round every parameter and buffer to fp16 (the module stays fp32), so that the reference computes
    with the weights the fp16 file stores. Not exactly: the export folds each BatchNorm into its Conv in
    fp32, and to_fp16 rounds the folded weights again (ONNX Runtime 1.30 on the fp16 file: rel L2 1.1e-3
    against the reference, fp16 precision)."""
    with torch.no_grad():
        for t in list(m.parameters()) + list(m.buffers()):
            if t.dtype == torch.float32:
                t.copy_(t.half().float())
    return m


# Inputs that ONNX requires to be float32 whatever the model's type: (op type, input index).
FP32_ONLY_INPUTS = {('Resize', 2), ('Upsample', 1)}


def to_fp16(mp):
    """Convert an fp32 ONNX model to one stored in fp16, in place: float32 initializers, Constant /
    ConstantOfShape tensor attributes, Cast targets, and the element type of graph inputs, outputs and
    value_info become float16. Refuses what it does not handle (subgraphs, float32-only inputs fed by
    a converted tensor, values beyond fp16's range); the caller validates with onnx.checker and strict
    type-checking shape inference."""
    F, H = TensorProto.FLOAT, TensorProto.FLOAT16
    g = mp.graph
    for n in g.node:
        for i, name in enumerate(n.input):
            if (n.op_type, i) in FP32_ONLY_INPUTS and name:
                raise ValueError(f'to_fp16: {n.op_type} input {i} must stay float32; not handled')

    def conv(t):
        if t.data_type != F:
            return
        a = numpy_helper.to_array(t)
        if a.size and np.abs(a).max() > 65504:
            raise ValueError(f'to_fp16: {t.name or "constant"} exceeds fp16 range ({np.abs(a).max():.3g})')
        t.CopyFrom(numpy_helper.from_array(a.astype(np.float16), t.name))

    for t in g.initializer:
        conv(t)
    for n in g.node:
        for at in n.attribute:
            if at.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                raise ValueError(f'to_fp16: {n.op_type} has a subgraph; not handled')
            if at.type == AttributeProto.TENSOR:
                conv(at.t)
            elif at.type == AttributeProto.TENSORS:
                for t in at.tensors:
                    conv(t)
            elif n.op_type == 'Cast' and at.name == 'to' and at.i == F:
                at.i = H
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == F:
            vi.type.tensor_type.elem_type = H
    return mp


def image(n=1, h=224, w=224):
    return lambda: torch.randn(n, 3, h, w)


def ids(vocab, seq, n=1):
    return lambda: torch.randint(0, vocab, (n, seq))


def tv(name, **kw):
    """A torchvision classifier, random weights, BN calibrated (eval-mode dropout) at the input size."""
    size = kw.pop('size', 224)
    return lambda: randomize_bn(getattr(torchvision.models, name)(weights=None, **kw), (3, size, size), drop_eval=True)


# name: (build the model, make the input(s), input name(s), output name(s), description[, options])
# A model with several inputs (outputs) has a tuple of inputs and a list of names. Options:
# 'fp16': export in fp32, then convert the file with to_fp16 (inputs and outputs stored in fp16).
MODELS = {
    'resnet50': (lambda: randomize_bn(torchvision.models.resnet50(weights=None)), image(),
                 'input', 'logits', 'torchvision resnet50, batch 1, 224x224'),
    'mobilenet_v2': (lambda: randomize_bn(torchvision.models.mobilenet_v2(weights=None)), image(),
                     'input', 'logits', 'torchvision mobilenet_v2, batch 1, 224x224'),
    'bert-base': (lambda: randomize_transformer(BertLike(30522, 768, 12, 12, 3072, norm_first=False)),
                  ids(30522, 128), 'input_ids', 'last_hidden_state',
                  'BERT-base-like encoder: vocab 30522, d 768, 12 heads, 12 layers, ffn 3072, gelu, post-LN, '
                  'seq 128, batch 1'),
    # ---- group 'wide' ----
    'mobilenet_v3_large': (tv('mobilenet_v3_large'), image(), 'input', 'logits',
                           'torchvision mobilenet_v3_large (hardswish, SE with hardsigmoid), batch 1, 224x224'),
    'efficientnet_b1': (tv('efficientnet_b1', size=240), image(h=240, w=240), 'input', 'logits',
                        'torchvision efficientnet_b1 (SiLU, SE), batch 1, 240x240'),
    'shufflenet_v2_x0_5': (tv('shufflenet_v2_x0_5'), image(), 'input', 'logits',
                           'torchvision shufflenet_v2_x0_5 (channel split + shuffle), batch 1, 224x224'),
    'densenet121': (tv('densenet121'), image(), 'input', 'logits',
                    'torchvision densenet121 (dense concatenations), batch 1, 224x224'),
    'mnasnet1_0': (tv('mnasnet1_0'), image(), 'input', 'logits', 'torchvision mnasnet1_0, batch 1, 224x224'),
    'regnet_y_400mf': (tv('regnet_y_400mf'), image(), 'input', 'logits',
                       'torchvision regnet_y_400mf (group conv, SE), batch 1, 224x224'),
    'resnext50_32x4d': (tv('resnext50_32x4d'), image(), 'input', 'logits',
                        'torchvision resnext50_32x4d (32-group 3x3 convs), batch 1, 224x224'),
    'convnext_tiny': (lambda: randomize_convnext(torchvision.models.convnext_tiny(weights=None)), image(),
                      'input', 'logits', 'torchvision convnext_tiny (7x7 depthwise, LayerNorm over channels, '
                      'layer scale drawn in [0.1, 0.5)), batch 1, 224x224'),
    'yolo_head': (lambda: randomize_bn(YoloHead(), (3, 320, 320), drop_eval=True), image(h=320, w=320),
                  'images', 'detections', 'YOLO-style detector: strided Conv/BN/SiLU, SPPF, nearest-upsample FPN, '
                  '3 heads x 3 anchors x 80 classes, sigmoid + box decode, output (1, 6300, 85), batch 1, 320x320'),
    'distilbert_mask': (lambda: randomize_transformer(DistilBertMask()), masked_ids(30522, 128, 100),
                        ['input_ids', 'attention_mask'], ['last_hidden_state', 'pooled'],
                        'DistilBERT-like encoder with attention mask: vocab 30522, d 384, 12 heads, 6 layers, '
                        'ffn 1536, post-LN, additive finfo.min mask bias, seq 128 (100 tokens + 28 padding), '
                        'batch 1; outputs hidden state (pads zeroed) and mean pooling'),
    'lstm_audio': (lambda: randomize_bn(LstmAudio(), (40, 200), drop_eval=True), lambda: torch.randn(1, 40, 200),
                   'features', 'log_probs', 'audio model: Conv1d/BN/ReLU x2 (stride 2), 2-layer LSTM 256, '
                   'bidirectional GRU 128, linear 32, log-softmax; input (1, 40, 200), output (1, 100, 32)'),
    'resnet18_fp16': (lambda: fp16_weights(randomize_bn(torchvision.models.resnet18(weights=None))),
                      lambda: torch.randn(1, 3, 224, 224).half().float(), 'input', 'logits',
                      'torchvision resnet18 stored in fp16 (initializers, input, output), batch 1, 224x224',
                      {'fp16': True}),
}
GROUPS = {
    'default': ['resnet50', 'mobilenet_v2', 'bert-base'],
    'wide': ['mobilenet_v3_large', 'efficientnet_b1', 'shufflenet_v2_x0_5', 'densenet121', 'mnasnet1_0',
             'regnet_y_400mf', 'resnext50_32x4d', 'convnext_tiny', 'yolo_head', 'distilbert_mask', 'lstm_audio',
             'resnet18_fp16'],
}
GROUPS['all'] = GROUPS['default'] + GROUPS['wide']
assert sorted(GROUPS['all']) == sorted(MODELS)


def save_pb(arr, name, path):
    with open(path, 'wb') as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(arr), name).SerializeToString())


def op_histogram(graph):
    """Op type -> node count, subgraphs included, most frequent first (then by name)."""
    c = collections.Counter()

    def walk(g):
        for n in g.node:
            c[n.op_type if n.domain in ('', 'ai.onnx') else f'{n.domain}.{n.op_type}'] += 1
            for at in n.attribute:
                for sub in ([at.g] if at.type == AttributeProto.GRAPH else list(at.graphs)):
                    walk(sub)
    walk(graph)
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def fmt_ops(h):
    return ', '.join(k if v == 1 else f'{k}×{v}' for k, v in h.items())


def check_io(mp, values, names, what):
    """The declared ONNX value infos against the torch tensors: names, element types, fixed dims."""
    vis = {vi.name: vi for vi in (mp.graph.input if what == 'input' else mp.graph.output)}
    for v, name in zip(values, names):
        vi = vis.get(name)
        if vi is None:
            raise ValueError(f'{what} {name} is not a graph {what}')
        tt = vi.type.tensor_type
        to_onnx = getattr(onnx.helper, 'np_dtype_to_tensor_dtype', None)  # onnx >= 1.13; 1.12: onnx.mapping
        want = to_onnx(v.dtype) if to_onnx else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[v.dtype]
        if tt.elem_type != want:
            raise ValueError(f'{what} {name}: element type {tt.elem_type} in the graph, {want} in the data')
        dims = [d.dim_value if d.HasField('dim_value') else d.dim_param for d in tt.shape.dim]
        if len(dims) != v.ndim or any(isinstance(d, int) and d != s for d, s in zip(dims, v.shape)):
            raise ValueError(f'{what} {name}: shape {dims} in the graph, {list(v.shape)} in the data')
        if what == 'output' and v.dtype.kind == 'f' and not np.isfinite(v).all():
            raise ValueError(f'output {name}: {int((~np.isfinite(v)).sum())} non-finite values')


def export_one(name, spec, outdir):
    build, make_input, in_names, out_names, desc = spec[:5]
    opts = spec[5] if len(spec) > 5 else {}
    single_in, single_out = isinstance(in_names, str), isinstance(out_names, str)
    in_names = [in_names] if single_in else list(in_names)
    out_names = [out_names] if single_out else list(out_names)
    t0 = time.time()
    torch.manual_seed(0)
    m = build().eval()
    x = make_input()
    xs = (x,) if single_in else tuple(x)
    with torch.no_grad():
        y = m(*xs)
    ys = (y,) if single_out else tuple(y)
    d = os.path.join(outdir, name)
    os.makedirs(os.path.join(d, 'test_data_set_0'), exist_ok=True)
    f = os.path.join(d, 'model.onnx')
    kw = dict(opset_version=OPSET, input_names=in_names, output_names=out_names,
              dynamic_axes={n: {0: 'batch'} for n in in_names + out_names}, do_constant_folding=True)
    if int(torch.__version__.split('.')[0]) >= 2:  # newer torch (the GPU machine's): the TorchScript exporter
        kw['dynamo'] = False
    try:
        torch.onnx.export(m, xs, f, **kw)
    except Exception as e:  # a torch without it: the dynamo exporter (other op patterns)
        if kw.pop('dynamo', True):
            raise
        print(f'{name}: TorchScript exporter failed ({type(e).__name__}: {str(e)[:200]}); trying dynamo=True', flush=True)
        torch.onnx.export(m, xs, f, dynamo=True, **kw)
    xs_np = [t.numpy() for t in xs]
    ys_np = [t.numpy() for t in ys]
    if opts.get('fp16'):
        mp = to_fp16(onnx.load(f))
        onnx.shape_inference.infer_shapes(mp, check_type=True, strict_mode=True)
        onnx.save(mp, f)
        xs_np = [a.astype(np.float16) if a.dtype == np.float32 else a for a in xs_np]
        ys_np = [a.astype(np.float16) if a.dtype == np.float32 else a for a in ys_np]
    mp = onnx.load(f)
    onnx.checker.check_model(f)  # by path: works for files near the 2 GB protobuf limit too
    check_io(mp, xs_np, in_names, 'input')
    check_io(mp, ys_np, out_names, 'output')
    for k, (a, n) in enumerate(zip(xs_np, in_names)):
        save_pb(a, n, os.path.join(d, 'test_data_set_0', f'input_{k}.pb'))
    for k, (a, n) in enumerate(zip(ys_np, out_names)):
        save_pb(a, n, os.path.join(d, 'test_data_set_0', f'output_{k}.pb'))
    nparams = sum(p.numel() for p in m.parameters())
    ins = ', '.join(f'{list(a.shape)}' + ('' if a.dtype in (np.float32, np.int64) else f' {a.dtype}') for a in xs_np)
    outs = ', '.join(f'{list(a.shape)} std {a.astype(np.float64).std():.3g}' for a in ys_np)
    print(f'{name}: {desc}; exported in {time.time() - t0:.1f}s, {os.path.getsize(f) / 1e6:.2f} MB, '
          f'{nparams / 1e6:.1f} M params, {len(mp.graph.node)} nodes, input {ins}, '
          f'output {outs}', flush=True)
    if name not in GROUPS['default']:  # the wide models: their op types too
        print(f'{name}: ops: {fmt_ops(op_histogram(mp.graph))}', flush=True)


def print_ops(names, outdir):
    uses = collections.defaultdict(list)
    for n in names:
        f = os.path.join(outdir, n, 'model.onnx')
        if not os.path.exists(f):
            print(f'{n}: not exported ({f})')
            continue
        mp = onnx.load(f, load_external_data=False)
        h = op_histogram(mp.graph)
        for op in h:
            uses[op].append(n)
        print(f'{n}: {os.path.getsize(f) / 1e6:.2f} MB, {sum(h.values())} nodes, {len(h)} op types: {fmt_ops(h)}')
    if uses:
        print('\nop type: models using it')
        for op in sorted(uses, key=lambda o: (-len(uses[o]), o)):
            print(f'  {op} ({len(uses[op])}): {", ".join(uses[op])}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('outdir', nargs='?', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'models'))
    ap.add_argument('--only', help='comma-separated model and group names (groups: ' + ', '.join(GROUPS) + ')')
    ap.add_argument('--list', action='store_true', help='print the models, their groups and descriptions')
    ap.add_argument('--ops', action='store_true', help='print the op types of the selected models in OUTDIR (no export)')
    a = ap.parse_args()
    if a.list:
        for k, v in MODELS.items():
            g = [n for n in GROUPS if n != 'all' and k in GROUPS[n]]
            print(f'{k} [{",".join(g)}]: {v[4]}')
        return
    names = []
    for n in (a.only.split(',') if a.only else ['default']):
        for m in (GROUPS[n] if n in GROUPS else [n]):
            if m not in names:
                names.append(m)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f'unknown model(s): {unknown}; known: {list(MODELS)}; groups: {list(GROUPS)}')
    if a.ops:
        print_ops(names, a.outdir)
        return
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
