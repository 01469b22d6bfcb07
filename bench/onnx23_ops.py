"""The fused ops of opsets 23+ one at a time, at shapes of a small decoder: Peregrine on its CPU
kernels (-O2), Peregrine on the reference kernels (-O0 --backend reference, what these ops ran on
before they were mapped), and ONNX Runtime, interleaved; outputs compared with ONNX Runtime's.

  python3 bench/onnx23_ops.py --peregrine build/bin/peregrine [--rounds 3] [--threads 1]
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
from onnx import TensorProto, helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, F, None) for n in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    return m


def cases(seq, heads, kv_heads, head, cache):
    hidden = heads * head
    yield "Attention, GQA causal prefill", model(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=heads, kv_num_heads=kv_heads,
                          is_causal=1)],
        [("q", F, [1, seq, hidden]), ("k", F, [1, seq, kv_heads * head]), ("v", F, [1, seq, kv_heads * head])],
        ["y"])
    yield "Attention, GQA decode over a KV cache", model(
        [helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "present_k", "present_v"])],
        [("q", F, [1, heads, 1, head]), ("k", F, [1, kv_heads, 1, head]), ("v", F, [1, kv_heads, 1, head]),
         ("pk", F, [1, kv_heads, cache, head]), ("pv", F, [1, kv_heads, cache, head])],
        ["y", "present_k", "present_v"])
    yield "RotaryEmbedding, position ids", model(
        [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "ids"], ["y"], num_heads=heads)],
        [("x", F, [1, seq, hidden]), ("cos", F, [cache, head // 2]), ("sin", F, [cache, head // 2]),
         ("ids", TensorProto.INT64, [1, seq])],
        ["y"])
    yield "RMSNormalization", model(
        [helper.make_node("RMSNormalization", ["x", "g"], ["y"], axis=-1)],
        [("x", F, [1, seq, hidden]), ("g", F, [hidden])],
        ["y"])


def feeds(m, rng, cache):
    out = {}
    for i in m.graph.input:
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if i.type.tensor_type.elem_type == TensorProto.INT64:
            out[i.name] = rng.integers(0, cache, size=dims).astype(np.int64)
        else:
            out[i.name] = rng.standard_normal(dims).astype(np.float32)
    return out


def peregrine_ms(peregrine, path, opt, backend, threads, seconds, input_args):
    out = subprocess.run([peregrine, "bench", path, f"-O{opt}", "--backend", backend, "--threads", str(threads), "--duration-s",
                          str(seconds), "--json", "--no-record"] + input_args,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peregrine", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--cache", type=int, default=1024)
    a = ap.parse_args()
    import onnxruntime as ort
    rng = np.random.default_rng(0)
    print(f"{a.threads} thread(s); seq {a.seq}, 8 query heads, 2 KV heads, head size 64, cache {a.cache}")
    print(f"{'op':42} {'Peregrine ms':>13} {'reference ms':>13} {'ORT ms':>9} {'/ ORT':>7} {'max err':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in cases(a.seq, 8, 2, 64, a.cache):
            path = os.path.join(tmp, "m.onnx")
            with open(path, "wb") as f:
                f.write(m.SerializeToString())
            x = feeds(m, rng, a.cache)
            args = []
            for k, v in x.items():
                np.save(os.path.join(tmp, k + ".npy"), v)
                args += ["--input", f"{k}={os.path.join(tmp, k + '.npy')}"]
            out_dir = os.path.join(tmp, "out")
            subprocess.run([a.peregrine, "run", path, "--output-dir", out_dir, "--overwrite"] + args,
                           capture_output=True, text=True, check=True)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = a.threads
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            ref = sess.run(None, x)
            err = max(float(np.max(np.abs(np.load(os.path.join(out_dir, o.name + ".npy")) - r)))
                      for o, r in zip(m.graph.output, ref))
            times = {"fast": [], "ref": [], "ort": []}
            for _ in range(a.rounds):
                times["fast"].append(peregrine_ms(a.peregrine, path, 2, "cpu", a.threads, a.seconds, args))
                times["ref"].append(peregrine_ms(a.peregrine, path, 0, "reference", a.threads, a.seconds, args))
                t = []
                end = time.perf_counter() + a.seconds
                while time.perf_counter() < end or len(t) < 3:
                    s = time.perf_counter()
                    sess.run(None, x)
                    t.append((time.perf_counter() - s) * 1e3)
                times["ort"].append(statistics.median(t))
            fast, ref_ms, ort_ms = (statistics.median(times[k]) for k in ("fast", "ref", "ort"))
            print(f"{name:42} {fast:13.3f} {ref_ms:13.3f} {ort_ms:9.3f} {fast / ort_ms:6.2f}x {err:9.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
