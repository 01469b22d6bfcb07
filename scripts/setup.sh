#!/usr/bin/env bash
# Installs what building and testing Peregrine needs. Idempotent: when everything
# is present it only checks, in a second or two.
set -euo pipefail

# chromium: tests/lab/test_report.py renders the profile report headless.
# clang-format, clang-tidy: make format-check (part of make test) and make tidy.
# curl: tests/serving/ queries the Triton server's REST API with it.
APT_PACKAGES=(cmake ninja-build g++ libprotobuf-dev protobuf-compiler libgtest-dev ccache libsqlite3-dev chromium
              clang-format clang-tidy curl)
# nanobind: the Python module built with the main build (the wheel pins its own, pyproject.toml).
PIP_PACKAGES=(onnx==1.17.0 numpy==2.4.6 onnxruntime==1.32.0 openvino==2026.4.1 nanobind==3.1.0)

# The Python module needs the interpreter's headers (a pyenv / python.org build has them).
PY=${PYTHON:-python3}
if ! [ -f "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
  APT_PACKAGES+=(python3-dev)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

need_pip=()
for spec in "${PIP_PACKAGES[@]}"; do
  name=${spec%%==*}; want=${spec##*==}
  have=$($PY -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)
  [ "$have" = "$want" ] || need_pip+=("$spec")
done
if ((${#need_pip[@]})); then
  echo "setup: installing Python packages: ${need_pip[*]}"
  $PY -m pip install -q --disable-pip-version-check "${need_pip[@]}"
fi
