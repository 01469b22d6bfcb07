#!/usr/bin/env bash
# Makes the isolated virtual environment that exports the real-model suite: torch, torchvision,
# transformers and the exporters' own dependencies, pinned. The project's own Python is never
# touched. Idempotent: a venv whose stamp matches the pins is reused.
#   bench/real_models/setup_venv.sh [VENV_DIR]   (default ~/.cache/peregrine/real-models-venv)
set -euo pipefail
VENV=${1:-${PEREGRINE_REAL_VENV:-$HOME/.cache/peregrine/real-models-venv}}
PINS=(torch==2.11.0 torchvision==0.26.0 transformers==5.25.0 onnx==1.23.2 onnxscript==0.7.2
      numpy==2.4.6)
exec "$(dirname "$0")/../pinned_venv.sh" "$VENV" "${PINS[@]}"
