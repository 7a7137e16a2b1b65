"""Crafted plans (issue 30, items 2 and 3): every field the runtime trusts, tampered with a valid
checksum, is refused before anything runs; a plan of another model is refused."""
from onnx import helper

import craft
from hostile import case

SHAPE = [2, 8]


def sub_relu_model():
    """t = a - b; y = relu(t) * c (c a constant): steps whose inputs can be swapped, an arena value."""
    import numpy as np
    from onnx import numpy_helper
    c = numpy_helper.from_array(np.linspace(0.5, 2.0, 16, dtype=np.float32).reshape(SHAPE), "c")
    return craft.model([helper.make_node("Sub", ["a", "b"], ["t"], name="sub"),
                        helper.make_node("Relu", ["t"], ["r"], name="relu"),
                        helper.make_node("Mul", ["r", "c"], ["y"], name="mul")],
                       [craft.tensor_in("a", SHAPE), craft.tensor_in("b", SHAPE)], [craft.tensor_in("y", SHAPE)], [c])


def built(ctx, route="pass.fuse_elementwise=off"):
    """The model, its plan (built for `route`), and the run arguments with random inputs."""
    m = craft.save(sub_relu_model(), ctx.path("model.onnx"))
    ctx.expect_ok(ctx.run("build", m, "--route", route, "-o", ctx.path("good.plan")), "plan")
    a = craft.random_input(ctx.path("a.pb"), SHAPE, seed=1)
    b = craft.random_input(ctx.path("b.pb"), SHAPE, seed=2)
    # the .pb files hold a tensor named x: --input names the graph input
    return m, ["--input", f"a={a}", "--input", f"b={b}", "--output-dir", ctx.path("out")]


def refused(ctx, plan, *patterns, model=None, run_args=()):
    """`run --plan`, `run PLAN` and `bench` all refuse the plan, naming it; no output is written."""
    ctx.expect_error(ctx.run("run", model, "--plan", plan, *run_args), r"tampered\.plan", *patterns)
    ctx.expect_error(ctx.run("run", plan, *run_args), r"tampered\.plan", *patterns)
    ctx.expect_error(ctx.run("bench", plan, "--min-runs", "1", "--min-seconds", "0", "--warmup", "0"), r"tampered\.plan", *patterns)
    ctx.check(not any(ctx.path("out").glob("*")), "outputs were written from a refused plan")


def tamper(ctx, edit, *patterns):
    m, run_args = built(ctx)
    p = craft.Plan(ctx.path("good.plan"))
    edit(p)
    refused(ctx, p.write(ctx.path("tampered.plan")), *patterns, model=m, run_args=run_args)


@case("plan.control")
def _(ctx):
    # The untampered plan, parsed and written back by this script, runs: the edits below are the only change.
    m, run_args = built(ctx)
    p = craft.Plan(ctx.path("good.plan"))
    ctx.expect_ok(ctx.run("run", m, "--plan", p.write(ctx.path("same.plan")), *run_args), "outputs written")


@case("plan.huge-arena")
def _(ctx):
    def edit(p):
        p.arena = 1 << 62
    tamper(ctx, edit, "arena of 4611686018427387904 bytes", "larger than this machine's memory")


@case("plan.negative-arena")
def _(ctx):
    def edit(p):
        p.arena = -64
    tamper(ctx, edit, "arena of -64 bytes")


@case("plan.offset-overflow")
def _(ctx):
    def edit(p):
        p.value("t")[3] = (1 << 63) - 16  # offset + size overflows int64
    tamper(ctx, edit, "value 't' lies outside the arena")


@case("plan.offset-past-arena")
def _(ctx):
    def edit(p):
        p.value("t")[3] = p.arena  # starts at the end: its 64 bytes lie past it
    tamper(ctx, edit, "value 't' lies outside the arena")


@case("plan.negative-offset")
def _(ctx):
    def edit(p):
        p.value("t")[3] = -64
    tamper(ctx, edit, "value 't' lies outside the arena")


@case("plan.threads")
def _(ctx):
    for threads in (100000, 0, -3):
        def edit(p, threads=threads):
            p.threads = threads
        tamper(ctx, edit, f"asks for {threads} threads")


