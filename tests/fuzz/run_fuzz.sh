#!/bin/bash
# Builds the libFuzzer targets (the `fuzz` CMake preset: clang, ASan + UBSan) and runs each for
# FUZZ_SECONDS (default 60), one after the other. Corpora and findings live outside the
# checkout, in $PEREGRINE_FUZZ_DIR (default ~/.cache/peregrine/fuzz): <target>/ holds the
# corpus, artifacts/ the inputs that crashed, hung (over 10 s) or ran out of memory. Empty
# corpora are seeded from the ONNX node tests the build generated (make conformance) and the
# malformed-model corpus. A target stops at its first finding unless FUZZ_KEEP_GOING=1, which
# runs it in libFuzzer's fork mode for the whole time, saving every crash, hang and OOM.
#   tests/fuzz/run_fuzz.sh [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-60}
root=${PEREGRINE_FUZZ_DIR:-$HOME/.cache/peregrine/fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(model_load pipeline npy tensor_proto)

command -v clang++ >/dev/null || { echo "error: make fuzz needs clang++ (apt-get install clang)" >&2; exit 2; }
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" $(printf -- '--target fuzz_%s ' "${targets[@]}")

mkdir -p "$root/artifacts"
seed() {  # seed TARGET: fill an empty corpus
  local dir=$root/$1
  mkdir -p "$dir"
  [ -z "$(ls -A "$dir")" ] || return 0
  python3 tests/fuzz/make_seeds.py "$1" "$dir"
}
status=0
for t in "${targets[@]}"; do
  seed "$t"
  echo "== fuzz_$t for ${seconds}s (corpus $root/$t)"
  keep_going=()
  [ "${FUZZ_KEEP_GOING:-0}" = 1 ] && keep_going=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  build-fuzz/fuzz_"$t" "$root/$t" "${keep_going[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$root/artifacts/${t}-" -print_final_stats=1 2>&1 | tail -n 12 || status=1
done
exit $status
