"""Peregrine's Triton backend under a real Triton Inference Server on loopback, driven by the
clients users have (tritonclient's HTTP and gRPC clients, curl):

- model metadata and completed configs from a folder holding model.onnx and `backend`;
- inference results equal to `peregrine run` on the same inputs, over HTTP, gRPC and curl;
- a load test: concurrent requests, every response checked, none lost, batches formed;
- bad requests and bad models get the protocol's errors and the server keeps serving.

    python3 tests/serving/test_triton.py [--peregrine build/bin/peregrine]

Runs itself inside the venv tools/triton/triton_env.py makes (once, ~/.cache/peregrine).
"""
import argparse
import concurrent.futures
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "triton"))
import triton_env  # noqa: E402

triton_env.reexec_in_venv()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def conv_net(path, batch_dim):
    """Conv 3->8 3x3 + Relu + global pool + flatten on [batch, 3, 16, 16]."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "B")
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch_dim, 8])], [w, b])
    write_model(path, graph)


def one_node(path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "one_node",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    write_model(path, graph)


def two_outputs(path):
    """Static [2, 3] -> Relu and Neg: requests may ask for either output alone."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["relu"]), helper.make_node("Neg", ["x"], ["neg"])],
        "two_outputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("relu", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("neg", TensorProto.FLOAT, [2, 3])])
    write_model(path, graph)


def write_model(path, graph):
    path.parent.mkdir(parents=True, exist_ok=True)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def make_repository(repo):
    # Only the backend named: inputs, outputs and batching come from the model.
    conv_net(repo / "conv" / "1" / "model.onnx", "N")
    (repo / "conv" / "config.pbtxt").write_text('backend: "peregrine"\n')
    # Batching with a queue delay, so that concurrent requests are joined.
    conv_net(repo / "conv_batched" / "1" / "model.onnx", "N")
    (repo / "conv_batched" / "config.pbtxt").write_text(
        'backend: "peregrine"\nmax_batch_size: 8\n'
        'dynamic_batching { max_queue_delay_microseconds: 20000 }\n'
        'instance_group [{ kind: KIND_CPU, count: 2 }]\n'
        'parameters { key: "threads" value: { string_value: "1" } }\n')
    one_node(repo / "one_node" / "1" / "model.onnx")
    (repo / "one_node" / "config.pbtxt").write_text('backend: "peregrine"\n')
    two_outputs(repo / "two_outputs" / "1" / "model.onnx")
    (repo / "two_outputs" / "config.pbtxt").write_text('backend: "peregrine"\n')
    # Models that must fail to load, each with the message a user needs.
    one_node(repo / "bad_parameter" / "1" / "model.onnx")
    (repo / "bad_parameter" / "config.pbtxt").write_text(
        'backend: "peregrine"\nparameters { key: "threads" value: { string_value: "zero" } }\n')
    one_node(repo / "bad_dims" / "1" / "model.onnx")
    (repo / "bad_dims" / "config.pbtxt").write_text(
        'backend: "peregrine"\ninput [{ name: "x", data_type: TYPE_FP32, dims: [1, 17] }]\n'
        'output [{ name: "y", data_type: TYPE_FP32, dims: [1, 16] }]\n')
    (repo / "bad_file" / "1").mkdir(parents=True)
    (repo / "bad_file" / "1" / "model.onnx").write_bytes(b"not a protobuf \xff\xff\xff")
    (repo / "bad_file" / "config.pbtxt").write_text('backend: "peregrine"\n')


