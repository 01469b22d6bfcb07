"""onnx's own backend test suite run through peregrine.backend (the Backend interface).

The whole node suite runs in C++ (tests/conformance, `make conformance`); here a cross-section
of op families checks that the Python backend interface itself is right: inputs by position,
outputs as a tuple, models of every shape the suite builds."""

import onnx.backend.test

import peregrine.backend

backend_test = onnx.backend.test.BackendTest(peregrine.backend, __name__)
backend_test.include(
    r"^test_(abs|add|averagepool_2d|batchnorm|cast_FLOAT_to|concat|conv|gemm|identity|"
    r"matmul|maxpool_2d|relu|reshape|resize_upsample|slice|softmax|split|transpose|where)"
    r"[a-z0-9_]*_cpu$")
# Covered by tests/conformance/expected_failures.txt with a reason each.
backend_test.exclude(r"(_expanded|FLOAT8|BFLOAT16|_INT4|_UINT4)")

# Only the selected cases: the others would be collected as thousands of skips.
cases = backend_test.test_cases
for case in cases.values():
    for name in [n for n in vars(case) if n.startswith("test_")]:
        if getattr(getattr(case, name), "__unittest_skip__", False):
            delattr(case, name)
globals().update(cases)
