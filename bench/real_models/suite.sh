#!/usr/bin/env bash
# The real-model suite: makes its virtual environment (setup_venv.sh) and runs export.py in it.
#   bench/real_models/suite.sh export [--only a,b] [--out-dir DIR] [--exporter dynamo|torchscript]
#   bench/real_models/suite.sh list
# Then compare them: python3 bench/compare.py ~/.cache/peregrine/real-models/*.onnx --coverage
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=$("$HERE/setup_venv.sh")
exec "$VENV/bin/python" "$HERE/export.py" "$@"
