#!/bin/sh
# Regenerates docs/loss-scaling.svg: the seeds' figure with mpc. The tanh MLP of
# models/digits_tanh_mlp.onnx, its loss weighted by 2^-20 so that its gradients lie below
# fp16's subnormal range, trained on the digits set three ways for the same steps and seed:
# fp32, fp16 without loss scaling, fp16 with dynamic loss scaling.
#
#   sh docs/loss-scaling.sh [build/tools/mpc]
set -eu
MPC=${1:-build/tools/mpc}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$MPC" train-graph "$ROOT/models/digits_tanh_mlp.onnx" --loss cross-entropy --optimizer adam \
  --lr 0.003 --loss-weight 9.5367431640625e-07 --expose-gradients -o "$OUT/fp32.onnx"
"$MPC" rewrite "$OUT/fp32.onnx" --loss-scale off -o "$OUT/fp16-unscaled.onnx"
"$MPC" rewrite "$OUT/fp32.onnx" -o "$OUT/fp16-scaled.onnx"
for m in fp32 fp16-unscaled fp16-scaled; do
  "$MPC" run "$OUT/$m.onnx" --train --data "$ROOT/models/data/digits.npz" --batch 64 \
    --steps 300 --seed 7 --eval-every 100 --log "$OUT/$m.csv"
done
"$MPC" plot "$OUT/fp32.csv" "$OUT/fp16-unscaled.csv" "$OUT/fp16-scaled.csv" \
  --label "fp32" --label "fp16, no loss scaling" --label "fp16, dynamic loss scaling" \
  --log-y --title "digits tanh MLP, loss x 2^-20: training loss" -o "$ROOT/docs/loss-scaling.svg"
for m in fp32 fp16-unscaled fp16-scaled; do
  printf '%s: ' "$m"
  python3 - "$OUT/$m.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
zero = [float(r["grad_zero_frac"]) for r in rows if r["grad_zero_frac"]]
last = [float(r["loss"]) for r in rows[-20:]]
acc = [r["eval_accuracy"] for r in rows if r["eval_accuracy"]]
print(f"first loss {float(rows[0]['loss']):.4g}, last-20 mean {sum(last)/len(last):.4g}, "
      f"zero gradients {sum(zero)/len(zero):.3f}, held-out accuracy {acc[-1]}")
PY
done
