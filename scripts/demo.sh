#!/usr/bin/env bash
# The main job on the bundled default model (ResNet-50 from the zoo): generate it,
# inspect it, run it, benchmark and profile it, compare with ONNX Runtime, and serve it
# with Triton Inference Server through the Peregrine backend.
# Everything goes to build/demo/, a folder the demo owns.
set -euo pipefail
cd "$(dirname "$0")/.."
PEREGRINE=${1:-build/bin/peregrine}
OUT=build/demo
MODEL=$OUT/resnet50.onnx
mkdir -p "$OUT"

step() { printf '\n== %s\n' "$*"; }

step "model: $MODEL"
[ -f "$MODEL" ] || python3 models/zoo.py resnet50 --out-dir "$OUT"

step "peregrine inspect"
"$PEREGRINE" inspect "$MODEL"

step "peregrine run"
rm -rf "$OUT/outputs"
"$PEREGRINE" run "$MODEL" --output-dir "$OUT/outputs"

step "peregrine machine (measured once, then cached in ~/.peregrine)"
"$PEREGRINE" machine

step "peregrine bench"
"$PEREGRINE" bench "$MODEL" --iterations 20

step "peregrine profile"
rm -f "$OUT/trace.json" "$OUT/report.html"
"$PEREGRINE" profile "$MODEL" --iterations 5 --trace "$OUT/trace.json" --report "$OUT/report.html"

step "Python API: peregrine.InferenceSession, shaped like onnxruntime's"
PYTHONPATH=build/python python3 - "$MODEL" <<'PY'
import sys
import numpy as np, onnxruntime, peregrine
path = sys.argv[1]
session = peregrine.InferenceSession(path, providers=["CPUExecutionProvider"])
inp = session.get_inputs()[0]
print("input: ", inp, "\noutput:", session.get_outputs()[0])
x = np.random.default_rng(0).uniform(-1, 1, [d if isinstance(d, int) else 1 for d in inp.shape]).astype(np.float32)
(mine,) = session.run(None, {inp.name: x})
(theirs,) = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {inp.name: x})
cos = float(np.dot(mine.ravel(), theirs.ravel()) / np.linalg.norm(mine) / np.linalg.norm(theirs))
print(f"output {mine.shape}, cosine vs onnxruntime {cos:.6f}, top-1 {mine.argmax()} / {theirs.argmax()}")
PY

step "side by side with ONNX Runtime (1 thread)"
python3 bench/compare.py "$MODEL" --threads 1 --iterations 5 --rounds 2

step "served by Triton Inference Server through the Peregrine backend (make serve-demo)"
python3 scripts/serve_demo.py "$PEREGRINE"

step "summary"
echo "model:          $MODEL"
echo "outputs:        $OUT/outputs/"
echo "Chrome trace:   $OUT/trace.json (open in https://ui.perfetto.dev)"
echo "HTML report:    $OUT/report.html"
echo "recorded runs:  $PEREGRINE runs --model resnet50"
echo "Triton repo:    build/serve-demo/models/ (backend: build/triton/peregrine/)"
