"""One pre-norm transformer block written two ways: with opset 23's fused ops (RMSNormalization,
Attention) and decomposed into the ops exporters emitted before them (Pow / ReduceMean / Sqrt /
Reciprocal for the norm, Reshape / Transpose / MatMul / Softmax for attention). Times both with
`peregrine bench` (and ONNX Runtime where it loads them), interleaved, and checks that the two
forms agree.

  python3 bench/onnx23_block.py --peregrine build/bin/peregrine [--seq 128] [--hidden 512]
      [--heads 8] [--rounds 3] [--threads 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 23)]


def weights(rng, hidden, mlp):
    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)
    inits = [w(n, hidden, hidden) for n in ("wq", "wk", "wv", "wo")]
    inits += [w("w_up", hidden, mlp), w("w_down", mlp, hidden)]
    inits += [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32), g)
              for g in ("g1", "g2")]
    return inits


def rms_fused(x, gamma, out):
    return [helper.make_node("RMSNormalization", [x, gamma], [out], axis=-1, epsilon=1e-6)]


def rms_decomposed(x, gamma, out):
    p = out + "_"
    return [
        helper.make_node("Mul", [x, x], [p + "sq"]),
        helper.make_node("ReduceMean", [p + "sq", "axes_last"], [p + "ms"], keepdims=1),
        helper.make_node("Add", [p + "ms", "eps"], [p + "mse"]),
        helper.make_node("Sqrt", [p + "mse"], [p + "rms"]),
        helper.make_node("Reciprocal", [p + "rms"], [p + "inv"]),
        helper.make_node("Mul", [x, p + "inv"], [p + "n"]),
        helper.make_node("Mul", [p + "n", gamma], [out]),
    ]


def attention_fused(q, k, v, out, heads):
    return [helper.make_node("Attention", [q, k, v], [out], q_num_heads=heads, kv_num_heads=heads)]


def attention_decomposed(q, k, v, out, heads, seq, hidden):
    head = hidden // heads
    return [
        helper.make_node("Reshape", [q, "heads_shape"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", [k, "heads_shape"], ["k4"]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", [v, "heads_shape"], ["v4"]),
        helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "vh"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merged_shape"], [out]),
    ], [
        numpy_helper.from_array(np.array([1, seq, heads, head], np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([1, seq, hidden], np.int64), "merged_shape"),
        numpy_helper.from_array(np.array(np.sqrt(head), np.float32), "sqrt_d"),
    ]


def block(fused, seq, hidden, heads, mlp):
    rng = np.random.default_rng(0)
    inits = weights(rng, hidden, mlp)
    nodes = []
    rms = rms_fused if fused else rms_decomposed
    if not fused:
        inits += [numpy_helper.from_array(np.array([-1], np.int64), "axes_last"),
                  numpy_helper.from_array(np.array(1e-6, np.float32), "eps")]
    nodes += rms("x", "g1", "n1")
    nodes += [helper.make_node("MatMul", ["n1", w], [o]) for w, o in (("wq", "q"), ("wk", "k"), ("wv", "v"))]
    if fused:
        nodes += attention_fused("q", "k", "v", "att", heads)
    else:
        att_nodes, att_inits = attention_decomposed("q", "k", "v", "att", heads, seq, hidden)
        nodes += att_nodes
        inits += att_inits
    nodes += [helper.make_node("MatMul", ["att", "wo"], ["proj"]), helper.make_node("Add", ["x", "proj"], ["h"])]
    nodes += rms("h", "g2", "n2")
    nodes += [helper.make_node("MatMul", ["n2", "w_up"], ["up"]), helper.make_node("Relu", ["up"], ["act"]),
              helper.make_node("MatMul", ["act", "w_down"], ["down"]), helper.make_node("Add", ["h", "down"], ["y"])]
    graph = helper.make_graph(nodes, "block_fused" if fused else "block_decomposed",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], inits)
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 10
    return model


def peregrine_ms(peregrine, path, threads, seconds):
    out = subprocess.run([peregrine, "bench", path, "--threads", str(threads), "--duration-s", str(seconds),
                          "--json", "--no-record"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["latency_ms"]["median"]


def peregrine_output(peregrine, path, x_path, out_dir):
    subprocess.run([peregrine, "run", path, "--input", f"x={x_path}", "--output-dir", out_dir, "--overwrite"],
                   capture_output=True, text=True, check=True)
    return np.load(os.path.join(out_dir, "y.npy"))


def ort_ms(path, threads, seconds, x):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    try:
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    except Exception:  # an ORT without these opset-23 kernels
        return None
    for _ in range(5):
        sess.run(None, {"x": x})
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        t = time.perf_counter()
        sess.run(None, {"x": x})
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peregrine", required=True)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for fused in (True, False):
            name = "fused" if fused else "decomposed"
            paths[name] = os.path.join(tmp, name + ".onnx")
            with open(paths[name], "wb") as f:
                f.write(block(fused, a.seq, a.hidden, a.heads, 4 * a.hidden).SerializeToString())
        x = np.random.default_rng(1).standard_normal((1, a.seq, a.hidden)).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        outs = {n: peregrine_output(a.peregrine, p, os.path.join(tmp, "x.npy"), os.path.join(tmp, "out_" + n))
                for n, p in paths.items()}
        diff = float(np.max(np.abs(outs["fused"] - outs["decomposed"])) / np.max(np.abs(outs["decomposed"])))
        times = {(engine, n): [] for engine in ("peregrine", "ort") for n in paths}
        for _ in range(a.rounds):
            for n, p in paths.items():
                times[("peregrine", n)].append(peregrine_ms(a.peregrine, p, a.threads, a.seconds))
                ms = ort_ms(p, a.threads, a.seconds, x)
                if ms is not None:
                    times[("ort", n)].append(ms)
    print(f"block: seq {a.seq}, hidden {a.hidden}, heads {a.heads}, MLP {4 * a.hidden}, {a.threads} thread(s); "
          f"fused vs decomposed outputs: max relative difference {diff:.2e}")
    print(f"{'engine':10} {'fused ms':>10} {'decomposed ms':>14} {'fused / decomposed':>19}")
    for engine in ("peregrine", "ort"):
        f, d = times[(engine, "fused")], times[(engine, "decomposed")]
        if not f or not d:
            print(f"{engine:10} {'n/a':>10} {'n/a':>14}")
            continue
        mf, md = statistics.median(f), statistics.median(d)
        print(f"{engine:10} {mf:10.3f} {md:14.3f} {mf / md:18.2f}x")
    return 0 if diff < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
