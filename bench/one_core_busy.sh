#!/bin/bash
# Latency with one core held by another process: a busy loop runs beside bench/compare.py at
# --threads 1 and --threads 2, so the two thread counts (and the peers) meet the same contention.
#   bench/one_core_busy.sh MODEL.onnx... [-- compare.py options]
# The busy loop is stopped when the script ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
models=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do models+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#models[@]} -gt 0 ] || { echo "usage: $0 MODEL.onnx... [-- compare.py options]" >&2; exit 2; }
sh -c 'while :; do :; done' &
busy=$!
trap 'kill $busy 2>/dev/null' EXIT
for threads in 1 2; do
  echo "== one core busy, --threads $threads"
  python3 bench/compare.py "${models[@]}" --threads "$threads" "$@"
done
