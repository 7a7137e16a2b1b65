"""External data that tries to leave the model's folder (issue 30, item 1)."""
import os

import numpy as np

import craft
from hostile import case

SECRET = b"TOP-SECRET-BYTES"  # 16 bytes: exactly a float[4] initializer


def secret_outside(ctx):
    """A file outside the model's folder that no model may read."""
    p = ctx.path("outside", "secret.bin")
    p.write_bytes(SECRET)
    return p


def refused_everywhere(ctx, model_path, *patterns):
    """info, run and build -o all refuse the model with the same reason; no plan gets written."""
    for args in (["info", model_path], ["run", model_path, "--random-inputs", "--output-dir", ctx.path("out")],
                 ["build", model_path, "-o", ctx.path("m.plan")]):
        ctx.expect_error(ctx.run(*args, timeout=30), "model.onnx", "initializer 'w'", *patterns)
    ctx.check(not ctx.path("m.plan").exists(), "build -o wrote a plan from a refused model")
    ctx.check(not any(ctx.path("out").glob("*")), "run wrote outputs from a refused model")


@case("external.parent-dirs")
def _(ctx):
    secret_outside(ctx)
    m = craft.save(craft.add_model(craft.external_weight("../outside/secret.bin")), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, r"external data location '\.\./outside/secret\.bin'", "outside the model's folder")


@case("external.parent-dirs-deep")
def _(ctx):
    m = craft.save(craft.add_model(craft.external_weight("../../../../../../../../etc/hostname", shape=(1,))),
                   ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "outside the model's folder")


@case("external.climbs-back-in")
def _(ctx):
    # a/../../model/w.bin names a file inside the folder, but climbs out on the way: refused as ONNX's
    # checker does (no '..' component at all).
    ctx.path("model", "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    m = craft.save(craft.add_model(craft.external_weight("a/../../model/w.bin")), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "outside the model's folder")


@case("external.absolute")
def _(ctx):
    s = secret_outside(ctx)
    m = craft.save(craft.add_model(craft.external_weight(str(s))), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "is an absolute path")


@case("external.symlink-out")
def _(ctx):
    s = secret_outside(ctx)
    os.symlink(s, ctx.path("model", "w.bin"))
    m = craft.save(craft.add_model(craft.external_weight("w.bin")), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "resolves outside the model's folder")


@case("external.symlinked-folder-out")
def _(ctx):
    s = secret_outside(ctx)
    os.symlink(s.parent, ctx.path("model", "data"))
    m = craft.save(craft.add_model(craft.external_weight("data/secret.bin")), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "resolves outside the model's folder")


@case("external.fifo")
def _(ctx):
    os.mkfifo(ctx.path("model", "w.bin"))  # opening it for reading would block forever
    m = craft.save(craft.add_model(craft.external_weight("w.bin")), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "not a regular file")


@case("external.directory")
def _(ctx):
    ctx.path("model", "w.bin", "x").write_bytes(b"")
    m = craft.save(craft.add_model(craft.external_weight("w.bin")), ctx.path("model", "model.onnx"))
    refused_everywhere(ctx, m, "not a regular file")


@case("external.bad-offset")
def _(ctx):
    ctx.path("model", "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    for offset, why in (("-4", "offset '-4'"), ("abc", "offset 'abc'"), ("4x", "offset '4x'"),
                        ("99999999999999999999", "offset '99999999999999999999'"),
                        ("9223372036854775807", "too short")):
        m = craft.save(craft.add_model(craft.external_weight("w.bin", offset=offset)), ctx.path("model", "model.onnx"))
        ctx.expect_error(ctx.run("info", m), "initializer 'w'", why)


@case("external.bad-length")
def _(ctx):
    ctx.path("model", "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    m = craft.save(craft.add_model(craft.external_weight("w.bin", length=8)), ctx.path("model", "model.onnx"))
    ctx.expect_error(ctx.run("info", m), "initializer 'w'", "length 8 does not match the 16 bytes")


@case("external.too-short")
def _(ctx):
    ctx.path("model", "w.bin").write_bytes(b"\0" * 12)
    m = craft.save(craft.add_model(craft.external_weight("w.bin")), ctx.path("model", "model.onnx"))
    ctx.expect_error(ctx.run("info", m), "initializer 'w'", "too short")


@case("external.inside-is-read")
def _(ctx):
    # The control: data inside the folder (in a subfolder, through a symlink that stays inside) is read.
    w = np.array([1.5, -2.0, 3.25, 0.5], dtype=np.float32)
    ctx.path("model", "data", "w.bin").write_bytes(b"\0" * 8 + w.tobytes())
    os.symlink("data", ctx.path("model", "alias"))
    m = craft.save(craft.add_model(craft.external_weight("alias/w.bin", offset=8, length=16)),
                   ctx.path("model", "model.onnx"))
    x = craft.random_input(ctx.path("x.pb"), (4,))
    ctx.expect_ok(ctx.run("run", m, "--input", f"x={x}", "--output-dir", ctx.path("out"), "--format", "npy"))
    from onnx import numpy_helper, TensorProto
    t = TensorProto()
    t.ParseFromString(x.read_bytes())
    y = np.load(ctx.path("out", "y.npy"))
    ctx.check(np.allclose(y, numpy_helper.to_array(t) + w), f"wrong output {y}")
