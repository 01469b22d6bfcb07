# make        build (Release) into build/
# make test   set up, build, run unit tests, the malformed-model corpus and ONNX conformance,
#             the lab, Python and Triton-backend tests, and the sanitizer runs (make sanitize)
# make demo   set up, build, generate a small model, inspect it, run it
# make serve-demo  serve the demo model with Triton Inference Server (Peregrine backend), query it
# make fuzz   build the libFuzzer targets (clang) and run each for FUZZ_SECONDS
# make sanitize  unit tests and the malformed-model corpus under ASan + UBSan, threading under TSan
# make format-check  the C++ lines changed since FORMAT_BASE (default HEAD~1) against .clang-format
# make tidy   clang-tidy (.clang-tidy) on the C++ sources changed since TIDY_BASE (default HEAD~1)
BUILD ?= build
JOBS ?= $(shell nproc)
PEREGRINE := $(BUILD)/bin/peregrine

.PHONY: all setup build test demo serve-demo unit conformance robustness lab-tests python-tests serving-tests build-tests fuzz sanitize clean format-check tidy

# Paths below the checkout hashed relative to it, so the wheel's build folder (build-wheel/)
# and build/ can share compiled objects through ccache.
export CCACHE_BASEDIR := $(CURDIR)
PYTHON_VENV := $(BUILD)/python-venv

all: build

setup:
	@scripts/setup.sh

# Warnings are errors here (and so in CI); compile_commands.json is for clang-tidy.
build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPEREGRINE_WERROR=ON \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

FORMAT_BASE ?= HEAD~1
format-check:
	@scripts/check_format.sh $(FORMAT_BASE)

TIDY_BASE ?= HEAD~1
tidy: build
	@files=$$(git diff --name-only --diff-filter=d $(TIDY_BASE) -- 'src/*.cc' 'tools/*.cc'); \
	  if [ -z "$$files" ]; then echo "tidy: no C++ sources changed since $(TIDY_BASE)"; \
	  else clang-tidy -p $(BUILD) --quiet --extra-arg=-Wno-unknown-warning-option $$files; fi

# PEREGRINE_POISON_OUTPUTS=1: output blocks a kernel promises to overwrite start as NaN, so a
# kernel that leaves elements unwritten fails its tests.
unit: build
	PEREGRINE_POISON_OUTPUTS=1 $(BUILD)/bin/peregrine_unit_tests --gtest_brief=1

robustness: build
	python3 tests/robustness/run_corpus.py --peregrine $(PEREGRINE)

# The newest onnx's node tests: its wheel ships case definitions, not data, so they are written
# once (seeded) by tests/conformance/generate_node_tests.py run in a venv holding that onnx.
ONNX_NEWEST := 1.23.2
ONNX_NEWEST_VENV := $(HOME)/.cache/peregrine/onnx-$(ONNX_NEWEST)-venv
ONNX_NEWEST_TESTS := $(BUILD)/onnx-$(ONNX_NEWEST)-node

$(ONNX_NEWEST_TESTS): tests/conformance/generate_node_tests.py
	@[ -x $(ONNX_NEWEST_VENV)/bin/python ] && $(ONNX_NEWEST_VENV)/bin/python -c "import onnx; assert onnx.__version__ == '$(ONNX_NEWEST)'" 2>/dev/null || \
	  { rm -rf $(ONNX_NEWEST_VENV) && python3 -m venv $(ONNX_NEWEST_VENV) && \
	    $(ONNX_NEWEST_VENV)/bin/pip install -q --disable-pip-version-check onnx==$(ONNX_NEWEST) numpy==2.4.6; }
	$(ONNX_NEWEST_VENV)/bin/python tests/conformance/generate_node_tests.py -o $@

