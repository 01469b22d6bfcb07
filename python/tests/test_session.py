"""peregrine.InferenceSession against ONNX Runtime's API and results."""

import json
import os
import threading
import time
import warnings

import numpy as np
import onnxruntime as ort
import pytest

import peregrine
from conftest import conv_net, matmul_chain, save


def image(n=1, h=16, w=16, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 3, h, w)).astype(np.float32)


def test_inputs_outputs_and_metadata(conv_model):
    s = peregrine.InferenceSession(conv_model, providers=["CPUExecutionProvider"])
    (inp,), (out,) = s.get_inputs(), s.get_outputs()
    theirs = ort.InferenceSession(conv_model, providers=["CPUExecutionProvider"])
    assert (inp.name, inp.type, inp.shape) == (theirs.get_inputs()[0].name,
                                               theirs.get_inputs()[0].type,
                                               theirs.get_inputs()[0].shape)
    assert (out.name, out.type, out.shape) == ("logits", "tensor(float)", ["N", 5])
    meta = s.get_modelmeta()
    assert meta.producer_name == "peregrine-tests"
    assert meta.description == "a test model"
    assert meta.version == 3
    assert meta.custom_metadata_map == {"author": "tests", "classes": "5"}
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert peregrine.get_available_providers() == ["CPUExecutionProvider"]


def test_outputs_match_onnxruntime(conv_model):
    s = peregrine.InferenceSession(conv_model)
    theirs = ort.InferenceSession(conv_model, providers=["CPUExecutionProvider"])
    x = image(2, 19, 23)
    (mine,) = s.run(None, {"image": x})
    (ref,) = theirs.run(None, {"image": x})
    assert mine.shape == ref.shape == (2, 5)
    np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-5)
    assert s.run(["logits"], {"image": x})[0].shape == (2, 5)


def test_model_from_bytes(conv_model):
    with open(conv_model, "rb") as f:
        s = peregrine.InferenceSession(f.read())
    assert s.run(None, {"image": image()})[0].shape == (1, 5)


def test_zero_copy_inputs_and_outputs(conv_model):
    s = peregrine.InferenceSession(conv_model)
    x = image()
    (y,) = s.run(None, {"image": x})
    assert s.last_run_input_copies == 0
    # The result is a view over the engine's buffer (kept alive by the array), not a copy.
    assert not y.flags.owndata and y.base is not None
    fortran = np.asfortranarray(image(1, 16, 16, seed=0))
    (y2,) = s.run(None, {"image": fortran})
    assert s.last_run_input_copies == 1
    np.testing.assert_array_equal(y, y2)


