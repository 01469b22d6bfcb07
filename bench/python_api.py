#!/usr/bin/env python3
"""The Python API's costs, side by side with ONNX Runtime's Python API in one run:

1. overhead per run(): a one-node model (Relu on 16 floats), median of many calls;
2. a shape change: the crop classifier of python/examples at a new input size, its first
   run (dynamic plan), second run (compiles that shape's plan) and later runs (cached plan);
3. what a shape plan costs in memory: an MLP with 64 MiB of weights and a symbolic batch, the
   process's resident memory after each new batch size's plan (plans share packed kernels).

    PYTHONPATH=build/python python3 bench/python_api.py [--calls 20000] [--rounds 5]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import peregrine

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python", "examples"))
from crop_classifier import make_model  # noqa: E402


def one_node_model(path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def mlp_model(path, width=1024, layers=4):
    """x (N, width) through `layers` MatMul -> Relu pairs, 4 x width x width weights each."""
    rng = np.random.default_rng(1)
    nodes, inits, cur = [], [], "x"
    for i in range(layers):
        rows, cols = (width, 4 * width) if i % 2 == 0 else (4 * width, width)
        w = (rng.standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32)
        inits.append(helper.make_tensor(f"w{i}", TensorProto.FLOAT, w.shape, w.ravel()))
        nodes += [helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"])]
        cur = f"r{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
        [helper.make_tensor_value_info(cur, TensorProto.FLOAT, ["N", width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, sum(t.dims[0] * t.dims[1] * 4 for t in inits)


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def per_call_us(session, feed, calls):
    start = time.perf_counter()
    for _ in range(calls):
        session.run(None, feed)
    return (time.perf_counter() - start) / calls * 1e6


def timed_ms(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = one_node_model(os.path.join(tmp, "relu.onnx"))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        engines = {"peregrine": peregrine.InferenceSession(path, so),
                   "onnxruntime": ort.InferenceSession(path, so,
                                                       providers=["CPUExecutionProvider"])}
        feed = {"x": np.ones((1, 16), np.float32)}
        samples = {k: [] for k in engines}
        for _ in range(args.rounds):  # interleaved rounds
            for name, s in engines.items():
                per_call_us(s, feed, args.calls // 10)
                samples[name].append(per_call_us(s, feed, args.calls))
        print("overhead per run(), one Relu node, median of rounds (us):")
        for name, v in samples.items():
            print(f"  {name:12s} {statistics.median(v):7.2f}")
        print(f"  ratio peregrine / onnxruntime: "
              f"{statistics.median(samples['peregrine']) / statistics.median(samples['onnxruntime']):.2f}")

        path = make_model(os.path.join(tmp, "crop_classifier.onnx"))
        rng = np.random.default_rng(0)
        mine = peregrine.InferenceSession(path, so)
        theirs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        warm = {"image": rng.uniform(-1, 1, (4, 3, 64, 64)).astype(np.float32)}
        for s in (mine, theirs):
            for _ in range(3):
                s.run(None, warm)
        print("shape change (crop classifier, batch 4, 64x64 -> 96x160), ms per run:")
        print(f"  {'engine':12s} {'1st':>7s} {'2nd':>7s} {'3rd':>7s} {'steady':>7s}")
        new = {"image": rng.uniform(-1, 1, (4, 3, 96, 160)).astype(np.float32)}
        for name, s in (("peregrine", mine), ("onnxruntime", theirs)):
            first = [timed_ms(lambda: s.run(None, new)) for _ in range(3)]
            steady = statistics.median(timed_ms(lambda: s.run(None, new)) for _ in range(20))
            print(f"  {name:12s} {first[0]:7.2f} {first[1]:7.2f} {first[2]:7.2f} {steady:7.2f}")
        print("  peregrine plans:", mine.plan_stats())

        path, weight_bytes = mlp_model(os.path.join(tmp, "mlp.onnx"))
        before = rss_mib()
        mlp = peregrine.InferenceSession(path, so)
        print(f"shape plans of an MLP with {weight_bytes / 2**20:.0f} MiB of weights "
              f"(resident MiB; a batch size seen twice compiles its plan):")
        print(f"  session loaded: +{rss_mib() - before:.0f}")
        for batch in (1, 2, 3, 4):
            x = {"x": rng.uniform(-1, 1, (batch, 1024)).astype(np.float32)}
            first = timed_ms(lambda: mlp.run(None, x))
            start = rss_mib()
            compiling = timed_ms(lambda: mlp.run(None, x))
            steady = statistics.median(timed_ms(lambda: mlp.run(None, x)) for _ in range(5))
            print(f"  batch {batch}: plan +{rss_mib() - start:.1f} MiB; ms: first run {first:.1f}, "
                  f"compiling run {compiling:.1f}, steady {steady:.2f}")
        print("  peregrine plans:", mlp.plan_stats())


if __name__ == "__main__":
    main()
