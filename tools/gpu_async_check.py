#!/usr/bin/env python3
"""Training steps that never wait for the device, checked on the CUDA backend (GPU bundle).

    python3 tools/gpu_async_check.py --mpc MPC --source-dir SRC [--device cuda] [--steps 400]

A training step queues its work and the copies of its logged values and kernel error record
into a ring of pinned host records, and the host waits only for a record still in flight
(docs/training.md, "Errors inside a step"; docs/backends.md, "Deferred errors"). Checks:
- timing: the digits MLP's training (fp32 and AMP, batch 32) runs as usual and with
  MPC_TRAIN_SYNC_STEPS=1 (every step waits for itself at its end, the behaviour before);
  the logs (losses, loss scales, skips, accuracy) are byte-identical and the checkpoints
  too, and the median step times of both (the time to launch a step, which includes the
  wait for a ring slot once the ring is full) and the whole runs' wall times are printed
  (the figures to record: how much the host waits cost per step);
- an index out of range in a step (tests/trainer/test_trainer.py's embedding model, id 9 in
  step 3's batch, evaluated every step): exit 1, the progress lines of steps 1 and 2, then
  exactly the CPU backend's line, 'training step 3: node 'embed' (Gather): index 9 out of
  range for [4, 2]'; the log holds steps 1 and 2 only and the checkpoint is that of step 2;
- a launch that fails inside a step (MPC_CUDA_FAIL_NODE names the step's first MatMul/Gemm):
  exit 1, one line naming step 1 and the node, no checkpoint folder (cuda only).
`--device cpu` runs the same checks on the CPU backend (a self-check of this script, ctest
`gpu_async_check_cpu`). Prints one line per check and, last, 'N passed, N failed'.
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx


def run(mpc, args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    e.update(env or {})
    return subprocess.run([mpc, *map(str, args)], capture_output=True, text=True, timeout=1800,
                          env=e)


def median_ms(stderr):
    m = re.search(r"median ([0-9.]+) ms per step", stderr)
    return float(m.group(1)) if m else None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=400)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.source_dir, "tests", "trainer"))
    from test_trainer import embedding_data, embedding_regression

    results = []

    def check(name, ok, detail):
        results.append(ok)
        print(f"{'pass' if ok else 'FAIL'} {name}: {detail}")

    dev = ["--device", a.device]
    with tempfile.TemporaryDirectory() as tmp:
        # 1. The same training with and without waiting at every step.
        train = os.path.join(tmp, "digits.train.onnx")
        amp = os.path.join(tmp, "digits.amp.onnx")
        r = run(a.mpc, ["train-graph", os.path.join(a.source_dir, "models", "digits_mlp.onnx"),
                        "--loss", "cross-entropy", "--optimizer", "adam", "--lr", "0.01",
                        "-o", train])
        r2 = run(a.mpc, ["rewrite", train, "-o", amp]) if r.returncode == 0 else r
        if r2.returncode != 0:
            check("digits models", False, (r2.stderr.strip().splitlines() or ["?"])[-1])
        else:
            data = os.path.join(a.source_dir, "models", "data", "digits.npz")
            for label, model in (("fp32", train), ("amp", amp)):
                outs, wall = {}, {}
                for mode, env in (("async", {}), ("sync", {"MPC_TRAIN_SYNC_STEPS": "1"})):
                    log = os.path.join(tmp, f"{label}.{mode}.csv")
                    ck = os.path.join(tmp, f"{label}.{mode}")
                    t0 = time.monotonic()
                    p = run(a.mpc, ["run", model, "--train", *dev, "--data", data, "--batch", 32,
                                    "--steps", a.steps, "--eval-every", a.steps, "--shuffle",
                                    "none", "--log", log, "--checkpoint", ck], env)
                    wall[mode] = time.monotonic() - t0
                    outs[mode] = (p, log, os.path.join(ck, "checkpoint.onnx"))
                (pa, la, ca), (ps, ls, cs) = outs["async"], outs["sync"]
                if pa.returncode or ps.returncode:
                    bad = pa if pa.returncode else ps
                    check(f"{label} steps", False,
                          f"exit {bad.returncode}: {(bad.stderr.strip().splitlines() or ['?'])[-1]}")
                    continue
                same = read(la) == read(ls) and read(ca) == read(cs)
                ta, ts = median_ms(pa.stderr), median_ms(ps.stderr)
                final = next((l for l in pa.stdout.splitlines() if l.startswith("final: ")), "")
                check(f"{label} steps", same and ta is not None and ts is not None,
                      f"median {ta} ms per step without waiting, {ts} ms waiting every step "
                      f"({a.steps} steps; whole runs {wall['async']:.2f} s and "
                      f"{wall['sync']:.2f} s); logs and checkpoints "
                      f"{'identical' if same else 'DIFFER'}; {final}")

        # 2. An index out of range inside step 3.
        model, _, _, _ = embedding_regression()
        path = os.path.join(tmp, "embed.onnx")
        onnx.save(model, path)
        bad = os.path.join(tmp, "bad.npz")
        np.savez(bad, **embedding_data(bad=5))
        log, ck = os.path.join(tmp, "embed.csv"), os.path.join(tmp, "embed")
        p = run(a.mpc, ["run", path, "--train", *dev, "--data", bad, "--batch", 2, "--steps", 6,
                        "--shuffle", "none", "--eval-every", 1, "--log", log, "--checkpoint", ck])
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        want = ("mpc: error: training step 3: node 'embed' (Gather): index 9 out of range "
                "for [4, 2]")
        steps = []
        if os.path.exists(log):
            with open(log) as f:
                steps = [int(row["step"]) for row in csv.DictReader(f)]
        ckpt_step = None
        ckpt = os.path.join(ck, "checkpoint.onnx")
        if os.path.exists(ckpt):
            meta = {q.key: q.value for q in onnx.load(ckpt).metadata_props}
            ckpt_step = meta.get("mpc.trainer.step")
        # Progress lines of the evaluated steps 1 and 2, then the error line.
        progress = [l.split(" epoch")[0] for l in lines[:-1]]
        ok = p.returncode == 1 and lines[-1:] == [want] and progress == ["step 1/6", "step 2/6"] \
            and steps == [1, 2] and ckpt_step == "2"
        check("index error in step 3", ok,
              f"exit {p.returncode}, {lines[-1] if lines else 'no message'}; log steps {steps}, "
              f"checkpoint of step {ckpt_step}")

        # 3. A launch that fails inside a step (the CUDA backend's test hook).
        if a.device == "cuda":
            node = next(n for n in onnx.load(train).training_info[0].algorithm.node
                        if n.op_type in ("MatMul", "Gemm"))
            ck = os.path.join(tmp, "failed")
            p = run(a.mpc, ["run", train, "--train", *dev, "--data",
                            os.path.join(a.source_dir, "models", "data", "digits.npz"),
                            "--batch", 32, "--steps", 20, "--eval-every", 10, "--checkpoint", ck],
                    {"MPC_CUDA_FAIL_NODE": node.name})
            lines = [l for l in p.stderr.splitlines() if l.strip()]
            want = (f"mpc: error: training step 1: node '{node.name}' ({node.op_type}): launch "
                    f"failed on purpose (MPC_CUDA_FAIL_NODE)")
            check("failed launch in a step", p.returncode == 1 and lines == [want]
                  and not os.path.exists(ck),
                  f"exit {p.returncode}, {lines[-1] if lines else 'no message'}")

    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
