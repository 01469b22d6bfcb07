#!/usr/bin/env bash
# The C++ lines changed since BASE (default: the previous commit) as clang-format (.clang-format)
# would write them; exits 1 with the diff where they differ. Only changed lines are checked, so
# older code is not reformatted wholesale.
#   scripts/check_format.sh [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-HEAD~1}
if ! command -v clang-format >/dev/null || ! git rev-parse --verify -q "$BASE" >/dev/null; then
  echo "format check skipped (no clang-format, or no commit $BASE)"
  exit 0
fi
diff=$(git clang-format --binary clang-format --diff "$BASE" -- '*.cc' '*.h' || true)
case "$diff" in
  ""|"no modified files to format"|"clang-format did not modify any files")
    echo "format: the C++ lines changed since $BASE follow .clang-format" ;;
  *)
    echo "$diff"
    echo "format: the lines above differ from .clang-format (fix: git clang-format $BASE)" >&2
    exit 1 ;;
esac
