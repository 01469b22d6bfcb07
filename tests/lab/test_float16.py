#!/usr/bin/env python3
"""Models stored in float16 (bench/to_float16.py of zoo tiny and mobilenetv2):

  python3 tests/lab/test_float16.py [--peregrine build/bin/peregrine]

  * every node runs an optimized kernel, none the reference (inspect --kernels);
  * the output is float16 and within 2e-3 of max |ref| of an exact float32 evaluation of the
    float16 weights (ONNX Runtime on the float32 model carrying the float16-rounded weights):
    float16's own rounding of the output is 2^-11 relative, 4.9e-4.
Plain script, exits non-zero on the first failure; a few seconds.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
from to_float16 import to_float16  # noqa: E402

MAX_SCALED_ERR = 2e-3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peregrine", default=os.path.join(REPO, "build", "bin", "peregrine"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(REPO, "models", "zoo.py"), "tiny",
                        "mobilenetv2", "--out-dir", tmp], check=True, capture_output=True)
        for name in ("tiny", "mobilenetv2"):
            f32 = onnx.load(os.path.join(tmp, f"{name}.onnx"))
            half = to_float16(onnx.load(os.path.join(tmp, f"{name}.onnx")))
            half_path = os.path.join(tmp, f"{name}.fp16.onnx")
            onnx.save(half, half_path)
            rounded = {t.name: numpy_helper.to_array(t) for t in half.graph.initializer}
            for i, t in enumerate(f32.graph.initializer):
                if t.data_type == TensorProto.FLOAT:
                    f32.graph.initializer[i].CopyFrom(
                        numpy_helper.from_array(rounded[t.name].astype(np.float32), t.name))
            exact_path = os.path.join(tmp, f"{name}.exact.onnx")
            onnx.save(f32, exact_path)

            kernels = subprocess.run([args.peregrine, "inspect", half_path, "--kernels"],
                                     capture_output=True, text=True, check=True).stdout
            on_reference = [l for l in kernels.splitlines() if " reference" in l]
            assert not on_reference, f"{name}: nodes on the reference kernels:\n" + "\n".join(on_reference)

            inp = half.graph.input[0]
            shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
            x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float16)
            np.save(os.path.join(tmp, "x.npy"), x)
            out_dir = os.path.join(tmp, f"{name}_out")
            subprocess.run([args.peregrine, "run", half_path, "--input", f"{inp.name}={tmp}/x.npy",
                            "--output-dir", out_dir], check=True, capture_output=True)
            got = np.load(os.path.join(out_dir, sorted(os.listdir(out_dir))[0]))
            assert got.dtype == np.float16, f"{name}: output is {got.dtype}"
            so = ort.SessionOptions()
            so.log_severity_level = 3
            want = ort.InferenceSession(exact_path, so).run(None, {inp.name: x.astype(np.float32)})[0]
            err = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
            assert err <= MAX_SCALED_ERR, f"{name}: scaled error {err:.2e} > {MAX_SCALED_ERR}"
            print(f"ok  {name}.fp16: no reference kernels, scaled error {err:.2e} vs exact float32")


if __name__ == "__main__":
    main()
