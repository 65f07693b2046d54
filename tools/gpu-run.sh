#!/usr/bin/env bash
# run.sh OUT: the GPU checks of an mpc bundle (made by tools/gpu-bundle.sh; this file is
# tools/gpu-run.sh in the repository). Writes OUT/report.md (a table of the steps and what
# each printed last), OUT/results.json (every step: name, status, seconds, exit code, its
# summary line) and OUT/log.txt (everything the steps printed). The report is rewritten
# after each step, so a run cut short still returns what it did.
#
# Environment: GPU_RUN_DEADLINE (seconds for the whole run, default 390: steps that would
# start past it are recorded as not run), GPU_RUN_STEPS (space-separated step names to run,
# default all), GPU_RUN_WORK (where the payload is unpacked, default /tmp/mpc-bundle),
# GPU_CONFORMANCE_FROM (conformance_node runs the node tests from this name on).
set -u
OUT=${1:?usage: run.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=${GPU_RUN_DEADLINE:-390}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run.sh: no GPU present (nvidia-smi lists none); nothing was run" | tee "$OUT/report.md"
  exit 1
fi

WORK=${GPU_RUN_WORK:-/tmp/mpc-bundle}
rm -rf "$WORK" && mkdir -p "$WORK" && tar -xJf "$HERE/payload.tar.xz" -C "$WORK" || {
  echo "run.sh: cannot unpack $HERE/payload.tar.xz into $WORK"; exit 1; }

# cuBLASLt and cuDNN from this machine: the CUDA install or a Python wheel's folder.
find_lib_dir() {
  local name=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
           /usr/local/cuda-*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$name" ] && { echo "$d"; return; }
  done
  d=$(python3 - "$name" 2>/dev/null <<'EOF'
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for p in glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(p)); raise SystemExit
EOF
)
  [ -n "$d" ] && echo "$d"
}
CUBLAS_DIR=$(find_lib_dir libcublasLt.so.13)
[ -n "$CUBLAS_DIR" ] || { echo "run.sh: libcublasLt.so.13 not found on this machine"; exit 1; }
LIBPATH="$WORK/lib:$CUBLAS_DIR"
# cuDNN 9 (the conv family; nvidia-cudnn-cu13's nvidia/cudnn/lib where the CUDA install lacks it).
# mpc's CUDA backend (lib/libmpc_cuda_backend.so) links libcudnn.so.9, which loads its
# sub-libraries from its own folder.
if ldd "$WORK/lib/libmpc_cuda_backend.so" 2>/dev/null | grep -q 'libcudnn\.so'; then
  CUDNN_DIR=$(find_lib_dir libcudnn.so.9)
  [ -n "$CUDNN_DIR" ] || { echo "run.sh: libcudnn.so.9 not found on this machine (the bundle's CUDA backend links cuDNN 9)"; exit 1; }
  [ "$CUDNN_DIR" = "$CUBLAS_DIR" ] || LIBPATH="$LIBPATH:$CUDNN_DIR"
fi
# libstdc++ must be at least as new as the one the bundle was built with.
need=$(cat "$WORK/lib/GLIBCXX_NEEDED" 2>/dev/null)
stdcxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
if [ -n "$need" ] && [ -n "$stdcxx" ] && ! strings "$stdcxx" | grep -qx "$need"; then
  echo "run.sh: $stdcxx lacks $need, which the bundle needs"; exit 1
fi

