#!/usr/bin/env python3
"""Side by side: Peregrine against ONNX Runtime (and OpenVINO where installed).

  python3 bench/compare.py MODEL.onnx... [--threads N] [--iterations K] [--rounds R]
                           [--peregrine PATH] [--seed S] [--precision fp32|bf16] [--memory]
                           [--noise-floor] [--json]

For each model: one set of seeded random inputs is saved as .npy and given to every engine.
Outputs are compared with ONNX Runtime as the reference:
  max_abs_err  max |x - ref| over all elements of all outputs;
  max_rel_err  max |x - ref| / |ref| over the elements where |ref| > 1e-3 (smaller references
               make relative error meaningless);
  scaled_err   max_abs_err / max |ref|, per output, the maximum over outputs;
  cosine       cosine similarity of the flattened output and reference (float64), the minimum
               over outputs.
Outputs 'agree' when shapes match, every cosine >= --min-cosine (0.9999) and every scaled_err
<= --max-scaled-err (1e-3). Cosine alone is a weak test for random-weight CNNs: their outputs are
dominated by a part that does not depend on the input (global pooling averages random features
to nearly constant values; YOLO's boxes are mostly anchor positions), so the scaled error is the
sharper check there.
Latency is measured interleaved, in R rounds of ABBA order (Peregrine, ORT, ORT, Peregrine, ...),
each chunk K iterations after warm-up; an engine's median latency is the median of its chunk
medians, so slow drift of the machine hits both engines alike. Peregrine is timed with
`peregrine bench --json` (in-process, model loading excluded). If that subcommand is not
available the wall time of `peregrine run` is used instead, which includes loading the model and
writing outputs; the result then says timing "run_wall" and the table marks it with '*'.

--precision bf16: Peregrine runs with `--precision bf16` and OpenVINO with its bf16 inference
precision (its default on CPUs with AVX512_BF16); ONNX Runtime stays float32 and is still the
reference, so the agreement columns show how far each bf16 engine is from float32 ("ov cosine"
and "ov scaled" are OpenVINO's). The default --max-scaled-err becomes 3e-2: bf16 keeps 8 bits of
mantissa, so each operand is rounded by up to 2^-9 relative and the output of a deep network
moves by about 1e-2 of its range (OpenVINO's bf16 outputs move by as much); the cosine bound
stays 0.9999.
--memory: peak resident memory (ru_maxrss, MiB), each engine in its own fresh child process that
loads the model, runs it K (--iterations) times on the same .npy inputs and exits:
  engines.peregrine.memory    {peak_rss_mb}: `peregrine bench --json --no-record`, whole process.
  engines.onnxruntime.memory  {peak_rss_mb, baseline_rss_mb, above_baseline_mb}: a Python child
               with the session options of class OnnxRuntime; baseline is its peak after importing
               numpy and onnxruntime, before the session exists. above_baseline_mb is the model's
               cost to ORT (session, weights, arena); the whole-process peak also counts Python,
               numpy and the ORT library itself. Python and numpy are no cost of ORT, but a C++ user
               of ORT would still pay the library's share, so neither number is the C++ figure:
               it lies between them.
  memory_ratio_peregrine_ort  peregrine peak / ORT whole-process peak.
Table columns "pg MiB", "ort MiB" (whole-process peak, above-baseline peak in parentheses) and
"pg/ort MiB". Needs `peregrine bench`. Children start from a small shell (FRESH_PROCESS), since
Linux would otherwise hand them this process's peak RSS.
--coverage: after timing, `peregrine profile` of each model (bench/kernel_coverage.py):
"coverage" holds the share of node time spent on reference kernels and which op types ran
there, the top op types and their kernels, and the model's ten GEMM-class nodes furthest below
their roofline bound ("worst_gemm_nodes"); the table and the worst ten over all models are
printed after the latency table.
--noise-floor: ONNX Runtime again with graph optimizations disabled (ORT_DISABLE_ALL), same
inputs; "ort_self_agreement" is agreement() of unoptimized against optimized ORT (the same
fields as "agreement"). It shows how far float32 reordering alone moves the outputs: the floor
against which Peregrine's errors should be read (on the ViT, ORT disagrees with itself by
1.9e-3 max rel err at |ref| > 1e-3). Table column "ort self rel". It does not change the exit
status.

Exit status: 0 when every engine ran and all outputs agree, 1 otherwise, 2 for bad arguments.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_coverage  # noqa: E402  (per-node profile summaries)

WORST_GEMM_NODES = 10  # --coverage lists this many GEMM-class nodes furthest below roof

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL_ERR_FLOOR = 1e-3
ORT_WARMUP_S = 0.2

# Prefix that starts a command as a grandchild of a small shell. Linux carries ru_maxrss over
# fork and exec (a child forked from this Python process, which holds numpy, ORT and a session,
# starts with this process's peak), so a child's own peak is only its own when it is forked
# from something small. The trailing `exit` keeps the shell from exec'ing the command directly.
FRESH_PROCESS = ["/bin/sh", "-c", '"$@"; status=$?; exit $status', "sh"]

ONNX_TO_NUMPY = {
    1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_,
    10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}


class EngineError(Exception):
    pass


# --- inputs --------------------------------------------------------------------------------

def _vocab_sizes(model):
    """Input name -> rows of the embedding table it indexes (Gather data dim 0), if any."""
    rows = {init.name: init.dims[0] for init in model.graph.initializer if init.dims}
    sizes = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in rows:
            sizes[node.input[1]] = rows[node.input[0]]
    return sizes


def make_inputs(model_path, seed):
    """Seeded random inputs: floats N(0,1); masks ones; token types zeros; ids in table range."""
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    vocab = _vocab_sizes(model)
    rng = np.random.default_rng(seed)
    inputs = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tensor_type = vi.type.tensor_type
        dtype = ONNX_TO_NUMPY.get(tensor_type.elem_type)
        if dtype is None:
            raise EngineError(f"input '{vi.name}': unsupported element type "
                              f"{tensor_type.elem_type}")
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                 for d in tensor_type.shape.dim]
        lowered = vi.name.lower()
        if np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            value = rng.random(shape) < 0.5
        elif "mask" in lowered:
            value = np.ones(shape, dtype)
        elif "token_type" in lowered or "segment" in lowered:
            value = np.zeros(shape, dtype)
        else:
            value = rng.integers(0, vocab.get(vi.name, 100), shape).astype(dtype)
        inputs[vi.name] = value
    return inputs


# --- agreement -----------------------------------------------------------------------------

def agreement(outputs, reference, min_cosine, max_scaled_err=1e-3):
    """Compares outputs (name -> array) with reference (name -> array)."""
    per_output = {}
    for name, ref in reference.items():
        got = outputs.get(name)
        if got is None:
            per_output[name] = {"error": "missing output"}
            continue
        if got.shape != ref.shape:
            per_output[name] = {"error": f"shape {list(got.shape)} != {list(ref.shape)}"}
            continue
        a = got.astype(np.float64).ravel()
        r = ref.astype(np.float64).ravel()
        diff = np.abs(a - r)
        big = np.abs(r) > REL_ERR_FLOOR
        norm = np.linalg.norm(a) * np.linalg.norm(r)
        if norm > 0:
            cosine = float(np.dot(a, r) / norm)
        else:  # both all-zero agree; one all-zero does not
            cosine = 1.0 if np.array_equal(a, r) else 0.0
        max_abs = float(diff.max()) if diff.size else 0.0
        scale = float(np.abs(r).max()) if r.size else 0.0
        per_output[name] = {
            "max_abs_err": max_abs,
            "scaled_err": max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else
                                                               float("inf")),
            "max_rel_err": float((diff[big] / np.abs(r[big])).max()) if big.any() else 0.0,
            "cosine": cosine,
        }
    ok = [v for v in per_output.values() if "error" not in v]
    summary = {
        "max_abs_err": max((v["max_abs_err"] for v in ok), default=float("nan")),
        "max_rel_err": max((v["max_rel_err"] for v in ok), default=float("nan")),
        "scaled_err": max((v["scaled_err"] for v in ok), default=float("nan")),
        "cosine": min((v["cosine"] for v in ok), default=float("nan")),
        "outputs": per_output,
    }
    # NaN cosines compare False, so NaN outputs never agree.
    summary["agree"] = bool(len(ok) == len(per_output) and per_output and
                            all(v["cosine"] >= min_cosine and v["scaled_err"] <= max_scaled_err
                                for v in ok))
    return summary


# --- engines -------------------------------------------------------------------------------

def _median_of_chunks(chunks):
    return statistics.median(c["median_ms"] for c in chunks)


class Peregrine:
    name = "peregrine"

    def __init__(self, binary, threads, input_files, precision="fp32"):
        self.binary, self.threads, self.input_files = binary, threads, input_files
        self.precision = precision
        self.timing = None  # "bench" or "run_wall", decided on the first chunk
        self.bench_extra = []
        self.extra_stats = {}

    def _cmd(self, sub, model, *rest):
        args = [self.binary, sub, model, "--threads", str(self.threads)]
        if self.precision != "fp32":
            args += ["--precision", self.precision]
        for name, path in self.input_files.items():
            args += ["--input", f"{name}={path}"]
        return args + list(rest)

    def _call(self, args, fresh=False):
        """fresh: start from a small shell so the reported peak RSS is the child's own."""
        proc = subprocess.run(FRESH_PROCESS + args if fresh else args, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise EngineError(f"{' '.join(args[:3])}... exited {proc.returncode}: "
                              f"{proc.stderr.strip()[-500:]}")
        return proc.stdout

    def outputs(self, model, out_dir):
        stdout = self._call(self._cmd("run", model, "--output-dir", out_dir))
        # Lines read "NAME: DTYPE SHAPE -> PATH"; names may hold any character.
        result = {}
        for line in stdout.splitlines():
            left, arrow, path = line.rpartition(" -> ")
            parts = left.rsplit(" ", 2)
            if arrow and len(parts) == 3 and parts[0].endswith(":"):
                result[parts[0][:-1]] = np.load(path)
        return result

    def _bench_available(self):
        proc = subprocess.run([self.binary, "bench", "--help"], capture_output=True, text=True)
        if proc.returncode != 0 or "--json" not in proc.stdout:
            return False
        # Keep comparison runs out of the experiment store when the flag exists.
        if "--no-record" in proc.stdout:
            self.bench_extra.append("--no-record")
        return True

    def chunk(self, model, iterations):
        if self.timing is None:
            self.timing = "bench" if self._bench_available() else "run_wall"
        if self.timing == "bench":
            stdout = self._call(self._cmd("bench", model, "--iterations", str(iterations),
                                          "--json", *self.bench_extra), fresh=True)
            report = json.loads(stdout[stdout.index("{"):stdout.rindex("}") + 1])
            lat = report["latency_ms"]
            for key in ("create_ms", "first_run_ms", "peak_rss_mb", "throughput_per_s"):
                if key in report:
                    self.extra_stats.setdefault(key, []).append(report[key])
            return {"median_ms": float(lat["median"]), "min_ms": float(lat["min"]),
                    "mean_ms": float(lat["mean"])}
        times = []
        with tempfile.TemporaryDirectory(prefix="pg-compare-run-") as scratch:
            for _ in range(iterations):
                start = time.perf_counter()
                self._call(self._cmd("run", model, "--output-dir", scratch, "--overwrite"))
                times.append((time.perf_counter() - start) * 1e3)
        return {"median_ms": statistics.median(times), "min_ms": min(times),
                "mean_ms": statistics.fmean(times)}

    def summary(self, chunks):
        result = {"median_ms": _median_of_chunks(chunks),
                  "min_ms": min(c["min_ms"] for c in chunks),
                  "chunk_medians_ms": [c["median_ms"] for c in chunks], "timing": self.timing}
        for key, values in self.extra_stats.items():
            result[key] = statistics.median(values)
        return result


class InProcessEngine:
    """Common timing for engines driven from Python (ORT, OpenVINO)."""

    timing = "in_process"

    def _warm_up(self):
        deadline = time.perf_counter() + ORT_WARMUP_S
        self.infer()
        while time.perf_counter() < deadline:
            self.infer()

    def chunk(self, model, iterations):
        times = []
        for _ in range(iterations):
            start = time.perf_counter()
            self.infer()
            times.append((time.perf_counter() - start) * 1e3)
        return {"median_ms": statistics.median(times), "min_ms": min(times),
                "mean_ms": statistics.fmean(times)}

    def summary(self, chunks):
        return {"median_ms": _median_of_chunks(chunks),
                "min_ms": min(c["min_ms"] for c in chunks),
                "chunk_medians_ms": [c["median_ms"] for c in chunks], "timing": self.timing,
                "create_ms": self.create_ms}


def ort_session(model, threads, optimize=True):
    """The ORT session every measurement uses: CPU, sequential, `threads` intra-op threads."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class OnnxRuntime(InProcessEngine):
    name = "onnxruntime"

    def __init__(self, model, threads, inputs):
        start = time.perf_counter()
        self.session = ort_session(model, threads)
        self.create_ms = (time.perf_counter() - start) * 1e3
        self.inputs = inputs
        self.names = [o.name for o in self.session.get_outputs()]
        self._warm_up()

    def infer(self):
        return self.session.run(self.names, self.inputs)

    def outputs(self):
        return dict(zip(self.names, self.infer()))


class OpenVino(InProcessEngine):
    name = "openvino"

    def __init__(self, model, threads, inputs, precision="fp32"):
        import openvino as ov
        core = ov.Core()
        start = time.perf_counter()
        compiled = core.compile_model(core.read_model(model), "CPU", {
            "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": {"fp32": "f32", "bf16": "bf16"}[precision]})
        self.create_ms = (time.perf_counter() - start) * 1e3
        self.request = compiled.create_infer_request()
        self.inputs = inputs
        self.names = [o.get_any_name() for o in compiled.outputs]
        self._warm_up()

    def infer(self):
        return self.request.infer(self.inputs)

    def outputs(self):
        result = self.infer()
        return {name: np.array(value) for name, value in zip(self.names, result.values())}


def ort_unoptimized_outputs(model, threads, inputs):
    session = ort_session(model, threads, optimize=False)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


# --- peak memory, each engine in a fresh child process ----------------------------------------

def _maxrss_mib():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def ort_memory_child(model, threads, iterations, input_files):
    """Runs in the child: baseline after imports, then session + K runs; prints JSON."""
    import onnxruntime  # noqa: F401  (part of the baseline, like numpy)
    baseline = _maxrss_mib()
    session = ort_session(model, threads)
    inputs = {name: np.load(path) for name, path in input_files.items()}
    names = [o.name for o in session.get_outputs()]
    for _ in range(iterations):
        session.run(names, inputs)
    print(json.dumps({"peak_rss_mb": _maxrss_mib(), "baseline_rss_mb": baseline}))


def _json_object(stdout):
    return json.loads(stdout[stdout.index("{"):stdout.rindex("}") + 1])


def ort_peak_memory(model, threads, iterations, input_files):
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import compare; "
            "compare.ort_memory_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "
            "json.loads(sys.argv[5]))")
    proc = subprocess.run(FRESH_PROCESS + [sys.executable, "-c", code,
                                           os.path.dirname(os.path.abspath(__file__)), model,
                                           str(threads), str(iterations), json.dumps(input_files)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise EngineError(f"ORT memory child exited {proc.returncode}: "
                          f"{proc.stderr.strip()[-500:]}")
    result = _json_object(proc.stdout)
    result["above_baseline_mb"] = result["peak_rss_mb"] - result["baseline_rss_mb"]
    return result


def peregrine_peak_memory(engine, model, iterations):
    if engine.timing != "bench":  # decided by the timing chunks, which ran first
        raise EngineError("--memory needs `peregrine bench --json`")
    report = _json_object(engine._call(engine._cmd("bench", model, "--iterations", str(iterations),
                                                 "--json", *engine.bench_extra), fresh=True))
    return {"peak_rss_mb": float(report["peak_rss_mb"])}


def openvino_available():
    try:
        import openvino  # noqa: F401
        return True
    except Exception:
        return False


# --- driver --------------------------------------------------------------------------------

def compare_model(model, args, use_openvino):
    record = {"model": model, "engines": {}, "errors": {}}
    with tempfile.TemporaryDirectory(prefix="pg-compare-") as tmp:
        inputs = make_inputs(model, args.seed)
        record["inputs"] = {n: {"shape": list(v.shape), "dtype": str(v.dtype)}
                            for n, v in inputs.items()}
        files = {}
        for i, (name, value) in enumerate(inputs.items()):
            files[name] = os.path.join(tmp, f"input_{i}.npy")
            np.save(files[name], value)

        engines = [Peregrine(args.peregrine, args.threads, files, args.precision)]
        try:
            engines.append(OnnxRuntime(model, args.threads, inputs))
        except Exception as e:  # the reference is needed for agreement; keep going for timing
            record["errors"]["onnxruntime"] = str(e).strip()[:500]
        if use_openvino:
            try:
                engines.append(OpenVino(model, args.threads, inputs, args.precision))
            except Exception as e:
                record["errors"]["openvino"] = str(e).strip()[:500]

        outputs = {}
        for engine in list(engines):
            try:
                if engine.name == "peregrine":
                    outputs[engine.name] = engine.outputs(model, os.path.join(tmp, "peregrine"))
                else:
                    outputs[engine.name] = engine.outputs()
            except Exception as e:
                record["errors"][engine.name] = str(e).strip()[:500]
                engines.remove(engine)
        reference = outputs.get("onnxruntime")
        if reference is not None:
            for name in ("peregrine", "openvino"):
                if name in outputs:
                    key = "agreement" if name == "peregrine" else f"agreement_{name}"
                    record[key] = agreement(outputs[name], reference, args.min_cosine,
                                            args.max_scaled_err)
            if args.noise_floor:
                try:
                    record["ort_self_agreement"] = agreement(
                        ort_unoptimized_outputs(model, args.threads, inputs), reference,
                        args.min_cosine, args.max_scaled_err)
                except Exception as e:
                    record["errors"]["onnxruntime_unoptimized"] = str(e).strip()[:500]

        # Interleaved timing: ABBA rounds so neither engine always runs first.
        chunks = {e.name: [] for e in engines}
        for r in range(args.rounds):
            order = engines if r % 2 == 0 else engines[::-1]
            for engine in order:
                if engine.name in record["errors"]:
                    continue
                try:
                    chunks[engine.name].append(engine.chunk(model, args.iterations))
                except Exception as e:
                    record["errors"][engine.name] = str(e).strip()[:500]
        for engine in engines:
            if chunks[engine.name] and engine.name not in record["errors"]:
                record["engines"][engine.name] = engine.summary(chunks[engine.name])

        if args.memory:  # after timing, one fresh child per engine
            measure = {"peregrine": lambda e: peregrine_peak_memory(e, model, args.iterations),
                       "onnxruntime": lambda e: ort_peak_memory(model, args.threads,
                                                                args.iterations, files)}
            for engine in engines:
                if engine.name in measure and engine.name in record["engines"]:
                    try:
                        record["engines"][engine.name]["memory"] = measure[engine.name](engine)
                    except Exception as e:
                        record["errors"][f"{engine.name}_memory"] = str(e).strip()[:500]
    timed = record["engines"]
    if "peregrine" in timed and "openvino" in timed:
        record["ratio_peregrine_openvino"] = timed["peregrine"]["median_ms"] / \
            timed["openvino"]["median_ms"]
    if "peregrine" in timed and "onnxruntime" in timed:
        record["ratio_peregrine_ort"] = timed["peregrine"]["median_ms"] / \
            timed["onnxruntime"]["median_ms"]
        if "memory" in timed["peregrine"] and "memory" in timed["onnxruntime"]:
            record["memory_ratio_peregrine_ort"] = timed["peregrine"]["memory"]["peak_rss_mb"] / \
                timed["onnxruntime"]["memory"]["peak_rss_mb"]
    return record


def _fmt(value, spec):
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) \
        else format(value, spec)


def print_table(results, show_openvino, show_memory=False, show_noise_floor=False):
    headers = ["model", "peregrine ms", "onnxruntime ms"] + (["openvino ms"] if show_openvino
                                                              else []) + \
        ["pg/ort"] + (["pg/ov"] if show_openvino else []) + \
        ["max abs", "max rel", "scaled", "cosine", "agree"] + \
        (["ov scaled", "ov cosine"] if show_openvino else []) + \
        (["ort self rel"] if show_noise_floor else []) + \
        (["pg MiB", "ort MiB", "pg/ort MiB"] if show_memory else [])
    rows = []
    run_wall = False
    for rec in results:
        eng = rec["engines"]
        pg = eng.get("peregrine", {})
        pg_cell = _fmt(pg.get("median_ms"), ".2f")
        if pg.get("timing") == "run_wall":
            pg_cell += "*"
            run_wall = True
        agree = rec.get("agreement", {})
        row = [os.path.basename(rec["model"]), pg_cell,
               _fmt(eng.get("onnxruntime", {}).get("median_ms"), ".2f")]
        if show_openvino:
            row.append(_fmt(eng.get("openvino", {}).get("median_ms"), ".2f"))
        row.append(_fmt(rec.get("ratio_peregrine_ort"), ".2f"))
        if show_openvino:
            row.append(_fmt(rec.get("ratio_peregrine_openvino"), ".2f"))
        row += [_fmt(agree.get("max_abs_err"), ".2e"), _fmt(agree.get("max_rel_err"), ".2e"),
                _fmt(agree.get("scaled_err"), ".1e"),
                _fmt(agree.get("cosine"), ".6f"),
                {True: "yes", False: "NO"}.get(agree.get("agree"), "-")]
        if show_openvino:
            ov = rec.get("agreement_openvino", {})
            row += [_fmt(ov.get("scaled_err"), ".1e"), _fmt(ov.get("cosine"), ".6f")]
        if show_noise_floor:
            row.append(_fmt(rec.get("ort_self_agreement", {}).get("max_rel_err"), ".2e"))
        if show_memory:
            pg_mem = eng.get("peregrine", {}).get("memory", {})
            ort_mem = eng.get("onnxruntime", {}).get("memory", {})
            ort_cell = _fmt(ort_mem.get("peak_rss_mb"), ".1f")
            if "above_baseline_mb" in ort_mem:
                ort_cell += f" ({ort_mem['above_baseline_mb']:.1f})"
            row += [_fmt(pg_mem.get("peak_rss_mb"), ".1f"), ort_cell,
                    _fmt(rec.get("memory_ratio_peregrine_ort"), ".2f")]
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))
    if run_wall:
        print("* peregrine bench unavailable: wall time of `peregrine run`, including model "
              "loading and output writing")
    if show_memory:
        print("MiB: peak RSS of a fresh process per engine; ort: whole Python process (in "
              "parentheses: above its peak after imports)")
    for rec in results:
        for engine, message in rec["errors"].items():
            print(f"error: {os.path.basename(rec['model'])}: {engine}: {message}",
                  file=sys.stderr)


def _without_nan(value):
    """NaN and infinities become null: strict JSON has no spelling for them."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _without_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nan(v) for v in value]
    return value


def default_peregrine():
    if os.environ.get("PEREGRINE"):
        return os.environ["PEREGRINE"]
    return os.path.join(REPO, "build", "bin", "peregrine")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", metavar="MODEL", help="ONNX model files")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of every engine")
    parser.add_argument("--iterations", type=int, default=10, help="timed runs per chunk")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved timing rounds (each one chunk per engine)")
    parser.add_argument("--peregrine", default=default_peregrine(),
                        help="peregrine binary (default: $PEREGRINE or build/bin/peregrine)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--min-cosine", type=float, default=0.9999,
                        help="cosine similarity at or above which outputs agree")
    parser.add_argument("--max-scaled-err", type=float, default=None,
                        help="largest max_abs_err / max|ref| at which outputs agree (default "
                             "1e-3; 3e-2 with --precision bf16)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                        help="compute precision of Peregrine and OpenVINO (ORT stays fp32)")
    parser.add_argument("--no-openvino", action="store_true", help="skip OpenVINO even if present")
    parser.add_argument("--memory", action="store_true",
                        help="peak RSS of each engine, each in a fresh child process")
    parser.add_argument("--noise-floor", action="store_true",
                        help="agreement of ORT with graph optimizations off against ORT optimized")
    parser.add_argument("--coverage", action="store_true",
                        help="also profile Peregrine per node (bench/kernel_coverage.py): the "
                             "share of time on reference kernels and the op types that ran there")
    parser.add_argument("--json", action="store_true", help="print results as one JSON object")
    args = parser.parse_args(argv)
    if args.max_scaled_err is None:
        args.max_scaled_err = 3e-2 if args.precision == "bf16" else 1e-3
    if args.threads < 1 or args.iterations < 1 or args.rounds < 1:
        parser.error("--threads, --iterations and --rounds must be at least 1")
    if not (os.path.isfile(args.peregrine) and os.access(args.peregrine, os.X_OK)) and \
            not shutil.which(args.peregrine):
        print(f"error: peregrine binary '{args.peregrine}' not found (build it or pass "
              "--peregrine)", file=sys.stderr)
        return 2
    for model in args.models:
        if not os.path.isfile(model):
            print(f"error: '{model}' is not a file", file=sys.stderr)
            return 2
    use_openvino = not args.no_openvino and openvino_available()

    results = []
    for model in args.models:
        try:
            results.append(compare_model(model, args, use_openvino))
        except EngineError as e:
            results.append({"model": model, "engines": {}, "errors": {"inputs": str(e)}})
        if args.coverage:
            # After the timed runs, so profiling never overlaps them.
            try:
                prof = kernel_coverage.profile(args.peregrine, model, args.threads, 3)
                cov = kernel_coverage.summarize(model, prof, 5)
                cov["worst_gemm_nodes"] = kernel_coverage.worst_gemm_nodes(
                    cov.pop("gemm_nodes"), WORST_GEMM_NODES)
                results[-1]["coverage"] = cov
            except (RuntimeError, ValueError, KeyError) as e:
                results[-1]["errors"]["coverage"] = str(e)[:500]
    if args.json:
        import onnxruntime
        doc = {"threads": args.threads, "iterations": args.iterations, "rounds": args.rounds,
               "seed": args.seed, "peregrine": args.peregrine, "precision": args.precision,
               "onnxruntime_version": onnxruntime.__version__,
               "openvino": use_openvino, "rel_err_floor": REL_ERR_FLOOR,
               "min_cosine": args.min_cosine,
               "max_scaled_err": args.max_scaled_err, "memory": args.memory,
               "noise_floor": args.noise_floor, "models": results}
        print(json.dumps(_without_nan(doc), indent=2))
        for rec in results:
            for engine, message in rec["errors"].items():
                print(f"error: {rec['model']}: {engine}: {message}", file=sys.stderr)
    else:
        print(f"threads {args.threads}, {args.rounds} interleaved rounds x {args.iterations} "
              f"iterations, inputs seed {args.seed}, precision {args.precision}")
        print_table(results, use_openvino, args.memory, args.noise_floor)
        if args.coverage:
            print("\ncoverage: share of Peregrine's node time on reference kernels")
            for rec in results:
                cov = rec.get("coverage")
                if not cov:
                    continue
                refs = ", ".join(f"{k} {v['us'] / 1000:.2f} ms"
                                 for k, v in cov["reference_ops"].items())
                print(f"  {os.path.basename(rec['model']):34} "
                      f"{100 * cov['reference_share']:5.1f}%  {refs}")
            kernel_coverage.print_worst_gemm_nodes(kernel_coverage.worst_gemm_nodes(
                [g for rec in results for g in rec.get("coverage", {}).get("worst_gemm_nodes", [])],
                WORST_GEMM_NODES))
    ok = all(not r["errors"] and r.get("agreement", {}).get("agree") for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
