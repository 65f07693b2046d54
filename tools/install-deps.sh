#!/usr/bin/env bash
# install-deps.sh - install everything mpc needs to build and test, idempotently.
#
# Debian packages for the build, pip packages for the test oracles only. CI runs
# this same script, so a fresh machine and CI are set up the same way.
set -euo pipefail

debs=(cmake ninja-build g++ clang-14 llvm-14-dev llvm-14-tools libclang-rt-14-dev
      libonnx-dev libprotobuf-dev protobuf-compiler libgtest-dev libopenblas-dev
      libgoogle-perftools-dev graphviz python3 python3-pip)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Test oracles (never linked into mpc): the ONNX checker, reference evaluator and
# backend test data of onnx 1.22, numpy, and onnxruntime for benchmarks.
py=${PYTHON:-python3}
if ! "$py" -c 'import onnx, numpy, onnxruntime, sys; sys.exit(0 if onnx.__version__.startswith("1.22.") else 1)' 2>/dev/null; then
  "$py" -m pip install -q --disable-pip-version-check "onnx==1.22.*" numpy onnxruntime 2>&1 \
    | grep -v "Running pip as the 'root' user" || true
fi
"$py" -c 'import onnx, numpy, onnxruntime' 
echo "install-deps: ok"
