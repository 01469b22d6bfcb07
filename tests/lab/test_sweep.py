#!/usr/bin/env python3
"""Tests of `peregrine sweep` on a local Ray head (127.0.0.1) and of moving runs between stores
(`peregrine runs --export / --import`, `--group-by machine`). Plain script; exits non-zero on
failure.

  python3 tests/lab/test_sweep.py [--peregrine build/bin/peregrine]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_op_model(path, op):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], op.lower(),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4096])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def run(cmd, expect=0):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == expect, (f"{' '.join(cmd)} exited {proc.returncode}, not {expect}:\n"
                                       f"{proc.stdout}\n{proc.stderr}")
    return proc


def test_sweep(peregrine, tmp):
    models = [os.path.join(tmp, "relu.onnx"), os.path.join(tmp, "sigmoid.onnx")]
    one_op_model(models[0], "Relu")
    one_op_model(models[1], "Sigmoid")
    db = os.path.join(tmp, "runs.db")
    proc = run([peregrine, "sweep", *models, "--threads", "1,2", "--iterations", "3",
                "--warmup-ms", "0", "--db", db])
    assert "imported 4 runs" in proc.stdout, proc.stdout
    export = os.path.join(tmp, "runs.json")
    run([peregrine, "runs", "--db", db, "--export", export])
    with open(export) as f:
        records = json.load(f)
    assert len(records) == 4, records
    landed = sorted((os.path.basename(r["model_path"]), r["options"]["threads"]) for r in records)
    assert landed == [("relu.onnx", 1), ("relu.onnx", 2), ("sigmoid.onnx", 1),
                      ("sigmoid.onnx", 2)], landed
    for r in records:
        assert r["model_path"] in models, r["model_path"]  # the path here, not the node's copy
        assert r["machine_fingerprint"] and r["machine"]["fingerprint"] == r["machine_fingerprint"]
        assert r["machine"]["peak_gflops"] and r["machine"]["bandwidth_gbps"], r["machine"]
        assert len(r["latencies_ms"]) == 3 and r["metrics"]["latency_median_ms"] > 0
    grouped = run([peregrine, "runs", "--db", db, "--group-by", "machine"]).stdout
    assert grouped.count("relu.onnx") == 2 and grouped.count("sigmoid.onnx") == 2, grouped
    # --json prints the same records in summary: no ceilings, latencies or node metrics.
    summary = json.loads(run([peregrine, "runs", "--db", db, "--json"]).stdout)
    assert sorted(r["id"] for r in summary) == sorted(r["id"] for r in records), summary
    by_id = {r["id"]: r for r in records}
    for r in summary:
        assert "machine" not in r and "latencies_ms" not in r and "nodes" not in r, r
        assert r["metrics"] == by_id[r["id"]]["metrics"], (r, by_id[r["id"]])
        assert r["options"] == by_id[r["id"]]["options"], r
    print("ok   sweep of 2 models x 2 thread counts on a local Ray head landed 4 records")
    return db, export, records


def test_export_import(peregrine, tmp, export, records):
    # A second store gets the same complete runs; --export never overwrites.
    other = os.path.join(tmp, "other.db")
    run([peregrine, "runs", "--db", other, "--import", export])
    again = os.path.join(tmp, "again.json")
    run([peregrine, "runs", "--db", other, "--export", again])
    with open(again) as f:
        copied = json.load(f)
    strip = lambda rs: sorted(json.dumps({k: v for k, v in r.items() if k != "id"}, sort_keys=True)
                              for r in rs)
    assert strip(copied) == strip(records), "an imported run differs from the exported one"
    proc = run([peregrine, "runs", "--db", other, "--export", again], expect=2)
    assert "never overwrites" in proc.stderr, proc.stderr
    # A run measured on another machine sits beside this machine's in --group-by machine.
    foreign = dict(copied[0])
    foreign["machine_fingerprint"] = "0123456789abcdef"
    foreign["machine"] = dict(foreign["machine"], fingerprint="0123456789abcdef",
                              cpu_model="Other CPU")
    foreign["metrics"] = dict(foreign["metrics"],
                              latency_median_ms=2 * foreign["metrics"]["latency_median_ms"])
    foreign_file = os.path.join(tmp, "foreign.json")
    with open(foreign_file, "w") as f:
        json.dump([foreign], f)
    run([peregrine, "runs", "--db", other, "--import", foreign_file])
    grouped = run([peregrine, "runs", "--db", other, "--group-by", "machine"]).stdout
    assert "Other CPU" in grouped and "2.00x" in grouped, grouped
    # Bad files are errors naming the file and the record, and record nothing.
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump([{"kind": "bench", "timestamp": "t", "model_path": "m"}], f)
    proc = run([peregrine, "runs", "--db", other, "--import", bad], expect=2)
    assert "run record 0" in proc.stderr and "machine_fingerprint" in proc.stderr, proc.stderr
    print("ok   runs --export / --import move complete runs; --group-by machine compares machines")


def test_sweep_errors(peregrine, tmp):
    broken = os.path.join(tmp, "broken.onnx")
    with open(broken, "wb") as f:
        f.write(b"\x08\x07garbage")
    db = os.path.join(tmp, "errors.db")
    proc = run([peregrine, "sweep", broken, "--iterations", "1", "--db", db], expect=2)
    assert "broken.onnx" in proc.stderr, proc.stderr
    assert not os.path.exists(db), "a failed sweep recorded runs"
    proc = run([peregrine, "sweep", os.path.join(tmp, "missing.onnx")], expect=2)
    assert "does not exist" in proc.stderr, proc.stderr
    proc = run([peregrine, "sweep", broken, "--no-such-flag", "1"], expect=2)
    assert "no-such-flag" in proc.stderr, proc.stderr
    proc = run([peregrine, "sweep", broken, "--threads", "1,x"], expect=2)
    assert "--threads" in proc.stderr, proc.stderr
    print("ok   a sweep over a broken model fails naming it, and records nothing")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peregrine", default=os.path.join(REPO, "build", "bin", "peregrine"))
    args = ap.parse_args()
    peregrine = os.path.abspath(args.peregrine)
    with tempfile.TemporaryDirectory(prefix="peregrine-sweep-test-") as tmp:
        _, export, records = test_sweep(peregrine, tmp)
        test_export_import(peregrine, tmp, export, records)
        test_sweep_errors(peregrine, tmp)
    print("test_sweep: all passed")


if __name__ == "__main__":
    main()
