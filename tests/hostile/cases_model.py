"""Crafted models (issue 30, items 4 and 5): memory bombs are refused before anything large is
allocated, and attributes of the wrong type are refused as the reference interpreter does."""
import os
import resource

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import craft
from hostile import case

# No command of the corpus may come near the machine's memory: refusing must be cheap.
RSS_LIMIT_MIB = 1024


def stays_small(ctx):
    """Every command this case ran stayed under RSS_LIMIT_MIB (each one's own peak, from wait4)."""
    peak = getattr(ctx, "peak_mib", 0)
    ctx.check(peak < RSS_LIMIT_MIB, f"a command peaked at {peak:.0f} MiB of memory (limit {RSS_LIMIT_MIB} MiB)")


def declared_no_data(dims, name="w"):
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    return t


@case("bomb.initializer-without-data")
def _(ctx):
    # 8 bytes of dims declaring 2^33 floats (32 GiB), and no data at all.
    m = craft.save(craft.add_model(declared_no_data([1 << 33])), ctx.path("model.onnx"))
    for cmd in ("info", "knobs"):
        ctx.expect_error(ctx.run(cmd, m), "model.onnx", "initializer 'w'", "holds 0 values", "needs 8589934592")
    stays_small(ctx)


@case("bomb.initializer-size-overflows")
def _(ctx):
    t = declared_no_data([1 << 62, 16])
    t.raw_data = b""
    m = craft.save(craft.add_model(t), ctx.path("model.onnx"))
    ctx.expect_error(ctx.run("info", m), "initializer 'w'", r"shape \[4611686018427387904,16\] is too large")
    t2 = declared_no_data([1 << 61])  # 2^61 floats: the byte count wraps to 0 in 64 bits
    t2.raw_data = b""
    m = craft.save(craft.add_model(t2), ctx.path("model.onnx"))
    ctx.expect_error(ctx.run("info", m), "initializer 'w'", "too large")
    stays_small(ctx)


@case("bomb.constant-attribute-without-data")
def _(ctx):
    value = declared_no_data([1 << 33], name="v")
    m = craft.model([helper.make_node("Constant", [], ["c"], name="const", value=value),
                     helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                    [craft.tensor_in("x", [1])], [craft.tensor_in("y", [1 << 33])])
    m = craft.save(m, ctx.path("model.onnx"))
    ctx.expect_error(ctx.run("info", m), "node 'const' \\(Constant\\)", "attribute 'value'", "holds 0 values")
    stays_small(ctx)


def shape_const(name, dims):
    return numpy_helper.from_array(np.array(dims, dtype=np.int64), name)


HUGE = [100000, 100000, 10]  # 10^11 floats: 400 GB, more than any machine running this


def huge_output_model(op):
    """A model of a few hundred bytes whose one step makes a 400 GB tensor from constants."""
    one = numpy_helper.from_array(np.ones([1], dtype=np.float32), "one")
    if op == "ConstantOfShape":
        nodes, inits = [helper.make_node("ConstantOfShape", ["shape"], ["big"], name="bomb")], [shape_const("shape", HUGE)]
    elif op == "Expand":
        nodes, inits = [helper.make_node("Expand", ["one", "shape"], ["big"], name="bomb")], [one, shape_const("shape", HUGE)]
    elif op == "Tile":
        nodes, inits = [helper.make_node("Tile", ["one2", "reps"], ["big"], name="bomb")], [
            numpy_helper.from_array(np.ones([1, 1, 1], dtype=np.float32), "one2"), shape_const("reps", HUGE)]
    else:  # Range: 10^11 values from three scalars
        nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["big"], name="bomb")]
        inits = [numpy_helper.from_array(np.array(v, dtype=np.float32), n)
                 for n, v in (("start", 0.0), ("limit", 1e11), ("delta", 1.0))]
    nodes.append(helper.make_node("ReduceMax", ["big"], ["y"], name="reduce", keepdims=0))
    return craft.model(nodes, [], [craft.tensor_in("y", [])], inits)


def bomb_refused(ctx, op):
    m = craft.save(huge_output_model(op), ctx.path("model.onnx"))
    ctx.expect_ok(ctx.run("info", m, timeout=30))
    ctx.expect_ok(ctx.run("knobs", m, timeout=30))
    for cmd in (["build", m], ["run", m, "--output-dir", ctx.path("out")], ["run", m, "--reference", "--output-dir", ctx.path("out")]):
        ctx.expect_error(ctx.run(*cmd, timeout=30), "out_of_memory", "'big'|node 'bomb'", "more than this machine's")
    stays_small(ctx)


for _op in ("ConstantOfShape", "Expand", "Tile", "Range"):
    case(f"bomb.{_op.lower()}")(lambda ctx, op=_op: bomb_refused(ctx, op))


@case("bomb.folding-stays-small")
def _(ctx):
    # 12 GB of zeros that constant folding would compute just to find them too large to keep.
    shape = shape_const("shape", [3, 1000, 1000, 1000])
    m = craft.model([helper.make_node("ConstantOfShape", ["shape"], ["big"], name="zeros"),
                     helper.make_node("ReduceMax", ["big"], ["y"], name="reduce", keepdims=0)],
                    [], [craft.tensor_in("y", [])], [shape])
    m = craft.save(m, ctx.path("model.onnx"))
    ctx.expect_ok(ctx.run("info", m, timeout=30))
    ctx.expect_ok(ctx.run("knobs", m, timeout=30))
    stays_small(ctx)


