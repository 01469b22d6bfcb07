#!/usr/bin/env python3
"""Tests of models/zoo.py and bench/compare.py (plain script; exits non-zero on failure).

  python3 tests/lab/test_compare.py [--peregrine build/bin/peregrine]
"""

import argparse
import json
import os
import stat
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(REPO, "models", "zoo.py")
COMPARE = os.path.join(REPO, "bench", "compare.py")
sys.path.insert(0, os.path.join(REPO, "bench"))
import compare  # noqa: E402
import kernel_coverage  # noqa: E402

ENGINE_FIELDS = ("median_ms", "min_ms", "chunk_medians_ms", "timing")
AGREEMENT_FIELDS = ("max_abs_err", "max_rel_err", "scaled_err", "cosine", "agree", "outputs")


def run_compare(peregrine, models, *extra, as_json=True):
    proc = subprocess.run([sys.executable, COMPARE, *models, "--peregrine", peregrine,
                           "--iterations", "2", "--rounds", "2", *extra] +
                          (["--json"] if as_json else []), capture_output=True, text=True)
    assert proc.returncode == 0, f"compare.py exited {proc.returncode}:\n{proc.stderr}"
    return json.loads(proc.stdout) if as_json else proc.stdout


def check_record(rec):
    assert not rec["errors"], rec["errors"]
    for engine in ("peregrine", "onnxruntime"):
        for field in ENGINE_FIELDS:
            assert field in rec["engines"][engine], (engine, field)
        assert rec["engines"][engine]["median_ms"] > 0
    for field in AGREEMENT_FIELDS:
        assert field in rec["agreement"], field
    assert rec["agreement"]["cosine"] > 0.9999, rec["agreement"]
    assert rec["agreement"]["agree"] is True
    assert rec["ratio_peregrine_ort"] > 0


def check_memory(rec):
    pg = rec["engines"]["peregrine"]["memory"]
    ort = rec["engines"]["onnxruntime"]["memory"]
    assert pg["peak_rss_mb"] > 0, pg
    assert ort["baseline_rss_mb"] > 0 and ort["peak_rss_mb"] >= ort["baseline_rss_mb"], ort
    assert abs(ort["above_baseline_mb"] - (ort["peak_rss_mb"] - ort["baseline_rss_mb"])) < 1e-9
    ratio = pg["peak_rss_mb"] / ort["peak_rss_mb"]
    assert abs(rec["memory_ratio_peregrine_ort"] - ratio) < 1e-9, rec


def check_noise_floor(rec):
    floor = rec["ort_self_agreement"]
    for field in AGREEMENT_FIELDS:
        assert field in floor, field
    # Unoptimized ORT computes the same function: it must agree with optimized ORT, and
    # reordering alone moves a 5-node float32 model's outputs far less than 1e-3.
    assert floor["agree"] is True, floor
    assert 0 <= floor["max_rel_err"] < 1e-3 and 0 <= floor["scaled_err"] < 1e-4, floor


