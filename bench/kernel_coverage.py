#!/usr/bin/env python3
"""Kernel coverage of models: where Peregrine's time goes, and how much of it on reference kernels.

  python3 bench/kernel_coverage.py MODEL.onnx... [--threads N] [--iterations K] [--peregrine PATH]
                            [--json] [--top T]

For each model, `peregrine profile --json` (after fusion, per node) gives:
  reference_share   the share of node time spent in nodes that ran on the reference backend
                    (kernel "reference", or a CPU kernel's "reference (fallback of ...)" for a
                    case it has no path for), and which op types those were, with their time;
  top op types      the op types taking the most time, with the kernel that ran them;
  exec us/node      the executor's time between kernels per node (profile's estimate);
  worst GEMM-class  Conv / MatMul / Gemm nodes and their fused forms furthest below their
                    roofline bound (percent_of_roof), the T worst over all models.
The issue's targets: reference_share <= 2% per model; no GEMM-class node below 50% of roof.
Exit status 0 unless a profile failed (1) or the arguments are bad (2).
"""

import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMM_CLASS = ("Conv", "MatMul", "Gemm", "ConvTranspose", "peregrine.FusedConv",
              "peregrine.FusedMatMul", "peregrine.FusedGemm", "peregrine.ConvNhwc")


def profile(peregrine, model, threads, iterations):
    cmd = [peregrine, "profile", model, "--json", "--no-record", "--threads", str(threads),
           "--iterations", str(iterations)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[:500])
    return json.loads(p.stdout)


def summarize(model, prof, top):
    nodes = prof["nodes"]
    total = sum(n["median_us"] for n in nodes) or 1.0
    ref = {}
    by_op = {}
    for n in nodes:
        t = n["median_us"]
        e = by_op.setdefault(n["op_type"], {"us": 0.0, "count": 0, "kernels": set()})
        e["us"] += t
        e["count"] += 1
        e["kernels"].add(n["kernel"])
        if n["kernel"].startswith("reference"):  # also "reference (fallback of cpu/...)"
            r = ref.setdefault(n["op_type"], {"us": 0.0, "count": 0})
            r["us"] += t
            r["count"] += 1
    gemm = [
        {"model": os.path.basename(model), "node": n["name"], "op_type": n["op_type"],
         "kernel": n["kernel"], "inputs": n["inputs"], "us": n["median_us"],
         "percent_of_roof": n.get("percent_of_roof")}
        for n in nodes
        if n["op_type"] in GEMM_CLASS and n.get("percent_of_roof") is not None
    ]
    ref_us = sum(r["us"] for r in ref.values())
    ops = sorted(by_op.items(), key=lambda kv: -kv[1]["us"])[:top]
    return {
        "model": os.path.basename(model),
        "latency_ms": prof["latency_median_ms"],
        "node_time_ms": total / 1000.0,
        "nodes": len(nodes),
        "executor_us_per_node": prof.get("executor_overhead_us_per_node"),
        "reference_share": ref_us / total,
        "reference_ops": {k: {"us": round(v["us"], 1), "count": v["count"]}
                          for k, v in sorted(ref.items(), key=lambda kv: -kv[1]["us"])},
        "top_ops": [{"op_type": k, "share": v["us"] / total, "count": v["count"],
                     "kernels": sorted(v["kernels"])} for k, v in ops],
        "gemm_nodes": gemm,
    }


def worst_gemm_nodes(gemm_nodes, top):
    """The `top` GEMM-class nodes (summarize's "gemm_nodes", any models) furthest below roof."""
    return sorted(gemm_nodes, key=lambda g: g["percent_of_roof"])[:top]


def print_worst_gemm_nodes(worst):
    print(f"\nworst {len(worst)} GEMM-class nodes (percent of roofline bound)")
    for g in worst:
        print(f"  {g['percent_of_roof']:5.1f}%  {g['us']:8.1f} us  {g['model']:28} "
              f"{g['op_type']:22} {g['inputs'][:60]}  {g['kernel']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--peregrine", default=os.path.join(REPO, "build", "bin", "peregrine"))
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results, failed = [], 0
    for m in args.models:
        try:
            results.append(summarize(m, profile(args.peregrine, m, args.threads, args.iterations),
                                     args.top))
        except (RuntimeError, json.JSONDecodeError, KeyError) as e:
            failed += 1
            results.append({"model": os.path.basename(m), "error": str(e)})
    worst = worst_gemm_nodes([g for r in results for g in r.get("gemm_nodes", [])], args.top)
    if args.json:
        for r in results:
            r.pop("gemm_nodes", None)
        print(json.dumps({"threads": args.threads, "models": results, "worst_gemm_nodes": worst},
                         indent=1))
        return 1 if failed else 0
    print(f"{'model':34} {'ms':>9} {'nodes':>6} {'exec us/node':>12} {'on reference':>13}  "
          "reference op types")
    for r in results:
        if "error" in r:
            print(f"{r['model']:34} error: {r['error']}")
            continue
        refs = ", ".join(f"{k} {v['us'] / 1000:.2f} ms" for k, v in r["reference_ops"].items())
        ex = r["executor_us_per_node"]
        ex = f"{ex:12.2f}" if ex is not None else f"{'-':>12}"
        print(f"{r['model']:34} {r['latency_ms']:9.2f} {r['nodes']:6d} {ex} "
              f"{100 * r['reference_share']:12.1f}%  {refs}")
    for r in results:
        if "error" in r:
            continue
        print(f"\n{r['model']}: top op types")
        for o in r["top_ops"]:
            print(f"  {o['op_type']:28} {100 * o['share']:5.1f}%  x{o['count']:<4} "
                  f"{', '.join(o['kernels'])[:90]}")
    print_worst_gemm_nodes(worst)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
