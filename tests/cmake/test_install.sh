#!/usr/bin/env bash
# The installed package as another project uses it: `cmake --install` into a temporary prefix,
# examples/cpp built against that prefix alone (so the public headers must stand by themselves),
# run on a small model, its output checked.
#   tests/cmake/test_install.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" >/dev/null
headers=$(cd "$tmp/prefix/include" && ls)
[ "$headers" = "peregrine" ] || { echo "FAIL installed include/ holds $headers, not just peregrine/"; exit 1; }
cmake -S examples/cpp -B "$tmp/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/example" >/dev/null
python3 - "$tmp/add_relu.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
b = numpy_helper.from_array(np.array([2, -3, 0.5, -1], np.float32), "b")
graph = helper.make_graph(
    [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
    "add_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
PY
got=$("$tmp/example/run_model" "$tmp/add_relu.onnx" 2)
want="y: [1,4] 3 0 1.5 0"
[ "$got" = "$want" ] || { echo "FAIL run_model printed '$got', expected '$want'"; exit 1; }
# Node timings through the public profiling record: one line per node of the optimized graph,
# its kernel and a duration.
profile=$("$tmp/example/run_model" "$tmp/add_relu.onnx" 1 --profile 2>&1 >/dev/null)
[ -n "$profile" ] || { echo "FAIL run_model --profile printed no node timings"; exit 1; }
while read -r node op kernel us; do
  [[ "$kernel" == cpu/* || "$kernel" == reference* ]] && [[ "$us" =~ ^[0-9]+\.[0-9]$ ]] ||
    { echo "FAIL run_model --profile line '$node $op $kernel $us'"; exit 1; }
done <<< "$profile"
set +e
err=$("$tmp/example/run_model" "$tmp/missing.onnx" 2>&1)
code=$?
set -e
[ $code -eq 2 ] && [[ "$err" == *missing.onnx* ]] || { echo "FAIL a missing model: exit $code, '$err'"; exit 1; }
echo "ok   installed package: find_package(Peregrine), the public headers alone, a run and a profiled run through the C++ API"
