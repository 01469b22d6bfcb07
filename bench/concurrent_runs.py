"""Throughput of one Peregrine session called from several Python threads at once, against one
caller: python3 bench/concurrent_runs.py MODEL.onnx... [--callers N] [--runs K] [--threads T]

Each caller runs the same seeded inputs K times on the one session (intra-op threads T, default
1); the ratio is (N callers' runs per second) / (one caller's). Needs the Python package: run
from a checkout after `make` (it imports build/python) or with peregrine installed.
"""
import argparse
import os
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
import peregrine  # noqa: E402


def feeds_for(session, rng):
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
        elif "bool" in i.type:
            feeds[i.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[i.name] = rng.integers(0, 10, shape).astype(np.int64)
    return feeds


def runs_per_second(session, feeds, callers, runs):
    def work():
        for _ in range(runs):
            session.run(None, feeds)
    threads = [threading.Thread(target=work) for _ in range(callers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return callers * runs / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--callers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20, help="runs per caller")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads of the session")
    args = ap.parse_args()
    print(f"{'model':<28} {'1 caller/s':>11} {f'{args.callers} callers/s':>12} {'ratio':>6}")
    for path in args.models:
        options = peregrine.SessionOptions()
        options.intra_op_num_threads = args.threads
        session = peregrine.InferenceSession(path, options)
        feeds = feeds_for(session, np.random.default_rng(0))
        for _ in range(args.callers + 1):  # warm up, and make the replicas
            session.run(None, feeds)
        runs_per_second(session, feeds, args.callers, 1)
        one = runs_per_second(session, feeds, 1, args.runs)
        many = runs_per_second(session, feeds, args.callers, args.runs)
        print(f"{os.path.basename(path):<28} {one:>11.1f} {many:>12.1f} {many / one:>6.2f}")


if __name__ == "__main__":
    main()