@case("bomb.input-dims")
def _(ctx):
    m = craft.model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                    [craft.tensor_in("x", ["batch", 1000])], [craft.tensor_in("y", ["batch", 1000])])
    m = craft.save(m, ctx.path("model.onnx"))
    ctx.expect_error(ctx.run("run", m, "--random-inputs", "--dim", "batch=100000000000", "--output-dir", ctx.path("out"),
                             timeout=30), "out_of_memory", "more than this machine's")
    ctx.expect_error(ctx.run("build", m, "--dim", "batch=9223372036854775807", timeout=30), "too large|more than this machine's")
    stays_small(ctx)


# ---- attributes of the wrong type (item 5) ----

def conv_model(**attrs):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal([4, 3, 3, 3]).astype(np.float32), "w")
    return craft.model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)],
                       [craft.tensor_in("x", [1, 3, 8, 8])], [craft.tensor_in("y", [1, 4, 6, 6])], [w])


def wrong_attr(ctx, m, pattern):
    m = craft.save(m, ctx.path("model.onnx"))
    for cmd in (["info", m], ["build", m], ["run", m, "--random-inputs", "--output-dir", ctx.path("out")],
                ["run", m, "--reference", "--random-inputs", "--output-dir", ctx.path("out")]):
        ctx.expect_error(ctx.run(*cmd), "model.onnx", pattern)


@case("attr.strides-as-floats")
def _(ctx):
    wrong_attr(ctx, conv_model(strides=[2.0, 2.0]), "node 'conv' \\(Conv\\): attribute 'strides' must be ints .*got floats")


@case("attr.group-as-string")
def _(ctx):
    wrong_attr(ctx, conv_model(group="1"), "attribute 'group' must be an int .*got a string")


@case("attr.perm-as-float")
def _(ctx):
    m = craft.model([helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=1.0)],
                    [craft.tensor_in("x", [2, 3])], [craft.tensor_in("y", [3, 2])])
    wrong_attr(ctx, m, "node 'tr' \\(Transpose\\): attribute 'perm' must be ints .*got a float")


@case("attr.axis-as-floats")
def _(ctx):
    m = craft.model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=[0.0])],
                    [craft.tensor_in("x", [2, 3])], [craft.tensor_in("y", [2, 3])])
    wrong_attr(ctx, m, "node 'sm' \\(Softmax\\): attribute 'axis' must be an int .*got floats")


@case("attr.right-types-run")
def _(ctx):
    # The control: the same Conv with well-typed attributes runs, on the engine and the reference.
    m = craft.save(conv_model(strides=[1, 1], group=1), ctx.path("model.onnx"))
    ctx.expect_ok(ctx.run("run", m, "--random-inputs", "--output-dir", ctx.path("out")), "outputs written")


@case("data.bool-bytes-not-0-or-1")
def _(ctx):
    # A bool initializer whose raw bytes are 8 and 255: any non-zero byte is true (as numpy reads it),
    # and kernels must never see a C++ bool holding another value (undefined behaviour, UBSan).
    c = TensorProto()
    c.name, c.data_type = "c", TensorProto.BOOL
    c.dims.extend([4])
    c.raw_data = bytes([0, 8, 1, 255])
    m = craft.model([helper.make_node("Where", ["c", "x", "y0"], ["y"], name="where")],
                    [craft.tensor_in("x", [4]), craft.tensor_in("y0", [4])], [craft.tensor_in("y", [4])], [c])
    m = craft.save(m, ctx.path("model.onnx"))
    x = craft.random_input(ctx.path("x.pb"), (4,), seed=3)
    y0 = craft.random_input(ctx.path("y0.pb"), (4,), seed=4)
    xs, ys = (numpy_helper.to_array(TensorProto.FromString(p.read_bytes())) for p in (x, y0))
    want = np.where(np.array([False, True, True, True]), xs, ys)
    for extra in ([], ["--reference"]):
        out = ctx.path("out" + "".join(extra))
        ctx.expect_ok(ctx.run("run", m, "--input", f"x={x}", "--input", f"y0={y0}", "--output-dir", out,
                              "--format", "npy", *extra), "outputs written")
        got = np.load(out / "y.npy")
        ctx.check(np.array_equal(got, want), f"{' '.join(extra) or 'engine'}: {got} != {want}")


def machine_bytes():
    """The memory the commands size themselves against (core/tensor.cc, max_tensor_bytes): physical
    memory, or the address-space limit when one is lower."""
    mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return mem if soft == resource.RLIM_INFINITY else min(mem, soft)


@case("bomb.bench-input-sets")
def _(ctx):
    # One input of a quarter of the machine's memory fits (and so does the engine's output), but
    # bench's four rotating input sets (the whole memory) would not. Sized from this machine: a
    # fixed 12 GB input fitted four times on a machine with 96 GB or more, and bench filled them.
    floats = machine_bytes() // 4 // 4
    m = craft.save(craft.relu_model((floats,)), ctx.path("model.onnx"))
    ctx.expect_error(ctx.run("bench", m, "--threads", "1", timeout=60), "out_of_memory", r"model\.onnx: 4 input sets of",
                     "fewer with --input-sets")
    stays_small(ctx)
