#!/usr/bin/env bash
# tools/gpu-bundle.sh [--no-build] [BUNDLE_DIR]: build mpc with the CUDA backend here and pack, into one
# folder (default gpu-bundle/, ignored by git), everything a GPU machine with no package
# registry needs to check that backend: the stripped `mpc`, its CUDA backend plugin
# (lib/libmpc_cuda_backend.so) and the GPU test binaries, the shared
# libraries such a machine lacks (libonnx, libprotobuf, OpenBLAS, ...; cuBLASLt and the
# driver are found there), the sources of the Python test suites, the shipped models and
# data, and `run.sh OUT`, which runs the checks and writes OUT/report.md and
# OUT/results.json (docs/gpu-report.md says how a run is recorded).
#
# Environment: BUILD_DIR (default build-gpu: a Release build with MPC_ENABLE_CUDA=ON, kept
# between calls), JOBS (default: all cores). --no-build packs what BUILD_DIR already holds
# (the `gpu_bundle` test packs the build it tests). The folder must stay under 40 MiB; the
# script fails if it does not.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NO_BUILD=0
if [ "${1:-}" = "--no-build" ]; then NO_BUILD=1; shift; fi
BUNDLE=${1:-$ROOT/gpu-bundle}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
LIMIT_BYTES=$((40 * 1024 * 1024))

die() { echo "gpu-bundle: $*" >&2; exit 1; }

command -v nvcc >/dev/null || die "nvcc is not on PATH: the bundle needs the CUDA toolkit"

# The binaries the checks run. Each DEVICES test takes `--device cuda`.
DEVICE_TESTS=(RuntimeElementwiseTest RuntimeCastTest RuntimeGemmConvTest RuntimeReductionTest
              RuntimeNormalizationTest RuntimePoolTest mpc_optest_tests mpc_training_ops_tests
              RuntimeDataTest RuntimeRecurrentTest)
TARGETS=(mpc "${DEVICE_TESTS[@]}")
# The CUDA backend mpc opens for --device cuda (built with mpc): lib/ of the bundle, which
# is ../lib from libexec/mpc, where mpc looks for it.
PLUGIN=libmpc_cuda_backend.so

if [ "$NO_BUILD" = 1 ]; then
  grep -q '^MPC_HAVE_CUDA:INTERNAL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
    die "$BUILD is not a build with the CUDA backend (MPC_HAVE_CUDA is not set in its cache)"
else
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                                          -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fresh=()
# A new build folder is a Release build (with Ninja where there is one); an existing one
# keeps its generator and build type.
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  fresh=(-DCMAKE_BUILD_TYPE=Release)
  command -v ninja >/dev/null && fresh+=(-G Ninja)
fi
cmake -S "$ROOT" -B "$BUILD" "${fresh[@]}" -DMPC_ENABLE_CUDA=ON "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target "${TARGETS[@]}"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/libexec" "$stage/lib" "$stage/src"

find_exe() { find "$BUILD" -type f -name "$1" -perm -u+x | head -1; }
for t in "${TARGETS[@]}"; do
  exe=$(find_exe "$t")
  [ -n "$exe" ] || die "built target $t not found under $BUILD"
  strip -o "$stage/libexec/$t" "$exe"
done
[ -f "$BUILD/lib/$PLUGIN" ] || die "the CUDA backend $BUILD/lib/$PLUGIN was not built"
strip -o "$stage/lib/$PLUGIN" "$BUILD/lib/$PLUGIN"

# Shared libraries: everything the binaries load except the C library family (the GPU
# machine has its own, of a newer glibc), the driver and cuBLAS/cuBLASLt/cuDNN (large; the
# CUDA 13 install there provides them). libcudart is small and travels, so its version is
# the one the backend was compiled against.
skip_re='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libcuda\.|libcublas|libcudnn|libstdc\+\+|libgcc_s)'
for exe in "$stage"/libexec/* "$stage/lib/$PLUGIN"; do
  ldd "$exe" | awk '/=>/ {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip_re ]] && continue
  [ -f "$path" ] || die "library $name not found here (ldd gave '$path')"
  cp -L "$path" "$stage/lib/$name"
done
# libstdc++ and libgcc_s: the GPU machine's are at least as new as Debian 12's (GCC 12); the
# run script checks that the symbol versions this build needs are there.
strings "$stage/libexec/mpc" "$stage/lib/$PLUGIN" | grep -E '^GLIBCXX_[0-9.]+$' | sort -Vu | tail -1 > "$stage/lib/GLIBCXX_NEEDED"

# Sources the Python suites and the end-to-end checks read: the tracked and untracked
# (not ignored) files of tests/, models/, tools/ and docs/.
(cd "$ROOT" && git ls-files -co --exclude-standard -- tests models tools bench docs README.md \
   | tar -cf - -T -) | tar -xf - -C "$stage/src"
# The ONNX backend node tests of the onnx package here (the GPU machine's wheel ships none).
node_dir=$(python3 -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node"))' 2>/dev/null || true)
if [ -n "$node_dir" ] && [ -d "$node_dir" ]; then
  cp -r "$node_dir" "$stage/onnx-node"
else
  echo "gpu-bundle: no onnx node tests here (python3 -c 'import onnx' failed): the conformance step will skip" >&2
fi
(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown) > "$stage/VERSION"
nvcc --version | tail -1 >> "$stage/VERSION"

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"
# One solid archive with a large dictionary: the binaries share most of their code.
(cd "$stage" && tar -cf - libexec lib src VERSION $(ls -d onnx-node 2>/dev/null)) | xz -9e -T1 > "$BUNDLE/payload.tar.xz"
cp "$ROOT/tools/gpu-run.sh" "$BUNDLE/run.sh"
chmod +x "$BUNDLE/run.sh"

size=$(du -sb "$BUNDLE" | cut -f1)
[ "$size" -le "$LIMIT_BYTES" ] || die "bundle is $size bytes, over the 40 MiB limit"
echo "gpu-bundle: $BUNDLE ($((size / 1024)) KiB): $(cat "$stage/VERSION" | head -1)"
