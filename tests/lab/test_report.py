#!/usr/bin/env python3
"""Tests of `peregrine profile` outputs: --json, the Chrome trace, and the HTML report
rendered in headless Chromium (plain script; exits non-zero on failure).

  python3 tests/lab/test_report.py [--peregrine build/bin/peregrine] [--chromium chromium]

The report must draw exactly one roofline point per profiled node, run its script
without errors (the page marks <body data-report-ready="ok"> when its script finished,
and its window.onerror / console.error hooks write into #js-errors), log nothing to
the console, and show model-provided names as text, never as markup.
"""

import argparse
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx

# A node name that would break out of an attribute, a <title> and a <script> if unescaped.
HOSTILE_NAME = 'conv_b "q" \'s\' </title><script>document.title="pwned"</script> & <b>'
CLASSES = {"compute-bound", "memory-bound", "overhead-bound"}


def build_model(path):
    """Conv -> Relu -> Conv -> Add (residual) -> Relu -> Conv: six nodes, all static shapes
    (the graph passes may fuse them into fewer)."""
    rng = np.random.default_rng(0)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    inits = [weight("w_a", (16, 3, 3, 3)), weight("b_a", (16,)), weight("w_b", (16, 16, 3, 3)),
             weight("w_c", (8, 16, 1, 1))]
    nodes = [
        helper.make_node("Conv", ["x", "w_a", "b_a"], ["a"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["a_relu"], name="relu_a"),
        helper.make_node("Conv", ["a_relu", "w_b"], ["b"], name=HOSTILE_NAME, pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a_relu", "b"], ["sum"], name="add"),
        helper.make_node("Relu", ["sum"], ["sum_relu"], name="relu_sum"),
        helper.make_node("Conv", ["sum_relu", "w_c"], ["y"], name="conv_c"),
    ]
    graph = helper.make_graph(nodes, "report_test",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return [n.name for n in nodes]


class DomSummary(html.parser.HTMLParser):
    """Collects what the test asserts on from Chromium's dumped DOM."""

    def __init__(self):
        super().__init__()
        self.body_attrs = {}
        self.points = []          # attrs of every .node-point inside svg#roofline
        self.scripts = 0
        self.js_errors = ""
        self.title = ""
        self._svg_stack = []      # ids of open <svg> elements
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body_attrs = a
        elif tag == "svg":
            self._svg_stack.append(a.get("id", ""))
        elif tag == "script":
            self.scripts += 1
        elif tag == "circle" and "node-point" in a.get("class", "").split():
            if "roofline" in self._svg_stack:
                self.points.append(a)
        if a.get("id") == "js-errors":
            self._in = "errors"
        elif tag == "title" and not self._svg_stack:
            self._in = "title"

    def handle_endtag(self, tag):
        if tag == "svg" and self._svg_stack:
            self._svg_stack.pop()
        if tag in ("div", "title"):
            self._in = None

    def handle_data(self, data):
        if self._in == "errors":
            self.js_errors += data
        elif self._in == "title":
            self.title += data


def render(chromium, page, scratch):
    """Loads `page` headless; returns (dumped DOM, console lines the page produced)."""
    profile_dir = tempfile.mkdtemp(prefix="chromium-", dir=scratch)
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--user-data-dir=" + profile_dir, "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=3000", "--dump-dom", "file://" + os.path.abspath(page)]
    env = dict(os.environ, HOME=scratch)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    # Console output of the page: lines like  ...:INFO:CONSOLE:12] "message", source: file:///...
    console = [l for l in proc.stderr.splitlines() if ":CONSOLE" in l and os.path.basename(page) in l]
    dom = DomSummary()
    dom.feed(proc.stdout)
    return proc.stdout, console, dom


def check_page(chromium, page, scratch, expected_nodes):
    _, console, dom = render(chromium, page, scratch)
    assert dom.body_attrs.get("data-report-ready") == "ok", \
        f"the report's script did not finish: body {dom.body_attrs}, errors {dom.js_errors!r}"
    assert "data-js-errors" not in dom.body_attrs and not dom.js_errors.strip(), dom.js_errors
    assert not console, "the page logged to the console:\n" + "\n".join(console)
    names = [p.get("data-node") for p in dom.points]
    assert len(dom.points) == len(expected_nodes), \
        f"{len(dom.points)} points on the roofline, {len(expected_nodes)} profiled nodes"
    assert sorted(names) == sorted(expected_nodes), (names, expected_nodes)
    assert dom.body_attrs.get("data-node-points") == str(len(expected_nodes))
    for p in dom.points:
        assert set(p["class"].split()) & {"compute", "memory", "overhead"}, p
        assert float(p["r"]) > 0, p
    assert dom.scripts == 2, f"{dom.scripts} <script> elements; a node name was injected as markup?"
    assert dom.title.startswith("Peregrine profile"), dom.title


def check_detects_errors(chromium, page, scratch):
    """The harness itself must notice a failing script: break a copy of the page."""
    broken = os.path.join(scratch, "broken.html")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    text = text.replace("</body>", "<script>undefinedFunctionCall();</script></body>")
    with open(broken, "w", encoding="utf-8") as f:
        f.write(text)
    _, console, dom = render(chromium, broken, scratch)
    assert "undefinedFunctionCall" in dom.js_errors, dom.js_errors
    assert console, "an uncaught error should reach the console log"


def check_json(profile, onnx_names):
    """Returns the profiled node names (after fusion: fewer than the ONNX nodes)."""
    nodes = profile["nodes"]
    names = [n["name"] for n in nodes]
    assert 1 <= len(nodes) <= len(onnx_names), names
    assert set(names) <= set(onnx_names), names   # fused nodes keep a name from the model
    assert HOSTILE_NAME in names, names
    assert [n["index"] for n in nodes] == sorted(n["index"] for n in nodes)  # graph order
    assert profile["machine"]["peak_gflops"] > 0 and profile["machine"]["bandwidth_gbps"] > 0
    for n in nodes:
        assert n["class"] in CLASSES, n
        assert n["median_us"] > 0 and n["bytes"] > 0, n
        assert n["flops"] > 0, n                   # every node here is (or contains) a Conv/Add
        assert abs(n["intensity"] - n["flops"] / n["bytes"]) <= 1e-9 * n["intensity"], n
        assert n["percent_of_roof"] >= 0, n
    conv = nodes[0]
    # conv_a: 1x16x32x32 outputs of 3x3x3 MACs, 2 FLOPs per MAC (bias and a fused Relu add more).
    assert conv["name"] == "conv_a" and "Conv" in conv["op_type"], conv
    assert conv["flops"] >= 2 * 16 * 32 * 32 * 27, conv
    ops = profile["op_types"]
    assert sum(t["count"] for t in ops) == len(nodes), ops
    assert abs(sum(t["percent"] for t in ops) - 100) < 1e-6, ops
    assert abs(sum(t["flops"] for t in ops) - sum(n["flops"] for n in nodes)) < 1, ops
    assert 1 <= len(profile["bottlenecks"]) <= 5
    assert all(b["reason"] for b in profile["bottlenecks"])
    worst = max(nodes, key=lambda n: n["median_us"])
    assert profile["bottlenecks"][0]["index"] == worst["index"]
    return names


def check_trace(path, names, iterations):
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    complete = [e for e in events if e["ph"] == "X"]
    nodes = [e for e in complete if e["cat"] == "node"]
    runs = [e for e in complete if e["cat"] == "run"]
    assert len(runs) == iterations, len(runs)
    assert len(nodes) == iterations * len(names), len(nodes)
    assert {e["name"] for e in nodes} == set(names)
    tids = {e["tid"] for e in complete}
    assert len(tids) == 1, tids  # one executor thread today
    thread_names = [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert [e["tid"] for e in thread_names] == list(tids)
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert isinstance(e["pid"], int)
    for e in nodes:
        for key in ("op_type", "inputs", "outputs", "flops", "bytes"):
            assert key in e["args"], (key, e)
        run = next(r for r in runs if r["ts"] <= e["ts"] <= r["ts"] + r["dur"])
        assert e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 1e-3, (e, run)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peregrine", default="build/bin/peregrine")
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = ap.parse_args()
    if not args.chromium:
        sys.exit("test_report: chromium not found (scripts/setup.sh installs it)")
    iterations = 3
    with tempfile.TemporaryDirectory(prefix="peregrine-report-test-") as scratch:
        model = os.path.join(scratch, "small.onnx")
        names = build_model(model)
        trace, report = os.path.join(scratch, "trace.json"), os.path.join(scratch, "report.html")
        # HOME in the scratch folder: measured ceilings and recorded runs stay out of the user's.
        env = dict(os.environ, HOME=scratch)
        cmd = [args.peregrine, "profile", model, "--iterations", str(iterations), "--json",
               "--trace", trace, "--report", report]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, f"profile exited {proc.returncode}:\n{proc.stderr}"
        profiled = check_json(json.loads(proc.stdout), names)
        check_trace(trace, profiled, iterations)

        # Existing outputs are the user's: refused without --overwrite, replaced with it.
        again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert again.returncode == 2 and "already exists" in again.stderr, again.stderr

        check_page(args.chromium, report, scratch, profiled)
        check_detects_errors(args.chromium, report, scratch)
    print("test_report: ok")


if __name__ == "__main__":
    main()
