#!/usr/bin/env python3
"""The largest batch whose training step fits, and the step's activation memory (issue 15).

    python3 bench/gpu/max_batch.py --mpc MPC --model TRAIN.onnx [--model OTHER.onnx ...]
        --data DATA.npz [--device cpu|cuda] [--max-memory SIZE] [--start B] [--limit N]
        [--ref-batch B] [--run-timeout S] [--json FILE]

For each training model (`mpc train-graph`, maybe rewritten by `mpc rewrite`), searches the
largest batch B in [1, --limit] whose step runs: `mpc run --train --batch B --steps 2
--holdout 0 --shuffle none --stats` on B samples cut (cyclically) from DATA's arrays, with
`--max-memory SIZE` when given (on a GPU: the device's memory; on the CPU the budget is the
only limit there is). A batch fits when the run succeeds; it does not when mpc refuses the
plan (`--max-memory ... needs ...`), its backend refuses an allocation (`memory budget: ...`)
or the device runs out (`cannot allocate ... of CUDA device memory`); any other failure or a
run past --run-timeout stops the search with its one line. The search doubles B from --start
until a batch does not fit (or --limit), then bisects between the last fit and the first
miss: at most 2 log2(limit) + 2 runs, each bounded by --run-timeout.

At --ref-batch it also reads the step's exact memory (`memory bytes:` of --stats): the
activation memory is the step plan peak (the arena, persistent state excluded); the first
model is the reference (fp32) the others' activation memory is divided by (issue 15's goal
for AMP: <= 0.55).

Prints one line per model and a summary; the figures go to --json. step_bench.py
--max-batch runs this search for its models and PyTorch's (tests/trainer/test_max_batch.py
checks it).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

BYTES_LINE = re.compile(
    r"memory bytes: persistent (\d+), step plan peak (\d+), workspace (\d+), planned (\d+), "
    r"backend peak (\d+)")
# What says "does not fit": mpc's refusal of the plan, its backend's refusal of an
# allocation past the budget, the CUDA backend's out-of-memory.
OUT_OF_MEMORY = re.compile(r"--max-memory \d+ bytes: .* needs \d+ bytes|memory budget: "
                           r"|cannot allocate .* of CUDA device memory")


def largest_batch(fits, start=1, limit=1 << 16):
    """The largest b in [1, limit] with fits(b) true, for a fits() that is true up to some
    batch and false after it: doubling from `start`, then bisection. fits(b) returns True,
    False, or a string (an error: the search stops). Returns (best, runs, error): best is 0
    when nothing fits, runs the (batch, result) pairs in the order tried."""
    runs = []

    def probe(b):
        r = fits(b)
        runs.append((b, r))
        return r

    lo, hi = 0, None  # lo fits (0: none known), hi does not (None: none known)
    b = max(1, min(start, limit))
    while True:
        r = probe(b)
        if isinstance(r, str):
            return lo, runs, r
        if not r:
            hi = b
            break
        lo = b
        if b == limit:
            return lo, runs, None
        b = min(2 * b, limit)
    if lo == 0 and hi > 1:  # the start itself did not fit: below it, from 1
        lo_fit = probe(1)
        if isinstance(lo_fit, str):
            return 0, runs, lo_fit
        if not lo_fit:
            return 0, runs, None
        lo = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        r = probe(mid)
        if isinstance(r, str):
            return lo, runs, r
        if r:
            lo = mid
        else:
            hi = mid
    return lo, runs, None


def batch_data(arrays, batch, path):
    """Writes `batch` samples cut cyclically from every array of `arrays` (first dimension)
    to `path`; arrays named *_test are left out (no evaluation)."""
    out = {}
    for name, a in arrays.items():
        if name.endswith("_test"):
            continue
        idx = np.arange(batch) % a.shape[0]
        out[name] = a[idx]
    np.savez(path, **out)


def memory_figures(stderr):
    """The `memory bytes:` figures of a --stats run, or None."""
    m = BYTES_LINE.search(stderr)
    if not m:
        return None
    keys = ("persistent", "step_peak", "workspace", "planned", "backend_peak")
    return dict(zip(keys, map(int, m.groups())))


def run_step(mpc, model, data, batch, device="cpu", max_memory=None, timeout=600,
             extra=()):
    """One bounded `mpc run --train` of 2 steps at `batch`: (True, figures) when it ran,
    (False, line) when it did not fit, (error line, None) for anything else."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "batch.npz")
        batch_data(data, batch, path)
        cmd = [mpc, "run", model, "--train", "--data", path, "--batch", str(batch),
               "--steps", "2", "--holdout", "0", "--shuffle", "none", "--stats",
               "--device", device, *extra]
        if max_memory:
            cmd += ["--max-memory", str(max_memory)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"batch {batch}: timed out after {timeout} s", None
    last = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()[-1]
    if p.returncode == 0:
        return True, memory_figures(p.stderr)
    if p.returncode == 1 and OUT_OF_MEMORY.search(last):
        return False, last
    return f"batch {batch}: exit {p.returncode}: {last[:200]}", None


def search_mpc(mpc, model, data, device="cpu", max_memory=None, start=1, limit=1 << 16,
               timeout=600, extra=(), label=None):
    """largest_batch() over run_step(): {"largest": B, "runs": [[b, fits], ...],
    "error": line or None, "refusal": the last miss's line, "seconds": total}."""
    t0 = time.perf_counter()
    refusal = []

    def fits(b):
        ok, what = run_step(mpc, model, data, b, device, max_memory, timeout, extra)
        if ok is False:
            refusal.append(what)
        if label:
            state = "fits" if ok is True else "does not fit" if ok is False else ok
            print(f"max_batch: {label}: batch {b}: {state}", file=sys.stderr, flush=True)
        return ok

    best, runs, err = largest_batch(fits, start, limit)
    return {"largest": best, "runs": [[b, r] for b, r in runs], "error": err,
            "refusal": refusal[-1] if refusal else None,
            "seconds": round(time.perf_counter() - t0, 2)}


def activation_memory(mpc, model, data, batch, device="cpu", timeout=600, extra=()):
    """The step's `memory bytes:` figures at `batch` (no budget), or an error line."""
    ok, what = run_step(mpc, model, data, batch, device, None, timeout, extra)
    if ok is True:
        return what or f"batch {batch}: no 'memory bytes:' line"
    return what if ok is False else ok


def ratio_line(name, figures, ref):
    """"fp16: activation 1.23 MiB, 0.48x fp32" style text, from step plan peaks."""
    if not isinstance(figures, dict):
        return f"{name}: {figures}"
    text = f"{name}: step plan peak {figures['step_peak']} bytes"
    if isinstance(ref, dict) and ref["step_peak"]:
        text += f", {figures['step_peak'] / ref['step_peak']:.3f}x the reference"
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--model", action="append", required=True,
                    help="a training model; the first is the reference of the ratios")
    ap.add_argument("--data", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-memory", default=None)
    ap.add_argument("--start", type=int, default=1)
    ap.add_argument("--limit", type=int, default=1 << 16)
    ap.add_argument("--ref-batch", type=int, default=8)
    ap.add_argument("--run-timeout", type=int, default=600)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    data = dict(np.load(a.data))
    results, failures, ref = {}, 0, None
    for model in a.model:
        name = os.path.basename(model)
        r = search_mpc(a.mpc, model, data, a.device, a.max_memory, a.start, a.limit,
                       a.run_timeout, label=name)
        r["activation"] = activation_memory(a.mpc, model, data, a.ref_batch, a.device,
                                            a.run_timeout)
        if ref is None:
            ref = r["activation"]
        results[name] = r
        failures += r["error"] is not None or not isinstance(r["activation"], dict)
        err = f" (stopped: {r['error']})" if r["error"] else ""
        print(f"{name}: largest batch {r['largest']} in {len(r['runs'])} runs{err}; "
              f"{ratio_line('at batch ' + str(a.ref_batch), r['activation'], ref)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "max_memory": a.max_memory, "limit": a.limit,
                       "ref_batch": a.ref_batch, "results": results}, f, indent=1,
                      sort_keys=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
