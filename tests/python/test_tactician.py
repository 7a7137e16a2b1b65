"""`import tactician` (python/tactician_module.cc, issue 29): build, run, plans, knobs, tune and
errors, checked against the bundled model's test data. Run by ctest (python.module) with the build's
python/ folder on PYTHONPATH and TACTICIAN_SOURCE_DIR set."""
import os
import threading

import numpy as np
import pytest

import tactician

SRC = os.environ.get("TACTICIAN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "models", "squeezenet1.1")
DATA = os.path.join(MODEL, "test_data_set_0")


@pytest.fixture(scope="module")
def model():
    return tactician.Model(MODEL)


@pytest.fixture(scope="module")
def engine(model):
    return tactician.build(model, backend="cpu", threads=1)


def reference_data():
    x = tactician.load_tensor(os.path.join(DATA, "input_0.pb"))
    want = tactician.load_tensor(os.path.join(DATA, "output_0.pb"))
    assert x.dtype == np.float32 and x.shape == (1, 3, 224, 224)
    assert np.std(x) > 0.1  # real data, not zeros
    return x, want


def test_model_info(model):
    assert model.inputs == [{"name": "data_0", "dtype": "float", "shape": [1, 3, 224, 224]}]
    assert model.outputs[0]["name"] == "softmaxout_1"
    assert len(model.hash) == 16
    knobs = {k["name"]: k for k in model.knobs("cpu")}
    assert "threads" in knobs and not knobs["threads"]["per_node"]
    tactic = [k for k in knobs.values() if k["name"].startswith("tactic.")]
    assert tactic and all(k["per_node"] and k["default"] in k["values"] for k in tactic)
    assert tactician.knobs(MODEL, "cpu") == model.knobs("cpu")


def test_run_matches_test_data(engine):
    x, want = reference_data()
    out = engine.run({"data_0": x})
    assert list(out) == ["softmaxout_1"]
    np.testing.assert_allclose(out["softmaxout_1"], want, rtol=1e-3, atol=1e-5)
    assert engine.backend == "cpu" and engine.threads == 1


def test_inputs_converted_when_needed(engine):
    x, want = reference_data()
    # float64 and a non-contiguous view: converted (a copy), same answer.
    f64 = engine.run({"data_0": x.astype(np.float64)})["softmaxout_1"]
    strided = np.asfortranarray(x)
    assert not strided.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(f64, want, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(engine.run({"data_0": strided})["softmaxout_1"], want, rtol=1e-3, atol=1e-5)


def test_outputs_stay_valid(engine):
    x, _ = reference_data()
    first = engine.run({"data_0": x})["softmaxout_1"]
    keep = first.copy()
    rng = np.random.default_rng(1)
    engine.run({"data_0": rng.standard_normal(x.shape).astype(np.float32)})
    np.testing.assert_array_equal(first, keep)  # a later run does not write into an earlier result


def test_route_and_plan_round_trip(model, tmp_path):
    x, want = reference_data()
    e = tactician.build(MODEL, route="precision.default=bf16", backend="cpu", threads=1)
    assert "precision.default=bf16" in e.route
    got = e.run({"data_0": x})["softmaxout_1"]
    assert np.abs(got - want).max() < 5e-2
    plan = str(tmp_path / "m.plan")
    e.save(plan)
    loaded = tactician.load(plan, model=model)
    np.testing.assert_array_equal(loaded.run({"data_0": x})["softmaxout_1"], got)
    np.testing.assert_array_equal(tactician.load(plan).run({"data_0": x})["softmaxout_1"], got)


def test_errors_carry_the_cli_message(engine, tmp_path):
    x, _ = reference_data()
    with pytest.raises(tactician.Error) as e:
        engine.run({})
    assert e.value.kind == "invalid_argument" and "'data_0' is missing" in str(e.value)
    with pytest.raises(tactician.Error, match="no input 'extra'"):
        engine.run({"data_0": x, "extra": x})
    with pytest.raises(tactician.Error, match="takes float, got a NumPy array of complex64"):
        engine.run({"data_0": x.astype(np.complex64)})
    with pytest.raises(tactician.Error) as e:
        engine.run({"data_0": x[:, :, :8, :8].copy()})
    assert e.value.kind == "invalid_argument"
    with pytest.raises(tactician.Error, match="unknown knob 'pass.nope'"):
        tactician.build(MODEL, route="pass.nope=on")
    with pytest.raises(tactician.Error, match="no-such.onnx"):
        tactician.Model(str(tmp_path / "no-such.onnx"))
    bad = tmp_path / "bad.plan"
    bad.write_bytes(b"\x00" * 100)
    with pytest.raises(tactician.Error, match="bad.plan"):
        tactician.load(str(bad))
    with pytest.raises(tactician.Error, match="banana"):
        tactician.tune(MODEL, tolerance="cos>=banana")
    assert issubclass(tactician.Error, RuntimeError)


def test_threads_share_an_engine(engine):
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(4)]
    alone = [engine.run({"data_0": x})["softmaxout_1"].copy() for x in xs]
    got = [None] * len(xs)

    def work(i):
        got[i] = engine.run({"data_0": xs[i]})["softmaxout_1"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, a in zip(got, alone):
        np.testing.assert_array_equal(g, a)


def test_tune(tmp_path):
    lines = []
    # A budget far above what 3 candidates need (a loaded CI machine); max_candidates ends it early.
    s = tactician.tune(MODEL, budget=60, max_candidates=3, backend="cpu", threads=1, out_dir=str(tmp_path / "out"),
                       progress=lines.append)
    assert s["candidates"] >= 1 and s["default_ms"] > 0 and s["best_ms"] > 0
    assert any(line.startswith("[tune]") for line in lines)
    route = [l for l in (tmp_path / "out" / "best.route").read_text().splitlines() if l and not l.startswith("#")]
    assert " ".join(route) == s["best_route"]
    x, want = reference_data()
    best = tactician.build(MODEL, route=s["best_route"], backend="cpu")
    np.testing.assert_allclose(best.run({"data_0": x})["softmaxout_1"], want, rtol=1e-3, atol=1e-5)


BERT = os.path.join(SRC, "..", "shared", "models", "bert-toy")


def bert_feeds(batch, seq, seed):
    rng = np.random.default_rng(seed)
    return {"input_ids": rng.integers(0, 99, (batch, seq), dtype=np.int64),
            "token_type_ids": rng.integers(0, 2, (batch, seq), dtype=np.int64),
            "input_mask": np.ones((batch, seq), np.int64)}


@pytest.mark.skipif(not os.path.isdir(BERT), reason="no ../shared/models/bert-toy")
def test_shape_ranges_tuned_plan(tmp_path):
    # tune at the opt sizes; best.plan runs other sizes inside the ranges as an exact-shape engine does
    s = tactician.tune(BERT, budget=60, max_candidates=3, backend="cpu", threads=1,
                       shapes="batch=1..4:2,max_seq_len_in_batch=8..64:16", out_dir=str(tmp_path / "out"))
    plan = tactician.load(str(tmp_path / "out" / "best.plan"), model=BERT)
    assert plan.inputs[0]["shape"] == [2, 16]  # the opt sizes
    plan.prepare({"batch": 3, "max_seq_len_in_batch": 33})  # built ahead of its first run below
    with pytest.raises(tactician.Error, match="batch=5 is outside the plan's range 1..4"):
        plan.prepare({"batch": 5})
    for batch, seq in [(2, 16), (1, 8), (4, 64), (3, 33)]:
        f = bert_feeds(batch, seq, batch * 100 + seq)
        exact = tactician.build(BERT, route=s["best_route"], backend="cpu",
                                dims={"batch": batch, "max_seq_len_in_batch": seq})
        got, want = plan.run(f), exact.run(f)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    with pytest.raises(tactician.Error, match=r"dim 1 \(max_seq_len_in_batch\): 65 is outside the plan's range 8\.\.64"):
        plan.run(bert_feeds(1, 65, 1))
    with pytest.raises(tactician.Error, match="shape range 'seq'"):
        tactician.build(BERT, shapes="seq=1..4")