def peregrine_run(peregrine, model, x, tmp):
    """Outputs of `peregrine run` on input x (the reference a served result must equal)."""
    tmp.mkdir(parents=True, exist_ok=True)
    np.save(tmp / "x.npy", x)
    out = tmp / "out"
    subprocess.run([peregrine, "run", str(model), "--input", f"x={tmp / 'x.npy'}", "--output-dir",
                    str(out), "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    return np.load(out / "y.npy")


def http_infer(client, model, x, dtype="FP32", name="x"):
    inp = httpclient.InferInput(name, list(x.shape), dtype)
    inp.set_data_from_numpy(x)
    return client.infer(model, [inp]).as_numpy("y")


def grpc_infer(client, model, x):
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return client.infer(model, [inp]).as_numpy("y")


def curl_json(url, body=None):
    cmd = ["curl", "-s", "-w", "\n%{http_code}", url]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", body]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    text, code = out.rsplit("\n", 1)
    return int(code), text


def test_metadata(http, grpc):
    meta = http.get_model_metadata("conv")
    check(meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3, 16, 16]}] and
          meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 8]}],
          f"HTTP metadata of a model folder with only model.onnx: {meta['inputs']} {meta['outputs']}")
    config = http.get_model_config("conv")
    check(config["max_batch_size"] > 0 and "dynamic_batching" in config,
          f"config completed with batching (max_batch_size {config['max_batch_size']})")
    gmeta = grpc.get_model_metadata("conv", as_json=True)
    check([i["name"] for i in gmeta["inputs"]] == ["x"] and gmeta["inputs"][0]["datatype"] == "FP32",
          "gRPC metadata")
    one = http.get_model_metadata("one_node")
    check(one["inputs"][0]["shape"] == [1, 16], "a fixed-shape model stays unbatched: shape [1, 16]")


def test_results(http, grpc, url, peregrine, repo, tmp):
    x = np.random.default_rng(1).standard_normal((3, 3, 16, 16)).astype(np.float32)
    want = peregrine_run(peregrine, repo / "conv" / "1" / "model.onnx", x, tmp / "ref")
    got_http = http_infer(http, "conv", x)
    got_grpc = grpc_infer(grpc, "conv", x)
    check(np.allclose(got_http, want, rtol=1e-5, atol=1e-6), "HTTP result equals peregrine run")
    check(np.allclose(got_grpc, want, rtol=1e-5, atol=1e-6), "gRPC result equals peregrine run")
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 16, 16], "datatype": "FP32",
                                   "data": x[:1].ravel().tolist()}]})
    code, text = curl_json(f"http://{url}/v2/models/conv/infer", body)
    ok = code == 200
    if ok:
        out = json.loads(text)["outputs"][0]
        ok = out["shape"] == [1, 8] and np.allclose(np.array(out["data"], np.float32), want[0],
                                                    rtol=1e-5, atol=1e-6)
    check(ok, f"curl on the REST API: HTTP {code}, result equals peregrine run")
    z = np.array([[-1, 2, -3, 4] * 4], np.float32)
    check(np.array_equal(http_infer(http, "one_node", z), np.maximum(z, 0)), "one-node model")
    # Static shapes: the session writes into the response's buffers, asked-for outputs only.
    v = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    for asked in (["neg"], ["relu"], ["relu", "neg"]):
        inp = httpclient.InferInput("x", [2, 3], "FP32")
        inp.set_data_from_numpy(v)
        result = http.infer("two_outputs", [inp],
                            outputs=[httpclient.InferRequestedOutput(n) for n in asked])
        got = {n: result.as_numpy(n) for n in ("relu", "neg")}
        ok = all(np.array_equal(got[n], np.maximum(v, 0) if n == "relu" else -v) for n in asked)
        ok = ok and all(got[n] is None for n in ("relu", "neg") if n not in asked)
        check(ok, f"static model, outputs {asked} asked: exactly those, correct")


def test_load(http, url, peregrine, repo, tmp, requests=64, concurrency=8):
    xs = np.random.default_rng(2).standard_normal((requests, 3, 16, 16)).astype(np.float32)
    want = peregrine_run(peregrine, repo / "conv_batched" / "1" / "model.onnx", xs, tmp / "load")
    before = http.get_inference_statistics("conv_batched")["model_stats"][0]

    def one(i):
        client = httpclient.InferenceServerClient(url)
        try:
            return i, http_infer(client, "conv_batched", xs[i:i + 1])
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, range(requests)))
    correct = sum(np.allclose(y[0], want[i], rtol=1e-5, atol=1e-6) for i, y in results)
    check(len(results) == requests and correct == requests,
          f"load test: {requests} requests at concurrency {concurrency}, {correct} correct")
    after = http.get_inference_statistics("conv_batched")["model_stats"][0]
    inferences = int(after["inference_count"]) - int(before["inference_count"])
    executions = int(after["execution_count"]) - int(before["execution_count"])
    check(inferences == requests and executions < requests,
          f"batches formed: {inferences} inferences in {executions} executions")
    sizes = {b["batch_size"] for b in after["batch_stats"]}
    check(max(sizes) > 1, f"batch sizes run: {sorted(sizes)}")
    code, text = curl_json(f"http://127.0.0.1:{SERVER.metrics_port}/metrics")
    check(code == 200 and 'nv_inference_compute_infer_duration_us{model="conv_batched"' in text,
          "the metrics endpoint shows compute time per model")