@case("plan.run-threads-flag")
def _(ctx):
    m, run_args = built(ctx)
    for t in ("100000", "0", "abc", "-1"):
        ctx.expect_error(ctx.run("run", m, "--plan", ctx.path("good.plan"), "--threads", t, *run_args),
                         f"--threads '{t}'", "this machine runs 1 to")


@case("plan.swapped-inputs")
def _(ctx):
    def edit(p):
        sub = next(s for s in p.steps if s[2] == [b"a", b"b"])
        sub[2] = [b"b", b"a"]
    tamper(ctx, edit, "node 'sub' \\(Sub\\) reads other values than its node")


@case("plan.input-from-elsewhere")
def _(ctx):
    def edit(p):
        relu = next(s for s in p.steps if s[2] == [b"t"])
        relu[2] = [b"c"]  # a constant of the same shape
    tamper(ctx, edit, "node 'relu' \\(Relu\\) reads other values than its node")


@case("plan.steps-reordered")
def _(ctx):
    def edit(p):
        p.steps.reverse()
    tamper(ctx, edit, "reads '[tr]' before any step computes it")


@case("plan.step-twice")
def _(ctx):
    def edit(p):
        p.steps[2] = list(p.steps[0])
    tamper(ctx, edit, "has two steps")


@case("plan.kind-constant-as-input")
def _(ctx):
    def edit(p):
        p.value("c")[1] = 3  # Kind::input: the runtime would read an input slot that is never bound
    tamper(ctx, edit, "value 'c' is stored as input in the plan, but its graph makes it a constant")


@case("plan.kind-arena-as-constant")
def _(ctx):
    def edit(p):
        p.value("t")[1] = 2  # Kind::constant: a constant without data
    tamper(ctx, edit, "value 't' is stored as constant in the plan, but its graph makes it a node's output")


@case("plan.value-dropped")
def _(ctx):
    def edit(p):
        p.values = [v for v in p.values if v[0] != b"t"]  # t gets no buffer
    tamper(ctx, edit, "writes 't', which has no buffer")


@case("plan.graph-type-shrunk")
def _(ctx):
    # The graph inside the plan declares t smaller than Sub computes: a kernel sizes its writes from
    # its inputs, so the arena buffer planned for the smaller type would overflow.
    def edit(p):
        m = p.model()
        for vi in list(m.graph.value_info) + list(m.graph.output):
            if vi.name == "t":
                vi.type.tensor_type.shape.dim[1].dim_value = 1
        p.model_bytes = m.SerializeToString()
    tamper(ctx, edit, "value 't' is float\\[2,1\\] in the plan, its producer computes float\\[2,8\\]")


@case("plan.tactic-of-other-op")
def _(ctx):
    def edit(p):
        relu = next(s for s in p.steps if s[2] == [b"t"])
        relu[1] = b"gemm_avx512_6x32"
    tamper(ctx, edit, "uses tactic 'gemm_avx512_6x32', which this build lacks")


@case("plan.other-model")
def _(ctx):
    # Same inputs and outputs, another computation: the plan names the model it was built from.
    built(ctx)
    other = sub_relu_model()
    other.graph.node[1].op_type = "Sigmoid"
    o = craft.save(other, ctx.path("other.onnx"))
    a = craft.random_input(ctx.path("a.pb"), SHAPE, seed=1)
    b = craft.random_input(ctx.path("b.pb"), SHAPE, seed=2)
    ctx.expect_error(ctx.run("run", o, "--plan", ctx.path("good.plan"), "--input", f"a={a}", "--input", f"b={b}",
                             "--output-dir", ctx.path("out")),
                     r"good\.plan: the plan was built from another model", r"other\.onnx")


