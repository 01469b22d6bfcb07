"""Serving through Triton against calling the session directly, on the same machine.

For each model: throughput of Triton with Peregrine's backend under N concurrent gRPC clients
(each instance layout given, e.g. 1x2 = one instance of two threads), against one process
calling peregrine.InferenceSession in a loop with the same total threads; and the round-trip
latency of a one-node model (Relu of 16 floats), Triton's per-request overhead.

    python3 bench/triton_throughput.py ~/.cache/peregrine/real-models/resnet50.onnx... \
        --layouts 1x2,2x1 --concurrency 8 --requests 200

Runs inside the venv tools/triton/triton_env.py makes (once, ~/.cache/peregrine).
"""
import argparse
import concurrent.futures
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "triton"))
import triton_env  # noqa: E402

triton_env.reexec_in_venv()
sys.path.insert(0, str(ROOT / "build" / "python"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
from tritonclient.utils import np_to_triton_dtype  # noqa: E402

NP_TYPES = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64, TensorProto.INT32: np.int32}


def model_inputs(path):
    """One random value per graph input (static shapes only)."""
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    values = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if any(d <= 0 for d in dims):
            raise SystemExit(f"error: input {i.name} has a free dim; give a static model")
        values[i.name] = rng.standard_normal(dims).astype(NP_TYPES[i.type.tensor_type.elem_type])
    return values


def write_model_folder(repo, name, model_path, instances, threads):
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    os.symlink(os.path.abspath(model_path), folder / "1" / "model.onnx")
    for data in pathlib.Path(model_path).parent.glob(pathlib.Path(model_path).stem + "*.data"):
        os.symlink(os.path.abspath(data), folder / "1" / data.name)
    (folder / "config.pbtxt").write_text(
        'backend: "peregrine"\n'
        f'instance_group [{{ kind: KIND_CPU, count: {instances} }}]\n'
        f'parameters {{ key: "threads" value: {{ string_value: "{threads}" }} }}\n')


def grpc_inputs(values):
    out = []
    for name, v in values.items():
        i = grpcclient.InferInput(name, list(v.shape), np_to_triton_dtype(v.dtype))
        i.set_data_from_numpy(v)
        out.append(i)
    return out


def served_throughput(url, model, values, concurrency, requests):
    def worker(count):
        client = grpcclient.InferenceServerClient(url)
        inputs = grpc_inputs(values)
        for _ in range(count):
            client.infer(model, inputs)
        client.close()

    worker(2)  # warm-up: plans, packed weights, connections
    per = [requests // concurrency + (1 if i < requests % concurrency else 0)
           for i in range(concurrency)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(worker, per))
    return requests / (time.perf_counter() - start)


def direct_throughput(model_path, values, threads, requests):
    import peregrine
    opts = peregrine.SessionOptions()
    opts.intra_op_num_threads = threads
    session = peregrine.InferenceSession(str(model_path), opts)
    for _ in range(3):
        session.run(None, values)
    start = time.perf_counter()
    for _ in range(requests):
        session.run(None, values)
    return requests / (time.perf_counter() - start)


def one_node_latency(server, rounds):
    x = np.arange(16, dtype=np.float32).reshape(1, 16)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = grpc_inputs({"x": x})
    times = []
    for i in range(rounds + 20):
        t = time.perf_counter()
        client.infer("one_node", inputs)
        if i >= 20:
            times.append((time.perf_counter() - t) * 1e3)
    client.close()
    return statistics.median(times), sorted(times)[int(0.9 * len(times))]


def measure(args, model, layouts):
    values = model_inputs(model)
    totals = {instances * threads for instances, threads in layouts}
    direct = {t: [] for t in totals}
    served = {l: [] for l in layouts}
    with tempfile.TemporaryDirectory(prefix="peregrine-triton-bench-") as d:
        repo = pathlib.Path(d)
        for instances, threads in layouts:
            write_model_folder(repo, f"m_{instances}x{threads}", model, instances, threads)
        (repo / "one_node" / "1").mkdir(parents=True)
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one_node",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, str(repo / "one_node" / "1" / "model.onnx"))
        (repo / "one_node" / "config.pbtxt").write_text('backend: "peregrine"\n')
        with triton_env.Server(repo, log_path=repo / "server.log") as server:
            for _ in range(args.rounds):
                for total in sorted(totals):
                    direct[total].append(direct_throughput(model, values, total, args.requests))
                for layout in layouts:
                    served[layout].append(served_throughput(
                        server.grpc_url, f"m_{layout[0]}x{layout[1]}", values, args.concurrency,
                        args.requests))
            p50, p90 = one_node_latency(server, 500)
    name = pathlib.Path(model).stem
    print(f"{name}: runs per second, median of {args.rounds} interleaved rounds of "
          f"{args.requests} requests")
    for total in sorted(totals):
        print(f"  session in a loop, {total} thread(s): {statistics.median(direct[total]):.1f}")
    for (instances, threads), v in served.items():
        base = statistics.median(direct[instances * threads])
        print(f"  Triton, {instances} instance(s) x {threads} thread(s), concurrency "
              f"{args.concurrency}: {statistics.median(v):.1f} ({statistics.median(v) / base:.2f}x)")
    print(f"  one-node model through Triton (gRPC round trip, 500 requests): p50 {p50:.3f} ms, "
          f"p90 {p90:.3f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--layouts", default="1x2,2x1",
                    help="instances x threads per instance, comma-separated (default 1x2,2x1)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    args = ap.parse_args()
    layouts = [tuple(int(v) for v in l.split("x")) for l in args.layouts.split(",")]
    for model in args.models:
        measure(args, model, layouts)


if __name__ == "__main__":
    main()
