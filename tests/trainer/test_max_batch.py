#!/usr/bin/env python3
"""The largest-batch search of bench/gpu/max_batch.py and step_bench.py --max-batch (issue 15).

    python3 tests/trainer/test_max_batch.py --mpc build/tools/mpc --source-dir . [-v]
    python3 tests/trainer/test_max_batch.py --mpc ... --source-dir . --step-bench

Default: the search itself (doubling then bisection) against every threshold of a monotone
predicate, with its run count bounded and an error stopping it; then max_batch.py on the
digits MLP (fp32 and its fp16 rewrite) on the CPU under `--max-memory 1MiB`, checked through
the CLI: the reported batch runs under the budget, one more is refused with mpc's
`--max-memory` line, every tried batch is on the right side, and the activation figure is
the step plan peak `--stats` prints at the reference batch.

--step-bench: bench/gpu/step_bench.py --device cpu --scale tiny --max-batch (the GPU bundle's
step on a CPU), which needs PyTorch: the Python running this, else $MPC_TORCH_PYTHON, else
/tmp/torchenv/bin/python; exit 77 with one line when none has it.

The last line printed is 'N passed, N failed'; exit 1 on any failure, 77 without numpy.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"numpy is required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = SOURCE_DIR = None
BENCH = None  # bench/gpu
TIMEOUT_S = 300
BUDGET = "1MiB"


def mpc(*args):
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT_S)


class Search(unittest.TestCase):
    def test_every_threshold(self):
        from max_batch import largest_batch
        for limit in (1, 2, 7, 64, 100):
            bound = 2 * math.ceil(math.log2(limit)) + 2 if limit > 1 else 1
            for start in (1, 3, 8, 200):
                for t in range(0, 130):
                    calls = []

                    def fits(b):
                        calls.append(b)
                        self.assertTrue(1 <= b <= limit, (b, limit))
                        return b <= t

                    best, runs, err = largest_batch(fits, start, limit)
                    self.assertIsNone(err)
                    self.assertEqual(best, min(t, limit), (limit, start, t, calls))
                    self.assertEqual([b for b, _ in runs], calls)
                    self.assertEqual(len(set(calls)), len(calls), calls)  # no batch twice
                    self.assertLessEqual(len(calls), bound + (start > 1), (limit, start, t, calls))

    def test_an_error_stops_the_search(self):
        from max_batch import largest_batch

        def fits(b):
            return "batch 16: timed out after 5 s" if b == 16 else b <= 40

        best, runs, err = largest_batch(fits, 1, 1000)
        self.assertEqual(err, "batch 16: timed out after 5 s")
        self.assertEqual(best, 8)  # the last batch known to fit
        self.assertEqual([b for b, _ in runs], [1, 2, 4, 8, 16])


class DigitsOnCpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.fp32 = os.path.join(cls.tmp.name, "fp32.onnx")
        r = mpc("train-graph", os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"), "--loss",
                "cross-entropy", "--labels", "labels", "--optimizer", "adam", "--lr", "0.01",
                "-o", cls.fp32)
        assert r.returncode == 0, r.stderr
        cls.fp16 = os.path.join(cls.tmp.name, "fp16.onnx")
        r = mpc("rewrite", cls.fp32, "--target", "fp16", "-o", cls.fp16)
        assert r.returncode == 0, r.stderr
        cls.data = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")
        out = os.path.join(cls.tmp.name, "r.json")
        p = subprocess.run([sys.executable, os.path.join(BENCH, "max_batch.py"), "--mpc", MPC,
                            "--model", cls.fp32, "--model", cls.fp16, "--data", cls.data,
                            "--max-memory", BUDGET, "--limit", "4096", "--ref-batch", "16",
                            "--run-timeout", "60", "--json", out],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        cls.proc = p
        cls.report = json.load(open(out)) if os.path.exists(out) else None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def step(self, model, batch, *flags):
        """mpc run --train at `batch` on the first rows of the digits, cyclically."""
        d = np.load(self.data)
        path = os.path.join(self.tmp.name, f"b{batch}.npz")
        idx = np.arange(batch) % d["x"].shape[0]
        np.savez(path, x=d["x"][idx], labels=d["labels"][idx])
        return mpc("run", model, "--train", "--data", path, "--batch", batch, "--steps", 2,
                   "--holdout", 0, "--shuffle", "none", *flags)

    def test_report(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertIsNotNone(self.report)
        lines = self.proc.stdout.splitlines()
        self.assertEqual(len(lines), 2, self.proc.stdout)
        for line, name in zip(lines, ("fp32.onnx", "fp16.onnx")):
            r = self.report["results"][name]
            self.assertRegex(line, rf"^{re.escape(name)}: largest batch {r['largest']} in "
                             rf"{len(r['runs'])} runs; at batch 16: step plan peak "
                             rf"{r['activation']['step_peak']} bytes, [0-9.]+x the reference$")

    def check_model(self, model):
        r = self.report["results"][os.path.basename(model)]
        best = r["largest"]
        self.assertIsNone(r["error"])
        self.assertGreater(best, 1)
        self.assertLess(best, 4096)  # the budget, not the limit, stopped it
        for b, fits in r["runs"]:
            self.assertEqual(fits, b <= best, (b, r["runs"]))
        # The oracle: mpc itself at the reported batch and one more.
        ok = self.step(model, best, "--max-memory", BUDGET)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        over = self.step(model, best + 1, "--max-memory", BUDGET)
        self.assertEqual(over.returncode, 1)
        self.assertRegex(over.stderr, rf"^mpc: error: --max-memory {1 << 20} bytes: the training "
                         r"step of '.*' needs \d+ bytes \(persistent \d+ \+ step plan peak \d+ "
                         r"\+ workspace \d+\)\n$")
        self.assertEqual(r["refusal"], over.stderr.strip())  # the miss that bounded the search
        # The activation figure is the step plan peak of --stats at the reference batch.
        stats = self.step(model, 16, "--stats")
        m = re.search(r"memory bytes: persistent \d+, step plan peak (\d+),", stats.stderr)
        self.assertEqual(int(m.group(1)), r["activation"]["step_peak"])

    def test_fp32(self):
        self.check_model(self.fp32)

    def test_fp16(self):
        self.check_model(self.fp16)


def torch_python():
    """A Python that imports torch, onnx and numpy, or None."""
    for py in (sys.executable, os.environ.get("MPC_TORCH_PYTHON"), "/tmp/torchenv/bin/python"):
        if py and os.path.exists(py):
            # find_spec: whether they are there, without the seconds importing torch takes.
            r = subprocess.run([py, "-c", "import importlib.util as u, sys; sys.exit(not all("
                                "u.find_spec(m) for m in ('torch', 'onnx', 'numpy')))"],
                               capture_output=True)
            if r.returncode == 0:
                return py
    return None


class StepBench(unittest.TestCase):
    PYTHON = None

    def test_tiny_on_cpu(self):
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([self.PYTHON, os.path.join(BENCH, "step_bench.py"), "--mpc", MPC,
                                "--device", "cpu", "--scale", "tiny", "--models", "bert",
                                "--steps", "1", "--no-torch", "--max-batch", "--max-memory",
                                "2MiB", "--max-batch-limit", "256", "--run-timeout", "60",
                                "--out", out], capture_output=True, text=True,
                               timeout=TIMEOUT_S)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            rows = {}
            for line in p.stdout.splitlines():
                m = re.match(r"^\| bert \| (mpc (fp32|fp16|bf16)) \| (\d+) \| (\d+) \| "
                             r"([0-9.]+) \| ([0-9.]+)x \|$", line)
                if m:
                    rows[m.group(1)] = (int(m.group(3)), int(m.group(4)), float(m.group(6)))
            self.assertEqual(sorted(rows), ["mpc bf16", "mpc fp16", "mpc fp32"], p.stdout)
            self.assertIn("| bert | torch | skipped: --no-torch | | | |", p.stdout)
            report = json.load(open(os.path.join(out, "max_batch.json")))
            self.assertEqual(report["max_memory"], "2MiB")
            for key, (best, runs, ratio) in rows.items():
                r = report["results"]["bert"][key]
                self.assertEqual((r["largest"], len(r["runs"])), (best, runs))
                self.assertIsNone(r["error"])
                self.assertTrue(1 <= best < 256, r)  # the budget stopped it
                for b, fits in r["runs"]:
                    self.assertEqual(fits, b <= best, r["runs"])
                ref = report["results"]["bert"]["mpc fp32"]["activation"]
                self.assertAlmostEqual(ratio, r["activation"] / ref, delta=0.005)


def main():
    global MPC, SOURCE_DIR, BENCH
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--step-bench", action="store_true")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    MPC, SOURCE_DIR = os.path.abspath(a.mpc), os.path.abspath(a.source_dir)
    BENCH = os.path.join(SOURCE_DIR, "bench", "gpu")
    sys.path.insert(0, BENCH)
    if a.step_bench:
        StepBench.PYTHON = torch_python()
        if not StepBench.PYTHON:
            print("skipped: step_bench.py --max-batch needs PyTorch and onnx (none in this "
                  "Python, $MPC_TORCH_PYTHON or /tmp/torchenv/bin/python)")
            return 77
        cases = [StepBench]
    else:
        cases = [Search, DigitsOnCpu]
    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(c) for c in cases])
    res = unittest.TextTestRunner(verbosity=2 if a.v else 1).run(suite)
    bad = len(res.failures) + len(res.errors)
    print(f"{res.testsRun - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
