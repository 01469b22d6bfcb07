#!/usr/bin/env python3
"""Peregrine against itself at two optimization levels, per model, in one run:

    python3 bench/opt_levels.py MODEL.onnx... [--levels 2,3] [--threads 1] [--iterations 8]

Each model is benched at each level twice in ABBA order (`peregrine bench --json`); the table
gives each level's median latency (ms) and the ratio of the second level to the first."""

import argparse
import json
import os
import statistics
import subprocess


def bench(peregrine, model, level, threads, iterations):
    out = subprocess.run([peregrine, "bench", model, f"-O{level}", "--threads", str(threads),
                          "--iterations", str(iterations), "--warmup-ms", "100", "--json",
                          "--no-record"], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{model} at -O{level}: {out.stderr.strip()}")
    return json.loads(out.stdout)["latency_ms"]["median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--levels", default="2,3")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--peregrine", default="build/bin/peregrine")
    args = ap.parse_args()
    a, b = args.levels.split(",")
    print(f"{'model':32s} {'-O' + a:>9s} {'-O' + b:>9s} {'ratio':>6s}")
    for model in args.models:
        times = {a: [], b: []}
        for level in (a, b, b, a):
            times[level].append(bench(args.peregrine, model, level, args.threads, args.iterations))
        ta, tb = statistics.median(times[a]), statistics.median(times[b])
        name = os.path.splitext(os.path.basename(model))[0]
        print(f"{name:32s} {ta:9.2f} {tb:9.2f} {tb / ta:6.2f}", flush=True)


if __name__ == "__main__":
    main()