conformance: build $(ONNX_NEWEST_TESTS)
	@echo "onnx $(ONNX_NEWEST)'s node tests (default-domain opsets 1..28):"
	PEREGRINE_POISON_OUTPUTS=1 $(BUILD)/bin/peregrine_conformance --data $(ONNX_NEWEST_TESTS) --expected-failures tests/conformance/expected_failures_onnx_1.23.txt
	$(BUILD)/bin/peregrine_conformance --data $(ONNX_NEWEST_TESTS) --expected-failures tests/conformance/expected_failures_onnx_1.23.txt -O0 --backend reference
	@echo "onnx 1.17's node tests (the pinned onnx; cases the newer suite changed or dropped):"
	PEREGRINE_POISON_OUTPUTS=1 $(BUILD)/bin/peregrine_conformance --expected-failures tests/conformance/expected_failures.txt
	@echo "the same tests without graph optimizations (-O0) and on reference kernels only:"
	$(BUILD)/bin/peregrine_conformance --expected-failures tests/conformance/expected_failures.txt -O0 --backend reference
	@echo "models exported by torch.onnx.export (onnx's pytorch-converted and pytorch-operator suites):"
	$(BUILD)/bin/peregrine_conformance --suite pytorch-converted
	$(BUILD)/bin/peregrine_conformance --suite pytorch-operator

# Performance-lab scripts (model zoo, side-by-side with ONNX Runtime, profile report in
# headless Chromium): every tests/lab/test_*.py, each taking --peregrine PATH.
lab-tests: build
	@set -e; for t in tests/lab/test_*.py; do echo "== $$t"; python3 $$t --peregrine $(PEREGRINE); done

# The Python package as a user installs it: `pip install .` (an isolated build of the wheel)
# into a virtual environment that sees the pinned numpy / onnx / onnxruntime, then pytest.
python-tests: build
	@[ -x $(PYTHON_VENV)/bin/python ] || python3 -m venv --system-site-packages $(PYTHON_VENV)
	$(PYTHON_VENV)/bin/pip install -q --disable-pip-version-check pytest==9.2.0 . -C build-dir=build-wheel
	cd python/tests && ../../$(PYTHON_VENV)/bin/python -m pytest -q -p no:cacheprovider .

# The Triton backend under a real Triton server on loopback (tests/serving/): the server wheel
# and the clients go into their own venv, made once under ~/.cache/peregrine.
serving-tests: build
	python3 tests/serving/test_triton.py --peregrine $(PEREGRINE)

# The build itself: the layer check refuses back-edges; the installed package (cmake --install)
# serves a project outside the tree (examples/cpp).
build-tests: build
	python3 tests/cmake/test_check_layers.py $(BUILD)
	tests/cmake/test_install.sh $(BUILD)

test: format-check unit robustness conformance lab-tests python-tests serving-tests build-tests sanitize

# Coverage-guided fuzzing (tests/fuzz/run_fuzz.sh): corpora and findings outside the checkout,
# in ~/.cache/peregrine/fuzz. docs/RELIABILITY.md says what is fuzzed and how to replay a finding.
FUZZ_SECONDS ?= 60
fuzz: setup
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run_fuzz.sh

# Sanitizer builds from CMakePresets.json (build-asan/, build-tsan/): every unit test and the
# malformed-model corpus under ASan + UBSan; the thread pool, GEMM / conv threading and
# session tests under TSan.
TSAN_TESTS := ThreadPool*:CpuConv*:*Gemm*:*Attention*:Session*
sanitize: setup
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS) --target peregrine_unit_tests peregrine
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/bin/peregrine_unit_tests --gtest_brief=1
	ASAN_OPTIONS=detect_leaks=1 python3 tests/robustness/run_corpus.py --peregrine build-asan/bin/peregrine
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS) --target peregrine_unit_tests
	TSAN_OPTIONS=halt_on_error=1 build-tsan/bin/peregrine_unit_tests --gtest_brief=1 --gtest_filter='$(TSAN_TESTS)'

demo: build
	scripts/demo.sh $(PEREGRINE)

# The demo model served by Triton Inference Server through the Peregrine backend, then queried.
serve-demo: build
	python3 scripts/serve_demo.py $(PEREGRINE)

clean:
	rm -rf $(BUILD) build-wheel build-asan build-tsan build-fuzz
