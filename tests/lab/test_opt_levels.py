#!/usr/bin/env python3
"""-O0 vs -O2 vs -O3 equivalence on small zoo models, and the `compile` round trip.

  python3 tests/lab/test_opt_levels.py [--peregrine build/bin/peregrine]

For each of tiny, mobilenetv2 and trajectory_decoder (random weights, fixed seed):
  * `peregrine run` at -O2 and -O3 agrees with -O0 on every output;
  * `peregrine compile -O2` writes a model that passes onnx.checker, loads again in Peregrine
    (at -O0, so nothing is re-optimized) and gives the -O2 outputs;
  * `peregrine inspect --json` of the compiled mobilenetv2 has no BatchNormalization left.

Tolerance (passes reorder float sums and fold BN into weights, so results are not bitwise):
  max |out - ref| <= 1e-4 * max(|ref|, 1e-6)  and  cosine(out, ref) >= 0.99999.
Plain script, exits non-zero on the first failure; about 10 s on 2 cores.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(REPO, "models", "zoo.py")
MODELS = ("tiny", "mobilenetv2", "trajectory_decoder")
REL_TOL = 1e-4
MIN_COSINE = 0.99999


def default_peregrine():
    return os.path.join(REPO, "build", "bin", "peregrine")


def run_peregrine(peregrine, *args):
    proc = subprocess.run([peregrine, *args], capture_output=True, text=True)
    assert proc.returncode == 0, f"peregrine {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


def run_outputs(peregrine, model, out_dir, *flags):
    """Runs MODEL once (seeded random inputs) and returns {file stem: array}."""
    run_peregrine(peregrine, "run", model, "--output-dir", out_dir, "--seed", "0", "--overwrite",
                  *flags)
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))
            if f.endswith(".npy")}


def check_agree(got, ref, what):
    assert sorted(got) == sorted(ref), (what, sorted(got), sorted(ref))
    for name, r in ref.items():
        g = got[name]
        assert g.shape == r.shape and g.dtype == r.dtype, (what, name, g.shape, r.shape, g.dtype)
        if r.size == 0 or not np.issubdtype(r.dtype, np.floating):
            assert np.array_equal(g, r), (what, name)
            continue
        g64, r64 = g.astype(np.float64).ravel(), r.astype(np.float64).ravel()
        assert np.isfinite(g64).all(), (what, name, "non-finite output")
        scale = max(np.abs(r64).max(), 1e-6)
        err = np.abs(g64 - r64).max()
        denom = np.linalg.norm(g64) * np.linalg.norm(r64)
        cosine = 1.0 if denom == 0 else float(g64 @ r64 / denom)
        assert err <= REL_TOL * scale, f"{what} {name}: max abs err {err:.3g} > {REL_TOL} * {scale:.3g}"
        assert cosine >= MIN_COSINE, f"{what} {name}: cosine {cosine:.8f} < {MIN_COSINE}"


def test_model(peregrine, tmp, name):
    model = os.path.join(tmp, name + ".onnx")
    ref = run_outputs(peregrine, model, os.path.join(tmp, name + "_o0"), "-O0")
    assert ref, f"{name}: no outputs"
    o2 = run_outputs(peregrine, model, os.path.join(tmp, name + "_o2"), "-O2")
    check_agree(o2, ref, f"{name} -O2 vs -O0")
    o3 = run_outputs(peregrine, model, os.path.join(tmp, name + "_o3"), "-O3")
    check_agree(o3, ref, f"{name} -O3 vs -O0")

    compiled = os.path.join(tmp, name + "_compiled.onnx")
    run_peregrine(peregrine, "compile", model, "-O2", "-o", compiled)
    onnx.checker.check_model(compiled)
    again = run_outputs(peregrine, compiled, os.path.join(tmp, name + "_reloaded"), "-O0")
    check_agree(again, o2, f"{name} compiled -O2 reloaded vs -O2")
    return json.loads(run_peregrine(peregrine, "inspect", compiled, "--json", "-O0"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peregrine", default=default_peregrine())
    args = parser.parse_args()
    peregrine = os.path.abspath(args.peregrine)
    with tempfile.TemporaryDirectory(prefix="pg-opt-levels-") as tmp:
        subprocess.run([sys.executable, ZOO, *MODELS, "--out-dir", tmp], check=True,
                       capture_output=True)
        for name in MODELS:
            info = test_model(peregrine, tmp, name)
            if name == "mobilenetv2":
                hist = info["op_histogram"]
                assert "BatchNormalization" not in hist, hist
                original = len(onnx.load(os.path.join(tmp, name + ".onnx")).graph.node)
                assert info["nodes"] < original, (info["nodes"], original)
    print("test_opt_levels: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
