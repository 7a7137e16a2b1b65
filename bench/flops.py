#!/usr/bin/python3
"""Count the multiply-add work of an ONNX model: 2 x MACs of its Conv, ConvTranspose, MatMul and Gemm
nodes (the ops that bound the time of these models; elementwise ops are left out), at batch 1.

usage: /usr/bin/python3 bench/flops.py MODEL.onnx [MODEL.onnx ...]     prints "GFLOP<TAB>exact|lower-bound<TAB>path" lines

Shapes come from onnx shape inference with data propagation after every dynamic input dim is set to
1 (or to the shape in test_data_set_0/input_K.pb next to the model, when there is one). A node whose
shapes stay unknown is reported on stderr and left out (the figure is then a lower bound).
"""
import os, sys
import numpy as np
import onnx
from onnx import numpy_helper, shape_inference


def shapes_of(model):
    g = model.graph
    inits = {i.name for i in g.initializer}
    d = os.path.dirname(model_path)
    k = 0
    for inp in g.input:
        if inp.name in inits:
            continue
        pb = os.path.join(d, 'test_data_set_0', f'input_{k}.pb')
        k += 1
        ref = None
        if os.path.exists(pb):
            t = onnx.TensorProto()
            t.ParseFromString(open(pb, 'rb').read())
            ref = list(t.dims)
        for i, dim in enumerate(inp.type.tensor_type.shape.dim):
            if not dim.HasField('dim_value'):
                dim.dim_value = ref[i] if ref else 1
    m = shape_inference.infer_shapes(model, data_prop=True)
    s = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        tt = vi.type.tensor_type
        dims = tt.shape.dim
        if tt.HasField('shape') and all(x.HasField('dim_value') for x in dims):
            s[vi.name] = [x.dim_value for x in dims]
    for t in m.graph.initializer:
        s[t.name] = list(t.dims)
    return m, s


def flops(model):
    m, s = shapes_of(model)
    total, unknown = 0, []
    for n in m.graph.node:
        if n.op_type not in ('Conv', 'ConvTranspose', 'MatMul', 'Gemm'):
            continue
        ins = [s.get(x) for x in n.input[:2]]
        out = s.get(n.output[0])
        if out is None or ins[0] is None or ins[1] is None:
            unknown.append(n.name or n.op_type)
            continue
        if n.op_type == 'Conv':  # out elems x (Cin/group x kernel)
            total += 2 * int(np.prod(out)) * int(np.prod(ins[1][1:]))
        elif n.op_type == 'ConvTranspose':  # input elems x (Cout/group x kernel)
            total += 2 * int(np.prod(ins[0])) * int(np.prod(ins[1][1:]))
        elif n.op_type == 'MatMul':
            total += 2 * int(np.prod(out)) * ins[0][-1]
        else:  # Gemm
            trans_a = next((a.i for a in n.attribute if a.name == 'transA'), 0)
            total += 2 * int(np.prod(out)) * (ins[0][0] if trans_a else ins[0][1])
    return total, unknown


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for model_path in sys.argv[1:]:
        if os.path.isdir(model_path):
            model_path = os.path.join(model_path, 'model.onnx')
        total, unknown = flops(onnx.load(model_path))
        if unknown:
            print(f'flops.py: {model_path}: {len(unknown)} node(s) with unknown shapes left out: {unknown[:5]}',
                  file=sys.stderr)
        print(f'{total / 1e9:.4f}\t{"lower-bound" if unknown else "exact"}\t{model_path}')
