"""peregrine sweep: `peregrine bench` runs fanned out as Ray tasks across a cluster's nodes.

Every model x thread count x precision runs on every alive node (each task pinned to its node,
reserving --slot-cpus of it: by default all its CPUs, so two benches never share a machine).
Each node measures its ceilings once (`peregrine machine`, cached there) and records the run in a
store of its own; the complete records (the node's fingerprint and ceilings, every latency) come
back and are imported into the local experiment store, where `peregrine runs --group-by machine`
sets machines side by side.

Without --address a local Ray instance is started on 127.0.0.1 for the sweep and stopped after
it. The models travel to the nodes through Ray's object store; the peregrine binary must exist at
the same path on every node (--peregrine).

Started by `peregrine sweep` (tools/cli/sweep.cc); runs itself inside the venv that holds Ray.
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "python_env"))
import venvs  # noqa: E402

RAY = "ray==2.60.0"
venvs.reexec_in_venv("ray-venv", [RAY])

# No usage reporting (nothing leaves the machine), and no cluster mode meant for other systems.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
import ray  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402


def bench_on_node(model_name, model_bytes, threads, precision, peregrine, bench_args):
    """On the node: the model into a temporary folder, the node's ceilings, one bench recorded in
    a store of its own, exported whole. Returns the records or the error."""
    node = socket.gethostname()
    tmp = tempfile.mkdtemp(prefix="peregrine-sweep-")
    try:
        model = os.path.join(tmp, model_name)
        with open(model, "wb") as f:
            f.write(model_bytes)
        machine = subprocess.run([peregrine, "machine"], capture_output=True, text=True)
        if machine.returncode != 0:
            return {"node": node, "error": f"peregrine machine: {machine.stderr.strip()}"}
        db, out = os.path.join(tmp, "runs.db"), os.path.join(tmp, "runs.json")
        bench = subprocess.run([peregrine, "bench", model, "--threads", str(threads),
                                "--precision", precision, "--db", db] + bench_args,
                               capture_output=True, text=True)
        if bench.returncode != 0:
            return {"node": node, "error": bench.stderr.strip().replace(tmp + "/", ""),
                    "exit_code": bench.returncode}
        subprocess.run([peregrine, "runs", "--db", db, "--export", out], check=True,
                       capture_output=True)
        with open(out) as f:
            return {"node": node, "records": json.load(f)}
    except OSError as e:
        return {"node": node, "error": str(e)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bad_input(message):
    """A wrong flag or model: the message, and the CLI's exit code for bad input."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_list(text, what, convert=str):
    try:
        values = [convert(v) for v in text.split(",") if v]
    except ValueError:
        bad_input(f"--{what} '{text}': expected a comma-separated list")
    if not values:
        bad_input(f"--{what} is empty")
    return values


def main():
    ap = argparse.ArgumentParser(prog="peregrine sweep", description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--peregrine", required=True, help="the peregrine binary (same path on every node)")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--address", help="Ray cluster address (default: a local instance)")
    ap.add_argument("--slot-cpus", type=float, help="CPUs one bench reserves (default: a node's all)")
    ap.add_argument("--db", help="experiment store to import into (default ~/.peregrine/runs.db)")
    ap.add_argument("--iterations")
    ap.add_argument("--duration-s")
    ap.add_argument("--warmup-ms")
    args = ap.parse_args()
    threads = parse_list(args.threads, "threads", int)
    if any(t < 1 for t in threads):
        bad_input("--threads: thread counts must be >= 1")
    precisions = parse_list(args.precision, "precision")
    bench_args = []
    for flag in ("iterations", "duration_s", "warmup_ms"):
        if getattr(args, flag) is not None:
            bench_args += ["--" + flag.replace("_", "-"), getattr(args, flag)]
    models = []
    for m in args.models:
        path = pathlib.Path(m).resolve()
        if not path.is_file():
            bad_input(f"model '{m}' does not exist")
        models.append(path)

    if args.address:
        ray.init(address=args.address, log_to_driver=False, logging_level="ERROR")
    else:
        ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR", num_cpus=os.cpu_count())
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        remote = ray.remote(bench_on_node)
        refs = {m: ray.put(m.read_bytes()) for m in models}
        tasks = []
        for node in nodes:
            cpus = args.slot_cpus or node["Resources"].get("CPU", 1)
            placement = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            for m in models:
                for t in threads:
                    for p in precisions:
                        task = remote.options(num_cpus=cpus, scheduling_strategy=placement).remote(
                            m.name, refs[m], t, p, args.peregrine, bench_args)
                        tasks.append((m, t, p, node["NodeManagerAddress"], task))
        print(f"sweep: {len(tasks)} bench runs ({len(models)} model(s) x {len(threads)} thread "
              f"count(s) x {len(precisions)} precision(s) on {len(nodes)} node(s))", flush=True)
        results = [(m, t, p, addr, ray.get(task)) for m, t, p, addr, task in tasks]
    finally:
        ray.shutdown()

    records, failures = [], []
    for m, t, p, addr, result in results:
        if "error" in result:
            failures.append(f"{m} (threads {t}, {p}) on {result['node']}: {result['error']}")
            continue
        for r in result["records"]:
            r["model_path"] = str(m)  # the path here, not the node's temporary copy
            records.append(r)
            median = r["metrics"].get("latency_median_ms", float("nan"))
            print(f"  {m.name:28s} threads {t}  {p:5s}  {result['node']:20s} "
                  f"{r['machine_fingerprint'][:16]:16s}  median {median:.3f} ms")
    if records:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(records, f)
        try:
            cmd = [args.peregrine, "runs", "--import", f.name] + (["--db", args.db] if args.db else [])
            r = subprocess.run(cmd)
            if r.returncode != 0:
                return r.returncode
        finally:
            os.unlink(f.name)
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return 2 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
