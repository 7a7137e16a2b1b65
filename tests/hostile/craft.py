"""Small builders for crafted ONNX models (Debian's python3-onnx), shared by the cases_*.py files."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, initializers=(), opset=17, value_info=()):
    g = helper.make_graph(list(nodes), "hostile", list(inputs), list(outputs), list(initializers),
                          value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="hostile")
    m.ir_version = 8
    return m


def tensor_in(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def save(m, path):
    """Writes the model as it is (no checker: these models are meant to be wrong)."""
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def add_model(weight):
    """y = x + w, with `w` the initializer TensorProto given (its name must be 'w')."""
    shape = list(weight.dims)
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [tensor_in("x", shape)], [tensor_in("y", shape)], [weight])


def external_weight(location, shape=(4,), offset=None, length=None, dtype=F):
    """An initializer 'w' whose bytes live in external data at `location`."""
    t = TensorProto()
    t.name = "w"
    t.data_type = dtype
    t.dims.extend(shape)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def relu_model(shape=(1, 4)):
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                 [tensor_in("x", list(shape))], [tensor_in("y", list(shape))])


def random_input(path, shape, seed=1):
    arr = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr, "x").SerializeToString())
    return path
