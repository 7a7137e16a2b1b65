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


# ---- plans: the binary format of src/builder/plan_file.cc, parsed and written back with a valid
# checksum (an attacker can recompute FNV-1a; the loader must not rely on it) ----
import struct

PLAN_MAGIC = b"TACPLAN\0"


def fnv1a(data):
    h = 1469598103934665603
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


class Plan:
    """The fields of a plan file, editable; write() recomputes the header and checksum."""

    def __init__(self, path):
        raw = open(path, "rb").read()
        assert raw[:8] == PLAN_MAGIC, "not a plan"
        self.version, size, _ = struct.unpack_from("<IQQ", raw, 8)
        self._b, self._p = raw[28:], 0
        self.tool, self.device, self.model_hash, self.route = (self._str() for _ in range(4))
        self.threads, self.arena = self._pod("<i"), self._pod("<q")
        self.dims = [(self._str(), self._pod("<q")) for _ in range(self._pod("<I"))]
        self.model_bytes = self._str()
        self.values = [[self._str(), self._pod("<B"), self._pod("<B"), self._pod("<q")] for _ in range(self._pod("<I"))]
        self.steps = []
        for _ in range(self._pod("<I")):
            node, tactic = self._pod("<i"), self._str()
            inputs = [self._str() for _ in range(self._pod("<I"))]
            self.steps.append([node, tactic, inputs, self._pod("<B"), self._pod("<B")])
        self.log = [self._str() for _ in range(self._pod("<I"))]
        self.ranges = [(self._str(), self._pod("<q"), self._pod("<q"), self._pod("<q")) for _ in range(self._pod("<I"))]
        self.source_model = self._str() if self.ranges else b""
        assert self._p == len(self._b), "trailing bytes"

    def _pod(self, fmt):
        (v,) = struct.unpack_from(fmt, self._b, self._p)
        self._p += struct.calcsize(fmt)
        return v

    def _str(self):
        n = self._pod("<Q")
        s = self._b[self._p:self._p + n]
        self._p += n
        return s

    def value(self, name):
        return next(v for v in self.values if v[0] == name.encode())

    def model(self):
        m = onnx.ModelProto()
        m.ParseFromString(self.model_bytes)
        return m

    def write(self, path):
        out = bytearray()
        s = lambda b: out.extend(struct.pack("<Q", len(b)) + b)  # noqa: E731
        for b in (self.tool, self.device, self.model_hash, self.route):
            s(b)
        out += struct.pack("<iqI", self.threads, self.arena, len(self.dims))
        for name, size in self.dims:
            s(name)
            out += struct.pack("<q", size)
        s(self.model_bytes)
        out += struct.pack("<I", len(self.values))
        for name, kind, layout, offset in self.values:
            s(name)
            out += struct.pack("<BBq", kind, layout, offset)
        out += struct.pack("<I", len(self.steps))
        for node, tactic, inputs, in_place, dynamic in self.steps:
            out += struct.pack("<i", node)
            s(tactic)
            out += struct.pack("<I", len(inputs))
            for i in inputs:
                s(i)
            out += struct.pack("<BB", in_place, dynamic)
        out += struct.pack("<I", len(self.log))
        for line in self.log:
            s(line)
        out += struct.pack("<I", len(self.ranges))
        for name, lo, opt, hi in self.ranges:
            s(name)
            out += struct.pack("<qqq", lo, opt, hi)
        if self.ranges:
            s(self.source_model)
        with open(path, "wb") as f:
            f.write(PLAN_MAGIC + struct.pack("<IQQ", self.version, len(out), fnv1a(bytes(out))) + bytes(out))
        return path
