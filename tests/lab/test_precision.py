#!/usr/bin/env python3
"""--precision bf16 from the command line, on small zoo models.

  python3 tests/lab/test_precision.py [--peregrine build/bin/peregrine]

  * `peregrine run --precision bf16` agrees with fp32 on every output, and differs from it (bf16
    really ran: some output moves): mobilenetv2 at cosine >= 0.9999; trajectory_decoder at
    >= 0.999, its 60 outputs after four attention layers being more sensitive (bf16 measures
    0.99988 here; OpenVINO's bf16 0.9979 against ONNX Runtime fp32, bench/compare.py);
  * `peregrine inspect --kernels --precision bf16` names bf16 kernels, and `--keep-fp32 Conv`
    removes them from every Conv;
  * `peregrine compare-precision --per-layer` reports the output and lists one row per bf16 node;
  * errors exit 2 with a message: bf16 on the reference backend, an unknown --keep-fp32 name,
    --precision int8, compare-precision without a reduced precision.
On a CPU without AVX512_BF16 the bf16 runs must fail with exit 2 saying so; the script then
checks only that and the other errors. Plain script, exits non-zero on the first failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(REPO, "models", "zoo.py")


def call(peregrine, *args):
    return subprocess.run([peregrine, *args], capture_output=True, text=True)


def expect_error(peregrine, needle, *args):
    proc = call(peregrine, *args)
    assert proc.returncode == 2, f"{args}: exit {proc.returncode}, expected 2\n{proc.stderr}"
    assert needle in proc.stderr, f"{args}: '{needle}' not in: {proc.stderr}"


def outputs(peregrine, model, out_dir, *flags):
    proc = call(peregrine, "run", model, "--output-dir", out_dir, "--overwrite", *flags)
    assert proc.returncode == 0, proc.stderr
    return {f: np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peregrine", default=os.path.join(REPO, "build", "bin", "peregrine"))
    pg = parser.parse_args().peregrine
    with tempfile.TemporaryDirectory(prefix="pg-precision-") as tmp:
        subprocess.run([sys.executable, ZOO, "mobilenetv2", "trajectory_decoder", "--out-dir",
                        tmp], check=True, capture_output=True)
        mobilenet = os.path.join(tmp, "mobilenetv2.onnx")
        decoder = os.path.join(tmp, "trajectory_decoder.onnx")

        expect_error(pg, "reference backend", "run", mobilenet, "--precision", "bf16",
                     "--backend", "reference", "--output-dir", os.path.join(tmp, "x"))
        expect_error(pg, "not available yet", "run", mobilenet, "--precision", "int8")
        expect_error(pg, "give --precision", "compare-precision", mobilenet)
        probe = call(pg, "inspect", mobilenet, "--precision", "bf16")
        if probe.returncode != 0:
            assert probe.returncode == 2 and "not available here" in probe.stderr, probe.stderr
            print("test_precision: no AVX512_BF16 here; the error paths passed")
            return 0
        expect_error(pg, "names no node", "run", mobilenet, "--precision", "bf16",
                     "--keep-fp32", "NoSuchNode")

        for model, min_cosine in ((mobilenet, 0.9999), (decoder, 0.999)):
            ref = outputs(pg, model, os.path.join(tmp, "fp32"))
            got = outputs(pg, model, os.path.join(tmp, "bf16"), "--precision", "bf16")
            moved = False
            for name, want in ref.items():
                c = cosine(got[name], want)
                assert c >= min_cosine, f"{model} {name}: cosine {c}"
                moved |= not np.array_equal(got[name], want)
            assert moved, f"{model}: bf16 outputs equal fp32 bit for bit (bf16 did not run?)"

        kernels = call(pg, "inspect", mobilenet, "--kernels", "--precision", "bf16").stdout
        assert "bf16_gemm" in kernels, kernels
        kept = call(pg, "inspect", mobilenet, "--kernels", "--precision", "bf16", "--keep-fp32",
                    "Conv", "--keep-fp32", "peregrine.FusedConv").stdout
        assert "bf16_gemm" not in "\n".join(l for l in kept.splitlines() if "Conv" in l), kept

        report = call(pg, "compare-precision", decoder, "--precision", "bf16", "--per-layer",
                      "--top", "0")
        assert report.returncode == 0, report.stderr
        # bf16 kernels: the GEMM's and the fused attention's.
        bf16_nodes = sum("cpu/bf16_" in l for l in
                         call(pg, "inspect", decoder, "--kernels", "--precision",
                              "bf16").stdout.splitlines())
        lines = report.stdout.splitlines()
        start = next(i for i, l in enumerate(lines) if l.startswith("per layer:"))
        assert f"each of the {bf16_nodes} bf16 nodes" in lines[start], lines[start]
        assert len([l for l in lines[start + 2:] if l.strip()]) == bf16_nodes, report.stdout
    print("test_precision: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