def expect_error(what, fn, needle):
    try:
        fn()
    except InferenceServerException as e:
        check(needle in str(e), f"{what}: error '{str(e)[:150]}'")
        return
    check(False, f"{what}: no error")


def test_bad_requests(http, grpc, url):
    x = np.zeros((1, 3, 16, 16), np.float32)
    expect_error("wrong input name", lambda: http_infer(http, "conv", x, name="image"), "image")
    expect_error("wrong dtype", lambda: http_infer(http, "conv", x.astype(np.float64), "FP64"),
                 "FP64")
    expect_error("wrong shape", lambda: http_infer(http, "conv", np.zeros((1, 3, 15, 16), np.float32)),
                 "15")
    expect_error("batch over max_batch_size",
                 lambda: http_infer(http, "conv_batched", np.zeros((9, 3, 16, 16), np.float32)), "<= 8")
    expect_error("unknown model", lambda: http_infer(http, "nope", x), "nope")
    expect_error("unknown output", lambda: http.infer(
        "two_outputs", [httpclient.InferInput("x", [2, 3], "FP32").set_data_from_numpy(
            np.zeros((2, 3), np.float32))], outputs=[httpclient.InferRequestedOutput("abs")]),
        "abs")
    expect_error("gRPC wrong shape", lambda: grpc_infer(grpc, "conv", np.zeros((1, 3, 16), np.float32)),
                 "shape")
    for what, body in [("malformed JSON body", "{not json"),
                       ("too little data for the shape",
                        json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 16, 16],
                                                "datatype": "FP32", "data": [1.0]}]}))]:
        code, text = curl_json(f"http://{url}/v2/models/conv/infer", body)
        try:
            error = json.loads(text).get("error", "")
        except ValueError:
            error = ""
        check(code >= 400 and error, f"{what}: HTTP {code}, error '{error[:100]}'")
    for model, needle in [("bad_parameter", "parameter threads = 'zero'"),
                          ("bad_dims", "has dims [1,17] but the model's are [1,16]"),
                          ("bad_file", "model.onnx")]:
        expect_error(f"model {model} fails to load", lambda m=model: http.load_model(m), needle)
    y = http_infer(http, "conv", x)
    check(y.shape == (1, 8) and http.is_server_live(), "the server still serves after all that")


SERVER = None


def main():
    global SERVER
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peregrine", default=str(ROOT / "build" / "bin" / "peregrine"))
    ap.add_argument("--backend-dir", default=str(ROOT / "build" / "triton"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="peregrine-triton-") as d:
        tmp = pathlib.Path(d)
        repo = tmp / "models"
        make_repository(repo)
        with triton_env.Server(repo, args.backend_dir, models=["conv", "conv_batched", "one_node", "two_outputs"],
                               log_path=tmp / "server.log") as server:
            SERVER = server
            http = httpclient.InferenceServerClient(server.http_url)
            grpc = grpcclient.InferenceServerClient(server.grpc_url)
            try:
                test_metadata(http, grpc)
                test_results(http, grpc, server.http_url, args.peregrine, repo, tmp)
                test_load(http, server.http_url, args.peregrine, repo, tmp)
                test_bad_requests(http, grpc, server.http_url)
            finally:
                alive = server.proc.poll() is None
                check(alive, "the server process is alive at the end")
                if FAILURES:
                    print((tmp / "server.log").read_text()[-4000:])
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all Triton backend checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