@case("plan.truncated-and-garbage")
def _(ctx):
    built(ctx)
    raw = ctx.path("good.plan").read_bytes()
    ctx.path("tampered.plan").write_bytes(raw[: len(raw) // 2])
    ctx.expect_error(ctx.run("bench", ctx.path("tampered.plan")), r"tampered\.plan", "truncated")
    ctx.path("tampered.plan").write_bytes(raw[:28] + bytes(b ^ 0x5A for b in raw[28:]))
    ctx.expect_error(ctx.run("bench", ctx.path("tampered.plan")), r"tampered\.plan", "checksum mismatch")
    ctx.path("tampered.plan").write_bytes(b"TACPLAN\0" + b"\xff" * 40)
    ctx.expect_error(ctx.run("bench", ctx.path("tampered.plan")), r"tampered\.plan")


@case("plan.lengths-past-end")
def _(ctx):
    # A string length or a count near 2^64 with a recomputed checksum: a clear error, no allocation.
    built(ctx)
    for edit in ("steps", "values", "dims"):
        p = craft.Plan(ctx.path("good.plan"))
        if edit == "steps":
            p.steps[0][2] = [b"a"] * 3
        elif edit == "values":
            p.values.append([b"nope", 1, 0, 0])
        else:
            p.dims.append([b"batch", -4])
        p.write(ctx.path("tampered.plan"))
        ctx.expect_error(ctx.run("bench", ctx.path("tampered.plan")), r"tampered\.plan")
    raw = bytearray(ctx.path("good.plan").read_bytes())
    raw[28:36] = (2 ** 64 - 1).to_bytes(8, "little")  # the tool version string's length
    payload = bytes(raw[28:])
    raw[20:28] = craft.fnv1a(payload).to_bytes(8, "little")
    ctx.path("tampered.plan").write_bytes(bytes(raw))
    ctx.expect_error(ctx.run("bench", ctx.path("tampered.plan")), r"tampered\.plan: malformed plan")


@case("plan.arena-larger-than-needed")
def _(ctx):
    # Within the machine's memory, but more than the values need: a few bytes of plan must not
    # make the runtime hold gigabytes.
    def edit(p):
        p.arena += 8 << 30
    tamper(ctx, edit, "larger than its values need")


@case("plan.misaligned-offset")
def _(ctx):
    # Inside the arena, but off the element grid: kernels read floats through typed pointers.
    def edit(p):
        p.value("t")[3] += 1
    tamper(ctx, edit, "value 't' is not aligned to its element size in the arena")


def ranged(ctx):
    """Relu over x[n,4] built with the shape range n=1..8:2, and run arguments for an input of n rows."""
    m = craft.save(craft.relu_model(("n", 4)), ctx.path("model.onnx"))
    ctx.expect_ok(ctx.run("build", m, "--shapes", "n=1..8:2", "-o", ctx.path("good.plan")), "shape ranges: n=1..8:2")

    def args(n):
        return ["--input", f"x={craft.random_input(ctx.path(f'x{n}.pb'), (n, 4), seed=n)}", "--output-dir", ctx.path("out")]
    return m, args


@case("plan.range-runs-inside")
def _(ctx):
    # The control: sizes inside the range run (the opt size and a specialized one), outside is refused.
    m, args = ranged(ctx)
    for n in (2, 5):
        ctx.expect_ok(ctx.run("run", m, "--plan", ctx.path("good.plan"), *args(n)), "outputs written")
    ctx.expect_error(ctx.run("run", m, "--plan", ctx.path("good.plan"), *args(9)),
                     r"input 'x' dim 0 \(n\): 9 is outside the plan's range 1\.\.8")


@case("plan.range-opt-mismatch")
def _(ctx):
    # A range whose opt is not the size the plan was built for would run steps prepared for other shapes.
    m, args = ranged(ctx)
    p = craft.Plan(ctx.path("good.plan"))
    p.ranges = [(b"n", 1, 3, 8)]
    ctx.expect_error(ctx.run("run", m, "--plan", p.write(ctx.path("tampered.plan")), *args(3)),
                     r"tampered\.plan", "shape range of 'n' is malformed")


@case("plan.range-source-garbage")
def _(ctx):
    # The source model other sizes are built from is input too: garbage there is an error when a size
    # needs it, and the opt size still runs.
    m, args = ranged(ctx)
    p = craft.Plan(ctx.path("good.plan"))
    p.source_model = b"\x08\x07garbage" * 10
    plan = p.write(ctx.path("tampered.plan"))
    ctx.expect_ok(ctx.run("run", m, "--plan", plan, *args(2)), "outputs written")
    ctx.expect_error(ctx.run("run", m, "--plan", plan, *args(5)), "the plan's source model")