# Wrappers: the binaries see the bundle's libraries, the Python that runs the suites does not.
mkdir -p "$WORK/bin"
for exe in "$WORK"/libexec/*; do
  n=$(basename "$exe")
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
    "$LIBPATH" "$exe" > "$WORK/bin/$n"
  chmod +x "$WORK/bin/$n"
done
BIN=$WORK/bin
SRC=$WORK/src
MPC=$BIN/mpc
export PYTHONUNBUFFERED=1
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)

LOG=$OUT/log.txt
: > "$LOG"
RESULTS=()   # "name|status|seconds|rc|summary"

json_escape() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().rstrip("\n")))'; }

write_report() {
  {
    echo "# mpc GPU bundle report"
    echo
    echo "- bundle: $(head -1 "$WORK/VERSION") ($(tail -1 "$WORK/VERSION"))"
    echo "- machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
    echo "- cuBLASLt from: $CUBLAS_DIR"
    echo "- started: $(date -u -d "@$START" +%FT%TZ), elapsed $(( $(date +%s) - START )) s"
    echo
    echo "| step | status | seconds | summary |"
    echo "| --- | --- | --- | --- |"
    local r
    for r in "${RESULTS[@]}"; do
      IFS='|' read -r n s t c m <<<"$r"
      echo "| $n | $s | $t | ${m//|/\\|} |"
    done
  } > "$OUT/report.md"
  {
    echo "{\"bundle\": $(head -1 "$WORK/VERSION" | json_escape), \"steps\": ["
    local first=1
    for r in "${RESULTS[@]}"; do
      IFS='|' read -r n s t c m <<<"$r"
      [ $first = 1 ] || echo ","
      first=0
      printf '{"name": "%s", "status": "%s", "seconds": %s, "rc": %s, "summary": %s}' \
        "$n" "$s" "$t" "$c" "$(printf '%s' "$m" | json_escape)"
    done
    echo "]}"
  } > "$OUT/results.json"
}

wanted() { [ -z "${GPU_RUN_STEPS:-}" ] || [[ " $GPU_RUN_STEPS " == *" $1 "* ]]; }

# step NAME TIMEOUT CMD...: run CMD with a time limit; pass on exit 0, skip on 77.
step() {
  local name=$1 limit=$2; shift 2
  wanted "$name" || return 0
  local now left
  now=$(date +%s); left=$(( DEADLINE - (now - START) ))
  if [ "$left" -le 5 ]; then
    RESULTS+=("$name|not run|0|-1|past the run's deadline (${DEADLINE}s)"); write_report; return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name: $* (limit ${limit}s)" >> "$LOG"
  local t0 out rc status
  t0=$(date +%s)
  out=$(mktemp)
  timeout -k 5 "$limit" "$@" > "$out" 2>&1
  rc=$?
  cat "$out" >> "$LOG"
  case $rc in
    0) status=pass ;;
    77) status=skip ;;
    124|137) status="timed out" ;;
    *) status=FAIL ;;
  esac
  local summary
  # gtest's totals line, then the last line (a device run's "ran on the cpu" count).
  summary=$( { grep -E '^\[  (PASSED|FAILED) +\] [0-9]+ test' "$out" | head -2; grep -v '^\s*$' "$out" | tail -1; } \
             | awk '!seen[$0]++' | paste -sd'/' | cut -c1-600)
  RESULTS+=("$name|$status|$(( $(date +%s) - t0 ))|$rc|$summary")
  echo "=== $name: $status (exit $rc)" >> "$LOG"
  rm -f "$out"
  write_report
}

# 0. The device and the backend's availability check through the CLI.
step device 30 bash -c "nvidia-smi -L; nvcc --version | tail -1; $MPC run '$SRC/models/mlp.onnx' --device cuda --random-inputs 2>&1 | tail -3; exit \${PIPESTATUS[0]}"

# 0a. What one `mpc run --device cuda` process costs (the node conformance suite ran at about
#     3.8 s per test on each of 16 workers on the H100, against 0.05 s on the CPU): the
#     wall time of a small model's run, one at a time and 16 at once.
step cuda_startup 90 python3 "$SRC/bench/startup_bench.py" --mpc "$MPC" --source-dir "$SRC" --cuda-only --repeat 5 --parallel 16

# 1. The op-tester kernel suites on the CUDA backend (every case with a CUDA kernel,
#    checked against the float64 references; ops without one skip).
for t in RuntimeElementwiseTest RuntimeCastTest RuntimeGemmConvTest RuntimeReductionTest \
         RuntimeNormalizationTest RuntimePoolTest mpc_optest_tests mpc_training_ops_tests \
         RuntimeDataTest RuntimeRecurrentTest; do
  step "$t" 120 "$BIN/$t" --device cuda --gtest_brief=1
done
# 2. CUDA against CPU through `mpc run` (element-wise, casts, MatMul/Gemm in f32/f16/bf16).
step cuda_parity 180 python3 "$SRC/tests/cuda_host/test_cuda_parity.py" --mpc "$MPC" --source-dir "$SRC"
# 3. The gradient kernels on the CUDA backend.
#    Every case starts an mpc that initialises the device: eight at once (the 2026-11-26
#    H200 run reached 19 of its tests in 120 s one at a time).
step training_kernels 180 python3 "$SRC/tests/training_ops/test_training_kernels.py" --mpc "$MPC" --source-dir "$SRC" --device cuda --jobs 8
# 3a. The multi-tensor unscale (mpc rewrite --fused-unscale) on the device: the kernel bit for
#     bit against float64 numpy, and digits training with and without the flag byte-identical.
step fused_unscale 180 python3 "$SRC/tests/loss_scaling/test_fused_unscale.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# 3a'. The 16-bit weight copy the fused optimizer step writes (mpc rewrite
#     --optimizer-weight-copy) and the fused GEMM epilogues (--fuse-gemm-epilogues) on
#     the device: kernels against float64 numpy, training and outputs against the
#     unfused graphs.
step weight_copy 180 python3 "$SRC/tests/train/test_weight_copy.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# 3a''. The multi-tensor optimizer step (mpc rewrite --multi-tensor-optimizer) on the
#     device: one launch over every group against the float32 emulation, and digits
#     training with and without the flag byte-identical.
step multi_tensor_optimizer 240 python3 "$SRC/tests/train/test_multi_tensor_optimizer.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# 3a'''. In-place state updates (the trainer writes each updated state over its old value):
#     digits training per optimizer variant byte-identical to MPC_TRAIN_DOUBLE_BUFFER=1,
#     the decisions of --stats, resume, a late reader kept double-buffered.
step in_place_state 150 python3 "$SRC/tests/train/test_in_place_state.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# BiasGrad with a folded widening Cast: the same bits as the unfolded model on the GPU too.
step bias_grad_fold 120 python3 "$SRC/tests/train/test_bias_grad_fold.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
step gemm_epilogues 180 python3 "$SRC/tests/epilogues/test_gemm_epilogues.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# 3b. The contrib ops (FusedMatMul, ConvGrad) on the CUDA backend against onnxruntime.
step contrib_kernels 120 python3 "$SRC/tests/contrib/test_contrib_kernels.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# 3c. The Resize models of every opset (and their defaults) on the CUDA image kernels
#     against onnxruntime (--no-fallback for Resize).
step resize_models 120 python3 "$SRC/tests/runtime_exec/test_attribute_defaults.py" --mpc "$MPC" --source-dir "$SRC" --device cuda
# 4. End to end: each shipped model and its AMP rewrite on cuda against cpu.
step e2e_models 120 python3 "$SRC/tools/gpu_e2e.py" --mpc "$MPC" "$SRC"/models/*.onnx
# 4'. The real architectures (tests/train/torch_fixtures: ResNet-18, MobileNetV2, EfficientNet,
#     BERT, GPT, T5, ViT, LSTM, GRU, ...; the ONNX light models from the onnx wheel) and their
#     AMP rewrites on cuda against cpu, every node on the GPU (--no-fallback-expected).
step family_models 180 bash -c "python3 '$SRC/tools/gpu_e2e.py' --mpc '$MPC' --no-fallback-expected \$(ls '$SRC'/tests/train/torch_fixtures/*.onnx | grep -v -e '\.f64\.onnx' -e embedding_bag) \$(python3 -c 'import onnx, os; print(os.path.dirname(onnx.__file__))')/backend/test/data/light/*.onnx"
# 4a. The README's digits training, fp32 and AMP, 400 steps, on cuda against cpu.
step digits_train 180 python3 "$SRC/tools/gpu_train_check.py" --mpc "$MPC" --source-dir "$SRC"
# 4a+. Checkpoints across devices (written on cuda, resumed on cpu, and back) and a step whose
#      gradients overflow skipped on the device with every tensor unchanged.
step resume 120 python3 "$SRC/tools/gpu_resume_check.py" --mpc "$MPC" --source-dir "$SRC"
# 4a'. Recurrent training (models/lstm.onnx and a bidirectional GRU, fp32 and AMP, 100 steps)
#      on cuda against cpu: LSTM/GRU and LSTMGrad/GRUGrad on the device.
step rnn_train 180 python3 "$SRC/tools/gpu_rnn_train_check.py" --mpc "$MPC" --source-dir "$SRC"
# 4b. The user's own check: the GPU against the CPU reference through `mpc run`.
step compare_device 120 bash -c "set -eo pipefail; for m in mlp cnn transformer lstm; do $MPC run '$SRC/models/'\$m.onnx --device cuda --random-inputs --compare-device cpu | grep -E '^(cuda: |compare)'; done; $MPC run '$SRC/models/transformer.onnx' --device cuda --tf32 --random-inputs --compare-device cpu | grep -E '^(cuda: |compare)'; $MPC run '$SRC/models/cnn.onnx' --device cuda --random-inputs --profile | tail -12"
# 4c. Error paths: a failed launch (MPC_CUDA_FAIL_NODE), an index out of range, a plan
#     larger than the device: one line each, exit 1, nothing written.
step error_paths 60 python3 "$SRC/tools/gpu_error_check.py" --mpc "$MPC" --source-dir "$SRC"
# Training steps that never wait for the device (pinned readback ring, deferred kernel errors):
# median step time with and without a wait per step, identical logs, an index error and a
# failed launch inside a step reported at their step (tools/gpu_async_check.py).
step async_steps 180 python3 "$SRC/tools/gpu_async_check.py" --mpc "$MPC" --source-dir "$SRC"
# 4d. CUDA graph replay against eager launches (outputs byte-identical, both times).
step cuda_graph 120 python3 "$SRC/tools/gpu_graph_check.py" --mpc "$MPC" "$SRC"/models/*.onnx
# 5. First figures: MatMul through cuBLASLt and ResNet-50's convolutions through cuDNN, each
#    node against the bare PyTorch call of the same shape and type (bench/gpu_matmul.py).
step bench_matmul 150 bash -c "python3 '$SRC/bench/gpu_matmul.py' --mpc '$MPC' --sizes 1024,4096,8192 --repeat 10 --json '$OUT/bench_matmul.json' | tee '$OUT/bench_matmul.md'; exit \${PIPESTATUS[0]}"
# 5a'. Which cuBLASLt/cuDNN algorithms mpc's slow nodes ran against PyTorch's for the same call
#      (bench/gpu/library_trace.py: the libraries' logs and PyTorch's kernels).
step library_trace 120 python3 "$SRC/bench/gpu/library_trace.py" --mpc "$MPC" --out "$OUT" --timeout 50
# 5a''. Issue 15's "fused unscale + optimizer kernel's bytes per second against the memory
#     bandwidth" (bench/gpu/optimizer_bench.py): BERT-base's 110 M parameters through one
#     MultiTensorUnscale and one MultiTensorAdamStep (and the per-parameter AdamSteps), their
#     profiled time against a 1 GiB device copy's rate; goal >= 80%.
step bench_optimizer 150 bash -c "python3 '$SRC/bench/gpu/optimizer_bench.py' --mpc '$MPC' --out '$OUT' | tee '$OUT/optimizer_bench.md'; exit \${PIPESTATUS[0]}"
# 5b. Issue 15's step benchmark (bench/gpu/step_bench.py): mpc fp32/fp16/bf16 training steps
#     against PyTorch eager on BERT-base-, GPT-2-small- and ResNet-50-like models.
step step_bench 240 bash -c "python3 '$SRC/bench/gpu/step_bench.py' --mpc '$MPC' --steps 5 --run-timeout 60 --out '$OUT' | tee '$OUT/step_bench.md'; exit \${PIPESTATUS[0]}"
# 5b'. Where a training step's node time goes, by op type (step_bench.py --profile: each node
#      waited for), BERT-base- and GPT-2-small-like, every mpc precision: what issue 15 fuses next.
step step_profile 240 bash -c "mkdir -p '$OUT/step_profile'; python3 '$SRC/bench/gpu/step_bench.py' --mpc '$MPC' --models bert,gpt --no-torch --steps 3 --profile --run-timeout 60 --out '$OUT/step_profile' > '$OUT/step_profile/table.md' 2>&1; rc=\$?; cat '$OUT/step_profile/step_profile.md'; exit \$rc"
# 5c. The fused optimizer step (train-graph --fused-optimizer, one AdamStep per parameter)
#     against the element-wise update, BERT-base-like, every mpc precision in one run.
step step_bench_fused 300 bash -c "python3 '$SRC/bench/gpu/step_bench.py' --mpc '$MPC' --models bert --no-torch --fused-optimizer --fused-unscale --weight-copy --multi-tensor-optimizer --steps 5 --run-timeout 60 --out '$OUT/step_bench_fused' | tee '$OUT/step_bench_fused.md'; exit \${PIPESTATUS[0]}"
# 5c'. train-graph's rules that save passes over memory, before and after (step_bench.py
#     --plain-graph: fp16 from MPC_TRAIN_GRAPH_PLAIN=1 next to fp16; BERT and GPT, no PyTorch),
#     and --epilogues: fp16 with --fuse-gemm-epilogues next to fp16 (issue 15).
step step_bench_plain 240 bash -c "python3 '$SRC/bench/gpu/step_bench.py' --mpc '$MPC' --models bert,gpt --no-torch --plain-graph --epilogues --steps 5 --run-timeout 60 --out '$OUT/step_bench_plain' | tee '$OUT/step_bench_plain.md'; exit \${PIPESTATUS[0]}"
# 5d. Issue 15's largest batch that fits, fp32 against AMP (step_bench.py --max-batch): the
#     BERT-base-like model, mpc held to the device's memory (--max-memory), PyTorch eager until
#     CUDA runs out; doubling from 128 then bisection, up to 1024 (the H100 run of 2026-11-26
#     fitted 256, the old limit, in every precision; at most 9 runs of 40 s each per
#     precision); the activation memory of each precision at the bench batch against fp32's.
step step_bench_max_batch 300 bash -c "python3 '$SRC/bench/gpu/step_bench.py' --mpc '$MPC' --models bert --steps 1 --max-batch --max-memory \$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)MiB --max-batch-start 128 --max-batch-limit 1024 --run-timeout 40 --out '$OUT/step_bench_max_batch' | tee '$OUT/step_bench_max_batch.md'; exit \${PIPESTATUS[0]}"
# 6. The ONNX node conformance suite on the CUDA backend.
node_dir=()
[ -d "$WORK/onnx-node" ] && node_dir=(--node-dir "$WORK/onnx-node")
# GPU_CONFORMANCE_FROM=NAME goes on from a run stopped at its limit (its first "still running").
step conformance_node 400 python3 "$SRC/tests/conformance/test_node_conformance.py" --mpc "$MPC" \
  --source-dir "$SRC" --device cuda --timeout 30 --from "${GPU_CONFORMANCE_FROM:-}" "${node_dir[@]}"
# 7. compute-sanitizer over the kernel suites (memcheck; racecheck on the element-wise suite).
if [ -n "$SANITIZER" ]; then
  for t in RuntimeElementwiseTest RuntimeCastTest RuntimeGemmConvTest RuntimeDataTest \
           RuntimeRecurrentTest; do
    step "memcheck_$t" 60 "$SANITIZER" --tool memcheck --target-processes all --error-exitcode 3 \
      --print-limit 20 "$BIN/$t" --device cuda --gtest_brief=1
  done
  step racecheck_RuntimeElementwiseTest 60 "$SANITIZER" --tool racecheck --target-processes all \
    --error-exitcode 3 --print-limit 20 "$BIN/RuntimeElementwiseTest" --device cuda --gtest_brief=1
else
  RESULTS+=("compute-sanitizer|not run|0|-1|compute-sanitizer not found"); write_report
fi
write_report
echo "run.sh: report in $OUT/report.md"
grep -q '| FAIL |\|timed out' "$OUT/report.md" && exit 1
exit 0
