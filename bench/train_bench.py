#!/usr/bin/env python3
"""train_bench.py - training steps per second on the CPU backend: fp32 vs AMP, and the cost of
the loss-scaling subgraphs.

For each digits model (models/digits_*.onnx) builds the training graph (Adam, cross-entropy) and
two rewrites of it: AMP fp16 without loss scaling (`--loss-scale off`) and AMP fp16 with dynamic
loss scaling (the default). Trains each for --steps steps on models/data/digits.npz with one
thread and reads the median step time `mpc run --train` prints (evaluation excluded). The three
variants run interleaved, --rounds times; the best median of each is reported. The loss-scaling
overhead is dynamic / off - 1 (the bar: under 5% of a step on the MLP). On the CPU, 16-bit
emulation is not expected to be faster than fp32. A benchmark, not a test.

usage: python3 bench/train_bench.py --mpc build/tools/mpc [--steps 400] [--rounds 5]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"digits_mlp": 32, "digits_cnn": 32}


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{r.stderr}")
    return r


def step_ms(mpc, model, batch, steps):
    r = run([mpc, "run", model, "--train", "--data",
             os.path.join(ROOT, "models", "data", "digits.npz"), "--batch", str(batch),
             "--steps", str(steps), "--holdout", "0", "--threads", "1", "--seed", "1"])
    return float(re.search(r"median ([0-9.]+) ms per step", r.stderr).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print("| model | batch | fp32 ms/step | AMP (no scaling) ms/step | AMP + dynamic loss scaling "
          "ms/step | AMP / fp32 | loss-scaling overhead |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch in MODELS.items():
            train = os.path.join(tmp, f"{name}.train.onnx")
            run([args.mpc, "train-graph", os.path.join(ROOT, "models", f"{name}.onnx"),
                 "--loss", "cross-entropy", "--optimizer", "adam", "-o", train])
            variants = {"fp32": train}
            for mode in ("off", "dynamic"):
                variants[mode] = os.path.join(tmp, f"{name}.{mode}.onnx")
                run([args.mpc, "rewrite", train, "--loss-scale", mode, "-o", variants[mode]])
            best = {k: float("inf") for k in variants}
            for _ in range(args.rounds):
                for k, path in variants.items():
                    best[k] = min(best[k], step_ms(args.mpc, path, batch, args.steps))
            print(f"| {name} | {batch} | {best['fp32']:.4f} | {best['off']:.4f} | "
                  f"{best['dynamic']:.4f} | {best['dynamic'] / best['fp32']:.2f}x | "
                  f"{100 * (best['dynamic'] / best['off'] - 1):+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
