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

With --baseline OLD_MPC (a binary of the tree before a change, copied somewhere stable) it
instead times the fp32 and AMP (dynamic loss scaling) step of each model with both binaries,
interleaved, and reports the bytes copied between host and backend memory per step
(`mpc run --train --stats`; the old path's numbers come from the same binary with
MPC_TRAIN_HOST_STATE=1, which copies the state around each step as the old trainer did).

usage: python3 bench/train_bench.py --mpc build/tools/mpc [--steps 400] [--rounds 5]
       [--baseline /tmp/mpc.old]
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


def train(mpc, model, batch, steps, *extra, env=None):
    r = subprocess.run([mpc, "run", model, "--train", "--data",
                        os.path.join(ROOT, "models", "data", "digits.npz"), "--batch",
                        str(batch), "--steps", str(steps), "--holdout", "0", "--threads", "1",
                        "--seed", "1", *extra], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"failed: {mpc} run {model}\n{r.stderr}")
    return r


def step_ms(mpc, model, batch, steps):
    r = train(mpc, model, batch, steps)
    return float(re.search(r"median ([0-9.]+) ms per step", r.stderr).group(1))


def per_step_bytes(mpc, model, batch, env=None):
    """(host->backend, backend->host, state copied, read back) bytes per step."""
    r = train(mpc, model, batch, 20, "--stats", env=env)
    m = re.search(r"per step: (\d+) bytes host->backend, (\d+) bytes backend->host, (\d+) "
                  r"bytes of state copied, (\d+) bytes read back", r.stderr)
    return tuple(int(x) for x in m.groups())


def compare(args, tmp):
    """New binary against --baseline: step times and bytes per step."""
    print("| model | variant | old ms/step | new ms/step | new / old | bytes per step before: "
          "in / out / state copied on the host | after: in / out / state / read back |")
    print("|---|---|---|---|---|---|---|")
    for name, batch in MODELS.items():
        train_path = os.path.join(tmp, f"{name}.train.onnx")
        run([args.mpc, "train-graph", os.path.join(ROOT, "models", f"{name}.onnx"),
             "--loss", "cross-entropy", "--optimizer", "adam", "-o", train_path])
        amp = os.path.join(tmp, f"{name}.amp.onnx")
        run([args.mpc, "rewrite", train_path, "-o", amp])
        for variant, path in (("fp32", train_path), ("AMP", amp)):
            best = {"old": float("inf"), "new": float("inf")}
            for _ in range(args.rounds):
                best["old"] = min(best["old"], step_ms(args.baseline, path, batch, args.steps))
                best["new"] = min(best["new"], step_ms(args.mpc, path, batch, args.steps))
            before = per_step_bytes(args.mpc, path, batch, {"MPC_TRAIN_HOST_STATE": "1"})
            after = per_step_bytes(args.mpc, path, batch)
            print(f"| {name} | {variant} | {best['old']:.4f} | {best['new']:.4f} | "
                  f"{best['new'] / best['old']:.3f} | {before[0]} / {before[1]} / {before[2]} | "
                  f"{after[0]} / {after[1]} / {after[2]} / {after[3]} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", help="the binary of the tree before a change")
    args = ap.parse_args()
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            compare(args, tmp)
        return 0
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