def test_outputs_never_alias_inputs_or_weights(passthrough_model):
    s = peregrine.InferenceSession(passthrough_model)
    x = np.ones((4, 3), np.float32)
    same, weight = s.run(None, {"x": x})
    assert not np.shares_memory(same, x)
    same[:] = 7
    assert (x == 1).all()
    weight[:] = -1  # the caller's copy: the model's weight is untouched
    _, again = s.run(None, {"x": x})
    np.testing.assert_array_equal(again, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_input_types(typed_model):
    s = peregrine.InferenceSession(typed_model)
    i = np.array([[1, 2], [3, 4]], np.int64)
    b = np.array([True, False, True])
    strings = np.array(["ab", "çd"], dtype=object)
    i2, nb, s2 = s.run(None, {"i": i, "b": b, "s": strings})
    np.testing.assert_array_equal(i2, 2 * i)
    np.testing.assert_array_equal(nb, ~b)
    assert nb.dtype == np.bool_
    assert list(s2) == ["ab", "çd"]


@pytest.mark.parametrize("feed,words", [
    ({"image": np.zeros((1, 3, 8, 8), np.float64)}, ["image", "float64", "float32"]),
    ({"image": np.zeros((1, 4, 8, 8), np.float32)}, ["image", "shape"]),
    ({}, ["image", "not given"]),
    ({"image": np.zeros((1, 3, 8, 8), np.float32), "extra": np.zeros(1)}, ["extra"]),
])
def test_bad_inputs_raise_invalid_argument(conv_model, feed, words):
    s = peregrine.InferenceSession(conv_model)
    with pytest.raises(peregrine.InvalidArgument) as e:
        s.run(None, feed)
    for w in words:
        assert w in str(e.value)
    assert isinstance(e.value, ValueError)


def test_bad_output_name(conv_model):
    s = peregrine.InferenceSession(conv_model)
    with pytest.raises(peregrine.InvalidArgument, match="'nope' is not an output"):
        s.run(["nope"], {"image": image()})


def test_bad_models(tmp_path):
    with pytest.raises(peregrine.InvalidGraph):
        peregrine.InferenceSession(b"\x08\x07garbage that is not a model")
    missing = str(tmp_path / "missing.onnx")
    with pytest.raises(peregrine.PeregrineError, match="missing.onnx"):
        peregrine.InferenceSession(missing)
    with pytest.raises(TypeError):
        peregrine.InferenceSession(12)


def test_providers(conv_model):
    with pytest.raises(ValueError, match="unknown execution provider 'CPUExecutionProvder'"):
        peregrine.InferenceSession(conv_model, providers=["CPUExecutionProvder"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = peregrine.InferenceSession(
            conv_model, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert any("CUDAExecutionProvider" in str(w.message) for w in caught)
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_onnxruntime_session_options_are_read(conv_model):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = peregrine.InferenceSession(conv_model, o)
    # -O0 keeps every node: Conv and Relu stay apart.
    ops = [op for _, op, _ in s.kernels()]
    assert "Relu" in ops and "Conv" in ops
    assert s.get_session_options() is o
    fused = peregrine.InferenceSession(conv_model)
    assert "Relu" not in [op for _, op, _ in fused.kernels()]


def test_free_dimension_override(conv_model):
    o = peregrine.SessionOptions()
    o.add_free_dimension_override_by_name("N", 2)
    s = peregrine.InferenceSession(conv_model, o)
    assert s.get_inputs()[0].shape == [2, 3, "H", "W"]
    o.add_free_dimension_override_by_name("batch", 2)
    with pytest.raises(peregrine.InvalidArgument, match="'batch'"):
        peregrine.InferenceSession(conv_model, o)


def test_shape_changes_are_planned_once(conv_model):
    s = peregrine.InferenceSession(conv_model)
    theirs = ort.InferenceSession(conv_model, providers=["CPUExecutionProvider"])
    sizes = [(1, 16, 16), (2, 20, 12), (1, 16, 16), (2, 20, 12), (1, 16, 16), (3, 9, 31)]
    for k, (n, h, w) in enumerate(sizes):
        x = image(n, h, w, seed=k)
        np.testing.assert_allclose(s.run(None, {"image": x})[0],
                                   theirs.run(None, {"image": x})[0], rtol=1e-5, atol=1e-5)
    stats = s.plan_stats()
    # First sightings run on the dynamic plan; a shape seen again is compiled once, then reused.
    assert stats["compiles"] == 2
    assert stats["dynamic_runs"] == 3
    assert stats["planned_runs"] == 3
    # The plans took the dynamic session's kernels (weights packed once): every kernel a plan
    # uses was in the cache before it, so the cache holds no more kernels than the base needs.
    assert stats["shared_kernels"] > 0
    assert stats["cached_kernels"] == len(s.kernels())


def test_shape_plans_are_bounded(conv_model):
    o = peregrine.SessionOptions()
    o.shape_plans = 1
    s = peregrine.InferenceSession(conv_model, o)
    for h in (8, 8, 10, 10, 8, 8):
        s.run(None, {"image": image(1, h, h)})
    stats = s.plan_stats()
    assert stats["plans"] == 1 and stats["signatures"] == 2
    assert stats["compiles"] == 3  # 8, then 10 (evicting 8), then 8 again
    o.shape_plans = 0
    s = peregrine.InferenceSession(conv_model, o)
    for _ in range(3):
        s.run(None, {"image": image()})
    assert s.plan_stats()["compiles"] == 0


def test_shape_profile_plans_up_front_and_bounds_runs(conv_model):
    o = peregrine.SessionOptions()
    o.add_shape_profile("image", (1, 3, 8, 8), (2, 3, 16, 16), (4, 3, 32, 32))
    s = peregrine.InferenceSession(conv_model, o)
    theirs = ort.InferenceSession(conv_model, providers=["CPUExecutionProvider"])
    assert s.plan_stats()["compiles"] == 3  # min, opt and max, before any run
    for n, h, w in ((2, 16, 16), (1, 8, 8), (4, 32, 32), (3, 10, 30)):
        x = image(n, h, w, seed=h)
        np.testing.assert_allclose(s.run(None, {"image": x})[0],
                                   theirs.run(None, {"image": x})[0], rtol=1e-5, atol=1e-5)
    stats = s.plan_stats()
    assert stats["compiles"] == 3 and stats["planned_runs"] == 3 and stats["dynamic_runs"] == 1
    with pytest.raises(peregrine.InvalidArgument, match="outside its shape profile"):
        s.run(None, {"image": image(1, 40, 8)})
    with pytest.raises(peregrine.InvalidArgument, match="outside its shape profile"):
        s.run(None, {"image": image(8, 8, 8)})


def test_bad_shape_profiles_are_refused(conv_model):
    for profile, message in ((((1, 3, 8, 8), (1, 3, 4, 8), (1, 3, 9, 9)), "min <= opt <= max"),
                             (((1, 3, 8), (1, 3, 8), (1, 3, 8)), "rank"),
                             (((1, 2, 8, 8), (1, 2, 8, 8), (1, 2, 8, 8)), "fixed at 3")):
        o = peregrine.SessionOptions()
        o.add_shape_profile("image", *profile)
        with pytest.raises(peregrine.InvalidArgument, match=message):
            peregrine.InferenceSession(conv_model, o)
    o = peregrine.SessionOptions()
    o.add_shape_profile("pixels", (1,), (1,), (1,))
    with pytest.raises(peregrine.InvalidArgument, match="'pixels' is not an input"):
        peregrine.InferenceSession(conv_model, o)


def test_runs_from_many_threads(conv_model):
    # Sizes change between calls and one plan is kept: threads compile, evict and run at once.
    o = peregrine.SessionOptions()
    o.shape_plans = 1
    s = peregrine.InferenceSession(conv_model, o)
    inputs = [image(1 + k % 2, 12 + 4 * (k % 3), 16, seed=k) for k in range(8)]
    expected = [s.run(None, {"image": x})[0] for x in inputs]
    results = [None] * 32
    errors = []

    def worker(k):
        try:
            results[k] = s.run(None, {"image": inputs[k % 8]})[0]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(32):
        np.testing.assert_array_equal(results[k], expected[k % 8])


def test_gil_is_released_while_running(tmp_path):
    path = save(matmul_chain(), tmp_path / "chain.onnx")
    o = peregrine.SessionOptions()
    o.intra_op_num_threads = 1
    s = peregrine.InferenceSession(path, o)
    x = np.random.default_rng(0).standard_normal((384, 384)).astype(np.float32)
    s.run(None, {"x": x})
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=count)
    start = time.perf_counter()
    t.start()
    s.run(None, {"x": x})
    s.run(None, {"x": x})
    end = time.perf_counter()
    stop.set()
    t.join()
    # With the GIL held for the whole run the counter would be stuck; released, it keeps going.
    during = [v for v in ticks if start < v < end]
    assert len(during) > 100


def test_profiling_writes_a_chrome_trace(conv_model, tmp_path):
    o = peregrine.SessionOptions()
    o.enable_profiling = True
    o.profile_file_prefix = str(tmp_path / "prof")
    s = peregrine.InferenceSession(conv_model, o)
    for _ in range(3):
        s.run(None, {"image": image()})
    path = s.end_profiling()
    assert path.startswith(str(tmp_path / "prof")) and os.path.exists(path)
    events = json.load(open(path))["traceEvents"]
    assert sum(e.get("cat") == "run" for e in events) == 3
    assert any(e.get("cat") == "node" and e["args"]["op_type"] for e in events)
    assert s.get_profiling_start_time_ns() > 0


def test_precision_option(conv_model):
    o = peregrine.SessionOptions()
    o.precision = "int3"
    with pytest.raises(peregrine.PeregrineError, match="int3"):
        peregrine.InferenceSession(conv_model, o)
    o.precision = "bf16"
    try:
        s = peregrine.InferenceSession(conv_model, o)
    except peregrine.NotImplemented as e:  # a CPU without AVX512_BF16 says so
        assert "bf16" in str(e)
        return
    x = image()
    (y,) = s.run(None, {"image": x})
    (ref,) = peregrine.InferenceSession(conv_model).run(None, {"image": x})
    np.testing.assert_allclose(y, ref, rtol=0.05, atol=0.05)  # bf16 operands: ~3 digits


def test_profile_and_compare_helpers(conv_model):
    report = peregrine.profile(conv_model, iterations=3)
    assert report["latency_ms"]["median"] > 0
    assert report["nodes"] and abs(sum(report["op_share"].values()) - 1) < 1e-6
    result = peregrine.compare(conv_model, iterations=2)
    assert result["outputs"]["logits"]["cosine"] > 0.9999


def test_memory_limit(conv_model):
    o = peregrine.SessionOptions()
    o.memory_limit = 1024  # the weights alone are bigger
    with pytest.raises(peregrine.InvalidGraph, match="memory budget of 1.0 KiB"):
        peregrine.InferenceSession(conv_model, o)


def test_static_model_never_compiles_again(tmp_path):
    path = save(conv_net(dynamic=False), tmp_path / "static.onnx")
    s = peregrine.InferenceSession(path)
    for _ in range(3):
        s.run(None, {"image": image()})
    assert s.plan_stats()["compiles"] == 0
