#!/usr/bin/env bash
# Makes the isolated virtual environment of ONNX Runtime's quantizer (it needs ml_dtypes, which
# the project's own Python does not carry). Idempotent: a venv whose stamp matches the pins is
# reused. Prints the venv's path.
#   bench/qdq/setup_venv.sh [VENV_DIR]   (default ~/.cache/peregrine/qdq-venv)
set -euo pipefail
VENV=${1:-${PEREGRINE_QDQ_VENV:-$HOME/.cache/peregrine/qdq-venv}}
PINS=(onnxruntime==1.32.0 onnx==1.17.0 numpy==2.4.6 ml_dtypes==0.5.4)
exec "$(dirname "$0")/../pinned_venv.sh" "$VENV" "${PINS[@]}"
