"""make serve-demo: the demo model served by Triton Inference Server through Peregrine's backend.

Builds a model repository in build/serve-demo/ (a folder the demo owns) holding the bundled
ResNet-50 and a one-line config.pbtxt, starts Triton on free loopback ports, shows the model's
metadata as Triton completed it, sends one request with tritonclient and checks the answer
against `peregrine run`, then stops the server.
"""
import json
import pathlib
import shutil
import subprocess
import sys
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "triton"))
import triton_env  # noqa: E402

triton_env.reexec_in_venv()

import numpy as np  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402


def main():
    peregrine = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "bin" / "peregrine")
    model = ROOT / "build" / "demo" / "resnet50.onnx"
    if not model.exists():
        subprocess.run([sys.executable, str(ROOT / "models" / "zoo.py"), "resnet50", "--out-dir",
                        str(model.parent)], check=True)
    out = ROOT / "build" / "serve-demo"
    shutil.rmtree(out, ignore_errors=True)
    folder = out / "models" / "resnet50"
    (folder / "1").mkdir(parents=True)
    shutil.copy(model, folder / "1" / "model.onnx")
    (folder / "config.pbtxt").write_text(
        'backend: "peregrine"\n'
        'parameters { key: "threads" value: { string_value: "2" } }\n')
    print(f"== model repository: {out / 'models'}")
    print((folder / "config.pbtxt").read_text())

    with triton_env.Server(out / "models", log_path=out / "server.log") as server:
        print(f"== Triton {server.http_url} (HTTP), {server.grpc_url} (gRPC); log {out / 'server.log'}")
        with urllib.request.urlopen(f"http://{server.http_url}/v2/models/resnet50") as r:
            print("GET /v2/models/resnet50:", json.dumps(json.loads(r.read())))
        client = httpclient.InferenceServerClient(server.http_url)
        meta = client.get_model_metadata("resnet50")
        inp, outp = meta["inputs"][0], meta["outputs"][0]
        x = np.random.default_rng(0).standard_normal(inp["shape"]).astype(np.float32)
        request = httpclient.InferInput(inp["name"], inp["shape"], inp["datatype"])
        request.set_data_from_numpy(x)
        y = client.infer("resnet50", [request]).as_numpy(outp["name"])
        print(f"== one request: {outp['name']} {list(y.shape)}, top-5 classes "
              f"{np.argsort(y.ravel())[::-1][:5].tolist()}")

        np.save(out / "x.npy", x)
        subprocess.run([peregrine, "run", str(model), "--input", f"{inp['name']}={out / 'x.npy'}",
                        "--output-dir", str(out / "direct"), "--threads", "2"], check=True,
                       stdout=subprocess.DEVNULL)
        want = np.load(out / "direct" / f"{outp['name']}.npy")
        diff = float(np.abs(y - want).max())
        print(f"== max |Triton - peregrine run| = {diff:.3g}")
        stats = client.get_inference_statistics("resnet50")["model_stats"][0]["inference_stats"]
        print(f"== server statistics: {stats['success']['count']} success, compute "
              f"{stats['compute_infer']['ns'] / 1e6:.2f} ms (the first run packs the weights)")
        if diff > 1e-4:
            raise SystemExit("error: the served result differs from peregrine run")


if __name__ == "__main__":
    main()
