#!/usr/bin/env python3
"""The README's digits training on the CUDA backend against the CPU backend (GPU bundle).

    python3 tools/gpu_train_check.py --mpc MPC --source-dir SRC [--steps 400]

Builds the digits MLP's training graph (cross-entropy, Adam, lr 0.01) and its AMP rewrite
(fp16, dynamic loss scaling), as the README does, and trains each with
`mpc run --train --batch 32 --steps S --eval-every 100 --shuffle none --log` on
`--device cpu` and on `--device cuda`. Checks, per precision:
- the first 20 steps' losses agree within 1e-4 relative (fp32) or 1e-2 (AMP): the same
  batches, the same kernels' arithmetic up to summation order and device math functions
  (later steps may drift apart as any two float runs do);
- the final held-out accuracy is within 2 points of the CPU run's, and above 0.85;
- the number of skipped steps is the same within 2;
- on cuda, the log is byte-identical to that of the same run with `--cuda-graph off`
  (captured and replayed steps compute what node-by-node launches do);
and prints mpc's `cuda: N nodes; cpu fallback: ...` line. Last line: 'N passed, N failed'.
"""

import argparse
import csv
import os
import subprocess
import sys
import tempfile


def mpc(binary, *args):
    p = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"mpc {' '.join(map(str, args[:2]))}: exit {p.returncode}: "
                           f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return p


def log_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--devices", default="cpu,cuda",
                    help="reference and checked device (cpu,cpu checks this script itself)")
    a = ap.parse_args()
    passed = failed = 0
    devices = a.devices.split(",")
    data = os.path.join(a.source_dir, "models", "data", "digits.npz")
    with tempfile.TemporaryDirectory() as tmp:
        train = os.path.join(tmp, "digits.train.onnx")
        amp = os.path.join(tmp, "digits.amp.onnx")
        mpc(a.mpc, "train-graph", os.path.join(a.source_dir, "models", "digits_mlp.onnx"),
            "--loss", "cross-entropy", "--optimizer", "adam", "--lr", "0.01", "-o", train)
        mpc(a.mpc, "rewrite", train, "-o", amp)
        for label, model, tol in (("fp32", train, 1e-4), ("amp", amp, 1e-2)):
            runs = []
            try:
                for dev in devices:
                    log = os.path.join(tmp, f"{label}.{dev}.{len(runs)}.csv")
                    p = mpc(a.mpc, "run", model, "--train", "--device", dev, "--data", data,
                            "--batch", 32, "--steps", a.steps, "--eval-every", 100,
                            "--shuffle", "none", "--log", log)
                    runs.append((log_rows(log), p.stdout))
                if devices[1] == "cuda":
                    # The same run with every step launched node by node: the log is
                    # byte-identical to the one of the captured and replayed steps.
                    eager = os.path.join(tmp, f"{label}.eager.csv")
                    mpc(a.mpc, "run", model, "--train", "--device", "cuda", "--data", data,
                        "--batch", 32, "--steps", a.steps, "--eval-every", 100,
                        "--shuffle", "none", "--log", eager, "--cuda-graph", "off")
                    with open(eager, "rb") as f1, open(log, "rb") as f2:
                        same_as_eager = f1.read() == f2.read()
                else:
                    same_as_eager = True
            except RuntimeError as e:
                failed += 1
                print(f"FAIL {label}: {e}")
                continue
            (cpu, _), (gpu, out) = runs
            problems = []
            for i in range(min(20, len(cpu))):
                c, g = float(cpu[i]["loss"]), float(gpu[i]["loss"])
                if abs(c - g) > tol * max(abs(c), 1e-12):
                    problems.append(f"step {i + 1} loss {g} vs cpu {c}")
                    break
            ac, ag = [float(r["eval_accuracy"]) for r in cpu if r.get("eval_accuracy")], \
                     [float(r["eval_accuracy"]) for r in gpu if r.get("eval_accuracy")]
            if not ag or abs(ag[-1] - ac[-1]) > 0.02 or ag[-1] < 0.85:
                problems.append(f"final accuracy {ag[-1] if ag else None} vs cpu {ac[-1]}")
            sk = lambda rows: sum(int(r["skipped"]) for r in rows)
            if abs(sk(gpu) - sk(cpu)) > 2:
                problems.append(f"skipped {sk(gpu)} vs cpu {sk(cpu)}")
            if not same_as_eager:
                problems.append("the log differs from a --cuda-graph off run's")
            placement = next((l for l in out.splitlines() if l.startswith("cuda: ")), "")
            final = next((l for l in out.splitlines() if l.startswith("final: ")), "")
            if problems:
                failed += 1
                print(f"FAIL {label}: {'; '.join(problems)} [{placement}]")
            else:
                passed += 1
                print(f"pass {label}: {final} (cpu accuracy {ac[-1]}) [{placement}]")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