def test_peak_memory_is_the_childs_own(tiny, peregrine, tmp):
    """Linux carries ru_maxrss over fork + exec: a child forked straight from a big parent
    reports the parent's peak. Make this process big and check both children stay small."""
    ballast = np.ones(256 * 1024 * 1024 // 8)  # 256 MiB, written so it is resident
    inputs = compare.make_inputs(tiny, seed=0)
    files = {}
    for i, (name, value) in enumerate(inputs.items()):
        files[name] = os.path.join(tmp, f"mem_input_{i}.npy")
        np.save(files[name], value)
    engine = compare.Peregrine(peregrine, 1, files)
    engine.timing = "bench" if engine._bench_available() else "run_wall"
    pg = compare.peregrine_peak_memory(engine, tiny, 2)
    ort = compare.ort_peak_memory(tiny, 1, 2, files)
    assert 0 < pg["peak_rss_mb"] < 128, pg  # tiny model: well below the ballast
    assert 0 < ort["baseline_rss_mb"] <= ort["peak_rss_mb"] < 200, ort
    assert ballast.sum() > 0


def test_zoo_tiny(tmp):
    out = subprocess.run([sys.executable, ZOO, "tiny", "--out-dir", tmp], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    path = os.path.join(tmp, "tiny.onnx")
    onnx.checker.check_model(path)
    assert os.path.getsize(path) < 1_000_000
    # Same seed, same bytes; an existing file is kept unless --overwrite.
    before = open(path, "rb").read()
    again = subprocess.run([sys.executable, ZOO, "tiny", "--out-dir", tmp], capture_output=True,
                           text=True)
    assert again.returncode == 2 and "already exists" in again.stderr, again
    assert open(path, "rb").read() == before
    subprocess.run([sys.executable, ZOO, "tiny", "--out-dir", tmp, "--overwrite", "--seed", "0"],
                   check=True, capture_output=True)
    assert open(path, "rb").read() == before
    return path


def make_token_model(path):
    """Int64 ids and mask inputs: an embedding Gather scaled by the mask."""
    emb = numpy_helper.from_array(
        np.random.default_rng(1).standard_normal((50, 4)).astype(np.float32), "emb")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["e"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axes"], ["m3"]),
        helper.make_node("Mul", ["e", "m3"], ["hidden"]),
    ]
    graph = helper.make_graph(
        nodes, "tokens",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 8]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, 8])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, 8, 4])], [emb, axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_inputs(token_model):
    inputs = compare.make_inputs(token_model, seed=0)
    ids = inputs["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (1, 8)
    assert ids.min() >= 0 and ids.max() < 50  # within the embedding table
    assert (inputs["attention_mask"] == 1).all()
    again = compare.make_inputs(token_model, seed=0)
    assert (again["input_ids"] == ids).all()


def test_agreement():
    ref = {"y": np.linspace(-1, 1, 100, dtype=np.float32)}
    same = compare.agreement({"y": ref["y"].copy()}, ref, 0.9999)
    assert same["agree"] and same["max_abs_err"] == 0 and same["cosine"] > 0.999999
    off = compare.agreement({"y": ref["y"][::-1].copy()}, ref, 0.9999)
    assert not off["agree"] and off["cosine"] < 0
    # Relative error ignores references below the floor: 0 vs 1e-5 is no relative error.
    tiny = compare.agreement({"y": np.array([1.0, 1e-5])}, {"y": np.array([1.1, 0.0])}, 0.9)
    assert abs(tiny["max_rel_err"] - 0.1 / 1.1) < 1e-9, tiny
    # A near-perfect cosine does not hide an error that is large against the output's scale.
    big = compare.agreement({"y": np.array([1000.0, 3.0])}, {"y": np.array([1000.0, 1.0])},
                            0.9999)
    assert big["cosine"] > 0.9999 and big["scaled_err"] > 1e-3 and not big["agree"], big
    nan = compare.agreement({"y": np.full(3, np.nan)}, {"y": np.ones(3)}, 0.9)
    assert not nan["agree"]
    shape = compare.agreement({"y": np.ones(4)}, {"y": np.ones(3)}, 0.9)
    assert not shape["agree"] and "error" in shape["outputs"]["y"]


def test_kernel_coverage_summary():
    """Reference time counts plain reference nodes and CPU kernels' reference fallbacks."""
    prof = {"latency_median_ms": 1.0, "nodes": [
        {"name": "a", "op_type": "Conv", "kernel": "cpu/conv-x", "inputs": "", "median_us": 60.0,
         "percent_of_roof": 40.0},
        {"name": "b", "op_type": "Einsum", "kernel": "reference", "inputs": "", "median_us": 30.0},
        {"name": "c", "op_type": "Conv", "kernel": "reference (fallback of cpu/conv-x)",
         "inputs": "", "median_us": 10.0, "percent_of_roof": 1.0}]}
    cov = kernel_coverage.summarize("m.onnx", prof, 5)
    assert abs(cov["reference_share"] - 0.4) < 1e-12, cov
    assert cov["reference_ops"] == {"Einsum": {"us": 30.0, "count": 1},
                                    "Conv": {"us": 10.0, "count": 1}}, cov
    assert [g["node"] for g in cov["gemm_nodes"]] == ["a", "c"], cov
    assert cov["top_ops"][0]["op_type"] == "Conv" and abs(cov["top_ops"][0]["share"] - 0.7) < 1e-12


def make_bench_stub(tmp, peregrine):
    """A peregrine stand-in whose `bench` prints a fixed report; everything else is real."""
    stub = os.path.join(tmp, "peregrine_stub")
    report = {"create_ms": 1.5, "first_run_ms": 2.5, "throughput_per_s": 400.0,
              "peak_rss_mb": 10.0,
              "latency_ms": {"min": 2.0, "mean": 2.6, "median": 2.5, "p90": 3.0, "p95": 3.1,
                             "p99": 3.2}}
    with open(stub, "w") as f:
        f.write(f"""#!/usr/bin/env python3
import os, sys
if len(sys.argv) > 1 and sys.argv[1] == "bench":
    if "--help" in sys.argv:
        print("usage: peregrine bench MODEL [--json] [--iterations N] [--no-record]")
    else:
        assert "--json" in sys.argv and "--no-record" in sys.argv, sys.argv
        print({json.dumps(json.dumps(report))})
    sys.exit(0)
os.execv({peregrine!r}, [{peregrine!r}] + sys.argv[1:])
""")
    os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
    return stub


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peregrine", default=compare.default_peregrine())
    args = parser.parse_args()
    peregrine = os.path.abspath(args.peregrine)
    with tempfile.TemporaryDirectory(prefix="pg-lab-test-") as tmp:
        tiny = test_zoo_tiny(tmp)
        tokens = make_token_model(os.path.join(tmp, "tokens.onnx"))
        test_inputs(tokens)
        test_agreement()
        test_kernel_coverage_summary()

        doc = run_compare(peregrine, [tiny, tokens], "--threads", "1")
        for field in ("threads", "iterations", "rounds", "onnxruntime_version", "models"):
            assert field in doc, field
        assert doc["threads"] == 1 and len(doc["models"]) == 2
        for rec in doc["models"]:
            check_record(rec)
        assert doc["models"][1]["inputs"]["input_ids"]["dtype"] == "int64"
        assert "memory" not in doc["models"][0]["engines"]["peregrine"]
        assert "ort_self_agreement" not in doc["models"][0]

        # --coverage: every node of the tiny model runs on a CPU kernel.
        doc = run_compare(peregrine, [tiny], "--coverage")
        cov = doc["models"][0]["coverage"]
        assert cov["nodes"] > 0 and cov["reference_share"] == 0.0, cov
        roofs = [g["percent_of_roof"] for g in cov["worst_gemm_nodes"]]
        assert roofs and roofs == sorted(roofs) and len(roofs) <= 10, cov
        table = run_compare(peregrine, [tiny], "--coverage", as_json=False)
        assert "GEMM-class nodes (percent of roofline bound)" in table, table

        # --memory and --noise-floor on the tiny model: fields exist and are sane.
        doc = run_compare(peregrine, [tiny], "--memory", "--noise-floor")
        assert doc["memory"] is True and doc["noise_floor"] is True
        check_record(doc["models"][0])
        check_memory(doc["models"][0])
        check_noise_floor(doc["models"][0])
        table = run_compare(peregrine, [tiny], "--memory", "--noise-floor", as_json=False)
        header = table.splitlines()[1]
        for column in ("ort self rel", "pg MiB", "ort MiB", "pg/ort MiB"):
            assert column in header, (column, header)
        test_peak_memory_is_the_childs_own(tiny, peregrine, tmp)

        # The `peregrine bench --json` path, with a stub report.
        stubbed = run_compare(make_bench_stub(tmp, peregrine), [tiny], "--threads", "2")
        rec = stubbed["models"][0]
        check_record(rec)
        pg = rec["engines"]["peregrine"]
        assert pg["timing"] == "bench" and pg["median_ms"] == 2.5 and pg["create_ms"] == 1.5, pg
        assert pg["chunk_medians_ms"] == [2.5, 2.5]
        # --memory takes Peregrine's peak from the `bench --json` report.
        stubbed = run_compare(make_bench_stub(tmp, peregrine), [tiny], "--memory")
        assert stubbed["models"][0]["engines"]["peregrine"]["memory"] == {"peak_rss_mb": 10.0}
    print("test_compare: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
