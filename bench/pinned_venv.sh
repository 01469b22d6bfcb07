#!/usr/bin/env bash
# A virtual environment holding exactly the given pinned packages, for the benchmark scripts'
# heavy tooling (the project's own Python is never touched). Idempotent: a venv whose stamp
# matches the pins is reused. Prints the venv's path.
#   bench/pinned_venv.sh VENV_DIR PACKAGE==VERSION...
set -euo pipefail
VENV=$1
shift
PINS=("$@")
STAMP="$VENV/.peregrine-pins"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then
  echo "$VENV"
  exit 0
fi
PY=${PYTHON:-python3}
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" >&2
echo "${PINS[*]}" >"$STAMP"
echo "$VENV"
