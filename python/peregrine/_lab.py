"""The performance lab from Python: profile a model, compare it with ONNX Runtime."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from typing import Any, Dict, Optional

import numpy as np

from ._session import InferenceSession, SessionOptions

_NUMPY_DTYPE = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32,
    "tensor(int64)": np.int64, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def random_inputs(session: Any, seed: int = 0, dims: Optional[Dict[str, int]] = None
                  ) -> Dict[str, np.ndarray]:
    """Seeded inputs for every graph input of a session (Peregrine's or ONNX Runtime's):
    floats in [-1, 1), integers in [0, 4), symbolic dims from `dims` (by name) or 1."""
    rng = np.random.default_rng(seed)
    feed = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else (dims or {}).get(d, 1) for d in arg.shape]
        dtype = _NUMPY_DTYPE.get(arg.type)
        if dtype is None:
            raise ValueError(f"input '{arg.name}': no random data for type {arg.type}")
        if np.issubdtype(dtype, np.floating):
            feed[arg.name] = rng.uniform(-1, 1, shape).astype(dtype)
        elif dtype is np.bool_:
            feed[arg.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            feed[arg.name] = rng.integers(0, 4, shape).astype(dtype)
    return feed


def profile(model: str, iterations: int = 10, warmup: int = 2, threads: int = 1,
            inputs: Optional[Dict[str, np.ndarray]] = None, trace_path: Optional[str] = None,
            options: Optional[SessionOptions] = None) -> Dict[str, Any]:
    """Runs `model` `iterations` times with profiling on. Returns the latency (median, min,
    max in ms), per node (name, op type, kernel, median us) slowest first, per op type its
    total share, and the Chrome trace's path (a temporary file unless `trace_path`)."""
    opts = options or SessionOptions()
    opts.intra_op_num_threads = threads
    opts.enable_profiling = True
    session = InferenceSession(model, opts)
    feed = inputs if inputs is not None else random_inputs(session)
    for _ in range(warmup):
        session.run(None, feed)
    session._start_profiling()  # starts a fresh trace: the warm-up runs are dropped
    latencies = []
    for _ in range(iterations):
        start = time.perf_counter()
        session.run(None, feed)
        latencies.append((time.perf_counter() - start) * 1e3)
    if trace_path is None:
        fd, trace_path = tempfile.mkstemp(prefix="peregrine_profile_", suffix=".json")
        os.close(fd)
        os.unlink(trace_path)
    session._impl.end_profiling(trace_path)
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    per_node: Dict[str, Dict[str, Any]] = {}
    for e in events:
        if e.get("cat") != "node":
            continue
        n = per_node.setdefault(e["name"], {"node": e["name"], "op_type": e["args"]["op_type"],
                                            "kernel": e["args"]["kernel"], "samples": []})
        n["samples"].append(e["dur"])
    nodes = []
    for n in per_node.values():
        n["median_us"] = statistics.median(n.pop("samples"))
        nodes.append(n)
    nodes.sort(key=lambda n: -n["median_us"])
    total = sum(n["median_us"] for n in nodes) or 1.0
    ops: Dict[str, float] = {}
    for n in nodes:
        ops[n["op_type"]] = ops.get(n["op_type"], 0.0) + n["median_us"]
    return {
        "latency_ms": {"median": statistics.median(latencies), "min": min(latencies),
                       "max": max(latencies)},
        "nodes": nodes,
        "op_share": {k: v / total for k, v in sorted(ops.items(), key=lambda kv: -kv[1])},
        "trace": trace_path,
    }


def compare(model: str, inputs: Optional[Dict[str, np.ndarray]] = None, threads: int = 1,
            iterations: int = 10) -> Dict[str, Any]:
    """Peregrine against ONNX Runtime (if installed) on the same inputs: per output cosine
    similarity, max absolute and relative error; median latency of each engine in ms."""
    import onnxruntime  # the peer; not a dependency of the package itself

    opts = SessionOptions()
    opts.intra_op_num_threads = threads
    mine = InferenceSession(model, opts)
    ort_opts = onnxruntime.SessionOptions()
    ort_opts.intra_op_num_threads = threads
    theirs = onnxruntime.InferenceSession(model, ort_opts, providers=["CPUExecutionProvider"])
    feed = inputs if inputs is not None else random_inputs(mine)

    def median_ms(sess: Any) -> float:
        sess.run(None, feed)
        times = []
        for _ in range(iterations):
            start = time.perf_counter()
            sess.run(None, feed)
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    a, b = mine.run(None, feed), theirs.run(None, feed)
    outputs = {}
    for arg, x, y in zip(mine.get_outputs(), a, b):
        x64, y64 = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
        denom = np.linalg.norm(x64) * np.linalg.norm(y64)
        diff = np.abs(x64 - y64)
        outputs[arg.name] = {
            "cosine": float(x64 @ y64 / denom) if denom > 0 else float(np.array_equal(x64, y64)),
            "max_abs_error": float(diff.max()) if diff.size else 0.0,
            "max_rel_error": float((diff / np.maximum(np.abs(y64), 1e-6)).max()) if diff.size
            else 0.0,
        }
    return {"outputs": outputs, "peregrine_ms": median_ms(mine),
            "onnxruntime_ms": median_ms(theirs)}
