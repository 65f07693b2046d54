#!/usr/bin/env python3
"""`mpc run --max-memory` and the exact memory figures of `--stats` (issue 15), through the CLI.

    python3 tests/trainer/test_max_memory.py --mpc build/tools/mpc --source-dir . [-v]

On the CPU backend, for inference (models/mlp.onnx) and for training (models/digits_mlp.onnx
through `mpc train-graph`, Adam, fp32 and the fp16 rewrite):

- the 'memory bytes:' line of --stats adds up (planned = persistent + peak + workspace), its
  peak is the planner's own figure (the 'memory:' line, in KiB or MiB), the backend's peak
  is at least the planned total and, for inference, exactly it;
- a budget of exactly the planned total runs, with results identical to a run without one;
  one byte less stops before the first run or step with the exact line, exit 1, and writes
  none of the --outputs, --log or --checkpoint files;
- with an evaluation, a budget that fits the step but not the evaluation's own plan is
  refused by the backend itself at the first evaluation (one line naming the budget),
  again writing nothing, and the backend peak of an unbudgeted run is enough;
- sizes with units (B, KiB, MiB, GiB, decimals) parse to the bytes the 'budget' field shows,
  and bad sizes are one usage line (exit 2);
- in dynamic mode (a Range whose limit is a graph input), a value past the budget, or without
  a budget past the memory the machine has available (MemAvailable), is refused by name
  before anything is written to it, with one line and exit 1; so are the parts of a Loop's
  scan outputs (a trip count of INT64_MAX, a condition that stays true) past half the
  budget or of what the process has available (its address-space limit here).

The last line printed is 'N passed, N failed'; exit 1 on any failure, 77 without numpy.
"""

import argparse
import os
import re
import shutil
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
TIMEOUT_S = 300
BYTES_LINE = re.compile(
    r"^memory bytes: persistent (\d+), (step plan peak|plan peak) (\d+), workspace (\d+), "
    r"planned (\d+), backend peak (\d+), budget (\d+|none)$", re.M)


def mpc(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=env)


def figures(text):
    m = BYTES_LINE.search(text)
    assert m, f"no 'memory bytes:' line in:\n{text}"
    keys = ("persistent", "peak_name", "peak", "workspace", "planned", "backend_peak", "budget")
    return dict(zip(keys, (g if i == 1 or g == "none" else int(g)
                           for i, g in enumerate(m.groups()))))


def refusal(f, budget, what, model):
    """The exact stderr of a plan refused by --max-memory `budget`."""
    peak = "step plan peak" if what == "training step" else "plan peak"
    return (f"mpc: error: --max-memory {budget} bytes: the {what} of '{model}' needs "
            f"{f['planned']} bytes (persistent {f['persistent']} + {peak} {f['peak']} + "
            f"workspace {f['workspace']})\n")


def mib_of(text, name):
    """A figure of the 'memory:' line ("planned peak 1.25 MiB") in bytes, and its rounding."""
    m = re.search(name + r" ([0-9.]+) (B|KiB|MiB)", text)
    assert m, f"no {name!r} in:\n{text}"
    unit = {"B": 1, "KiB": 1024, "MiB": 1 << 20}[m.group(2)]
    step = {"B": 1, "KiB": 0.1, "MiB": 0.01}[m.group(2)]
    return float(m.group(1)) * unit, step * unit


class Inference(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = os.path.join(SOURCE_DIR, "models", "mlp.onnx")

    def run_mlp(self, *flags):
        return mpc("run", self.model, "--random-inputs", "--seed", 3, *flags)

    def test_figures_and_budget(self):
        r = self.run_mlp("--stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        f = figures(r.stdout)
        self.assertEqual(f["peak_name"], "plan peak")
        self.assertEqual(f["budget"], "none")
        self.assertEqual(f["planned"], f["persistent"] + f["peak"] + f["workspace"])
        # The planner's arena is the one the 'memory:' line reports, rounded to 256 bytes.
        planned_peak, tol = mib_of(r.stdout, "planned peak")
        self.assertLessEqual(abs(f["peak"] - planned_peak), tol + 256)
        self.assertEqual(f["peak"] % 256, 0)
        # A static plan allocates nothing beyond what was planned.
        self.assertEqual(f["backend_peak"], f["planned"])
        self.assertNotIn("device memory", r.stdout)  # the CPU has no device of its own
        outputs = [l for l in r.stdout.splitlines() if l.startswith("output ")]
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "outs")
            fits = self.run_mlp("--max-memory", f["planned"], "--stats", "--outputs", out)
            self.assertEqual(fits.returncode, 0, fits.stderr)
            self.assertEqual([l for l in fits.stdout.splitlines() if l.startswith("output ")],
                             outputs)
            self.assertEqual(figures(fits.stdout)["budget"], f["planned"])
            self.assertTrue(os.listdir(out))
            out2 = os.path.join(tmp, "outs2")
            short = self.run_mlp("--max-memory", f["planned"] - 1, "--outputs", out2)
            self.assertEqual((short.returncode, short.stdout), (1, ""))
            self.assertEqual(short.stderr, refusal(f, f["planned"] - 1, "run", self.model))
            self.assertFalse(os.path.exists(out2))

    def test_compared_model_has_its_own_budget(self):
        # --compare runs MODEL again on a backend of its own, under the same budget.
        r = self.run_mlp("--stats")
        f = figures(r.stdout)
        both = self.run_mlp("--max-memory", f["planned"], "--compare", self.model)
        self.assertEqual(both.returncode, 0, both.stderr)
        self.assertIn("compare 'probs': max abs error 0.000000e+00", both.stdout)


class Training(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # The digits without their held-out arrays: with --holdout 0 nothing is evaluated.
        cls.with_test = os.path.join(SOURCE_DIR, "models", "data", "digits.npz")
        cls.data = os.path.join(cls.tmp.name, "train.npz")
        d = np.load(cls.with_test)
        np.savez(cls.data, x=d["x"], labels=d["labels"])
        cls.fp32 = os.path.join(cls.tmp.name, "mlp.train.onnx")
        r = mpc("train-graph", os.path.join(SOURCE_DIR, "models", "digits_mlp.onnx"), "--loss",
                "cross-entropy", "--labels", "labels", "--optimizer", "adam", "--lr", "0.01",
                "-o", cls.fp32)
        assert r.returncode == 0, r.stderr
        cls.fp16 = os.path.join(cls.tmp.name, "mlp.fp16.onnx")
        r = mpc("rewrite", cls.fp32, "--target", "fp16", "-o", cls.fp16)
        assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def train(self, model, *flags, batch=32, evaluate=False):
        data = self.with_test if evaluate else self.data
        return mpc("run", model, "--train", "--data", data, "--batch", batch, "--steps", 6,
                   "--holdout", 0, "--seed", 1, *flags)

    @staticmethod
    def final(r):
        return [l for l in r.stdout.splitlines() if l.startswith("final:")]

    def check_step_budget(self, model):
        r = self.train(model, "--stats")
        self.assertEqual(r.returncode, 0, r.stderr)
        f = figures(r.stderr)
        self.assertEqual(f["peak_name"], "step plan peak")
        self.assertEqual(f["planned"], f["persistent"] + f["peak"] + f["workspace"])
        step_peak, tol = mib_of(r.stderr, "step plan peak")
        self.assertLessEqual(abs(f["peak"] - step_peak), tol + 256)
        # Everything planned is held at once during the first step (setup may have held
        # more for a moment: the inference graph's check, before the budget applies).
        self.assertGreaterEqual(f["backend_peak"], f["planned"])
        with tempfile.TemporaryDirectory() as tmp:
            log, ck = os.path.join(tmp, "log.csv"), os.path.join(tmp, "ck")
            fits = self.train(model, "--max-memory", f["planned"], "--log", log)
            self.assertEqual(fits.returncode, 0, fits.stderr)
            self.assertEqual(self.final(fits), self.final(r))
            # The same training, bit for bit, as a run with neither --stats nor a budget.
            plain_log = os.path.join(tmp, "plain.csv")
            plain = self.train(model, "--log", plain_log)
            self.assertEqual(plain.returncode, 0, plain.stderr)
            with open(log, "rb") as a, open(plain_log, "rb") as b:
                self.assertEqual(a.read(), b.read())
            os.remove(log)
            os.remove(plain_log)
            short = self.train(model, "--max-memory", f"{f['planned'] - 1}B", "--log", log,
                               "--checkpoint", ck)
            self.assertEqual((short.returncode, short.stdout), (1, ""))
            self.assertEqual(short.stderr, refusal(f, f["planned"] - 1, "training step", model))
            self.assertEqual(os.listdir(tmp), [])
        return f

    def test_fp32(self):
        self.check_step_budget(self.fp32)

    def test_fp16(self):
        # The AMP step: fp32 master weights and fp16 copies, loss-scale state, casts.
        self.check_step_budget(self.fp16)

    def test_peak_grows_with_the_batch(self):
        small = figures(self.train(self.fp32, "--stats", batch=16).stderr)
        large = figures(self.train(self.fp32, "--stats", batch=64).stderr)
        self.assertLess(small["peak"], large["peak"])
        # A budget that fits batch 16 refuses batch 64 before its first step.
        r = self.train(self.fp32, "--max-memory", small["planned"], batch=64)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"needs {large['planned']} bytes", r.stderr)

    def test_evaluation_is_held_to_the_budget(self):
        # The evaluation's executor is made at the first evaluation; its allocations are
        # refused by the backend when they pass the budget.
        alone = figures(self.train(self.fp32, "--stats").stderr)
        full = self.train(self.fp32, "--stats", evaluate=True)
        self.assertEqual(full.returncode, 0, full.stderr)
        f = figures(full.stderr)
        self.assertGreater(f["backend_peak"], alone["planned"])
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "log.csv")
            short = self.train(self.fp32, "--max-memory", alone["planned"], "--log", log,
                               evaluate=True)
            # The steps ran (their progress lines); the evaluation stops the run with one
            # error line before any file is written.
            self.assertEqual(short.returncode, 1)
            self.assertEqual(short.stdout, "")
            self.assertRegex(short.stderr, r"\nmpc: error: .*memory budget: \d+ more bytes on top "
                             rf"of the \d+ held would exceed the budget of {alone['planned']} "
                             r"bytes\n$")
            self.assertEqual(os.listdir(tmp), [])
            ok = self.train(self.fp32, "--max-memory", f["backend_peak"], "--log", log,
                            evaluate=True)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertEqual(self.final(ok), self.final(full))

    def test_units(self):
        for text, want in (("4096", 4096), ("4096B", 4096), ("1.5KiB", 1536), ("2MiB", 2 << 20),
                           ("0.25MiB", 1 << 18), ("1GiB", 1 << 30), ("3TiB", 3 << 40)):
            r = self.train(self.fp32, "--max-memory", text, "--stats", "--steps", 1)
            got = figures(r.stderr)["budget"] if r.returncode == 0 else None
            if r.returncode == 1:  # too small: the refusal names the parsed budget
                self.assertIn(f"--max-memory {want} bytes:", r.stderr)
            else:
                self.assertEqual(got, want, r.stderr)

    def test_bad_sizes(self):
        for bad in ("0", "0B", "12GB", "12gib", "abc", "-1", "1.5.2MiB", "1.", ".5KiB", "MiB",
                    "12 GiB", "", "99999999999TiB"):
            for cmd in (("run", os.path.join(SOURCE_DIR, "models", "mlp.onnx"),
                         "--random-inputs"),
                        ("run", self.fp32, "--train", "--data", self.data, "--batch", 8)):
                r = mpc(*cmd, "--max-memory", bad)
                sub = "run --train" if "--train" in cmd else "run"
                self.assertEqual(r.returncode, 2, (bad, r.stderr))
                self.assertEqual(
                    r.stderr,
                    f"mpc {sub}: --max-memory takes a positive size in bytes with an optional "
                    f"unit B, KiB, MiB, GiB or TiB (such as 12GiB, 1.5MiB or 4096), not "
                    f"'{bad}' (see 'mpc {sub} --help')\n")
        r = mpc("run", self.fp32, "--train", "--data", self.data, "--batch", 8, "--max-memory")
        self.assertEqual(r.returncode, 2)
        self.assertIn("option '--max-memory' needs a value", r.stderr)

    def test_help_names_the_option(self):
        for cmd in (("run", "--help"), ("run", "--train", "--help")):
            self.assertIn("--max-memory SIZE", mpc(*cmd).stdout)


class DynamicValues(unittest.TestCase):
    """Memory sized at run time, checked before it is taken: values of a model in dynamic
    mode (one allocation each), and the parts of a Loop's scan outputs."""

    @classmethod
    def setUpClass(cls):
        try:
            import onnx
            from onnx import helper as h, TensorProto as T
        except ImportError:
            raise unittest.SkipTest("onnx is required")
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        # r = Range(0, lim, 1) (f32, lim elements), s = r + r, y = sum(s)
        nodes = [h.make_node("Constant", [], ["zero"], value=h.make_tensor("z", T.FLOAT, [], [0])),
                 h.make_node("Constant", [], ["one"], value=h.make_tensor("o", T.FLOAT, [], [1])),
                 h.make_node("Range", ["zero", "lim", "one"], ["r"], name="range"),
                 h.make_node("Add", ["r", "r"], ["s"], name="add"),
                 h.make_node("ReduceSum", ["s"], ["y"], keepdims=0, name="sum")]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("lim", T.FLOAT, [])],
                         [h.make_tensor_value_info("y", T.FLOAT, [])])
        cls.range_model = os.path.join(d, "range.onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), cls.range_model)
        # A Loop of trip count INT64_MAX whose condition stays true, a scan output of 1 MB
        # per iteration.
        body = h.make_graph(
            [h.make_node("Identity", ["cond"], ["cond_out"]),
             h.make_node("Identity", ["x"], ["part"])],
            "body", [h.make_tensor_value_info("i", T.INT64, []),
                     h.make_tensor_value_info("cond", T.BOOL, [])],
            [h.make_tensor_value_info("cond_out", T.BOOL, []),
             h.make_tensor_value_info("part", T.FLOAT, None)])
        g = h.make_graph(
            [h.make_node("Constant", [], ["M"],
                         value=h.make_tensor("m", T.INT64, [], [2 ** 63 - 1])),
             h.make_node("Constant", [], ["c"], value=h.make_tensor("t", T.BOOL, [], [True])),
             h.make_node("Loop", ["M", "c"], ["ys"], name="forever", body=body)],
            "g", [h.make_tensor_value_info("x", T.FLOAT, [250000])],
            [h.make_tensor_value_info("ys", T.FLOAT, None)])
        cls.loop_model = os.path.join(d, "loop.onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), cls.loop_model)
        # The same Loop without a trip count appending x (1 MB) to the sequence it carries.
        seq = h.make_tensor_sequence_value_info
        body = h.make_graph(
            [h.make_node("Identity", ["cond"], ["cond_out"]),
             h.make_node("SequenceInsert", ["s", "x"], ["s_out"])],
            "body", [h.make_tensor_value_info("i", T.INT64, []),
                     h.make_tensor_value_info("cond", T.BOOL, []), seq("s", T.FLOAT, None)],
            [h.make_tensor_value_info("cond_out", T.BOOL, []), seq("s_out", T.FLOAT, None)])
        g = h.make_graph(
            [h.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
             h.make_node("Constant", [], ["c"], value=h.make_tensor("t", T.BOOL, [], [True])),
             h.make_node("Loop", ["", "c", "s0"], ["sf"], name="appends", body=body),
             h.make_node("SequenceLength", ["sf"], ["n"])],
            "g", [h.make_tensor_value_info("x", T.FLOAT, [250000])],
            [h.make_tensor_value_info("n", T.INT64, [])])
        cls.seq_loop_model = os.path.join(d, "seq_loop.onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), cls.seq_loop_model)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_model(self, model, name, value, *flags, limit_as=None):
        """`mpc run model --input name=value --outputs DIR flags`, under an address-space
        limit of `limit_as` bytes if given (without mpc's checks, the allocation then fails
        instead of filling the machine's memory); asserts DIR was not written on failure."""
        feed = os.path.join(self.tmp.name, f"{name}.npy")
        np.save(feed, value)
        out = os.path.join(self.tmp.name, "out")
        shutil.rmtree(out, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}

        def cap():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

        r = subprocess.run([MPC, "run", model, "--input", f"{name}={feed}", "--outputs", out,
                            *flags], capture_output=True, text=True, timeout=TIMEOUT_S, env=env,
                           preexec_fn=cap if limit_as else None)
        if r.returncode != 0:
            self.assertFalse(os.path.exists(out))
        return r, out

    def run_range(self, elements, *flags, limit_as=None):
        return self.run_model(self.range_model, "lim", np.array(elements, dtype=np.float32),
                              *flags, limit_as=limit_as)

    def test_a_value_past_the_budget_is_named(self):
        r, out = self.run_range(1_000_000, "--max-memory", "1MiB")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, "mpc: error: value 'r': memory budget: 4000000 more bytes on "
                                   "top of the 1024 held would exceed the budget of 1048576 "
                                   "bytes\n")
        ok, out = self.run_range(1000, "--max-memory", "1MiB")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(float(np.load(os.path.join(out, "y.npy"))), 999.0 * 1000.0)

    def test_a_value_past_the_machines_available_memory_is_named(self):
        meminfo = dict(l.split(":", 1) for l in open("/proc/meminfo"))
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        avail = int(meminfo["MemAvailable"].split()[0]) * 1024
        # Above what is available, below the machine's memory (larger values are refused by
        # their shape, "this machine's memory"): nothing may be written to such a value.
        elements = (total - (1 << 20)) // 4
        if elements * 4 - avail < (64 << 20):
            self.skipTest(f"MemAvailable {avail} is within 64 MiB of the memory {total}")
        r, _ = self.run_range(elements, limit_as=3 << 30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, rf"^mpc: error: value 'r': host memory: {elements * 4} more "
                                   rf"bytes on top of the \d+ this run holds exceed the \d+ bytes "
                                   rf"available on this machine \(--max-memory sets another "
                                   rf"limit\)\n$")

    # The Loop's scan outputs grew until the kernel killed mpc or, under an address-space
    # limit, it aborted on std::bad_alloc.
    def test_loop_scan_outputs_within_the_budget(self):
        r, _ = self.run_model(self.loop_model, "x", np.zeros(250000, np.float32),
                              "--max-memory", "64MiB", limit_as=3 << 30)
        self.assertEqual(r.returncode, 1, r.stderr)
        # 1,000,000 bytes a part: the 34th passes half of 64 MiB (33,554,432 bytes).
        self.assertEqual(r.stderr, "mpc: error: node 'forever' (Loop): after 34 iterations the "
                                   "scan outputs hold 34000000 bytes; stacking them needs as "
                                   "much again, past the 67108864 bytes of --max-memory\n")

    def test_loop_scan_outputs_within_the_address_space(self):
        r, _ = self.run_model(self.loop_model, "x", np.zeros(250000, np.float32),
                              limit_as=2 << 30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"^mpc: error: node 'forever' \(Loop\): after \d+ iterations "
                                   r"the scan outputs hold \d+ bytes; stacking them needs as "
                                   r"much again, past the \d+ bytes available on this "
                                   r"machine\n$")


    # A Loop that appends to the sequence it carries and never ends: each insert copied the
    # whole sequence (quadratic: it ran for hours before memory mattered), and nothing
    # bounded the sequence's memory. The sequence is now grown in place and its bytes are
    # counted as the scan outputs' are.
    def check_sequence_bound(self, stderr, limit_text):
        m = re.fullmatch(r"mpc: error: node 'appends' \(Loop\): after (\d+) iterations the "
                         r"sequences it carries hold (\d+) bytes \(in (\d+) tensors\), past "
                         r"half of the (\d+) bytes " + limit_text + r"\n", stderr)
        self.assertIsNotNone(m, stderr)
        iterations, held, tensors, limit = map(int, m.groups())
        self.assertEqual((held, tensors), (iterations * 1_000_000, iterations))
        # Counted when the tensors have grown by an eighth: past half the limit, by little.
        self.assertGreater(held, limit // 2)
        self.assertLessEqual(held, limit // 2 * 9 // 8 + 2_000_000)
        return limit

    def test_loop_sequences_within_the_budget(self):
        r, _ = self.run_model(self.seq_loop_model, "x", np.zeros(250000, np.float32),
                              "--max-memory", "64MiB", limit_as=3 << 30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(self.check_sequence_bound(r.stderr, "of --max-memory"), 64 << 20)

    def test_loop_sequences_within_the_address_space(self):
        r, _ = self.run_model(self.seq_loop_model, "x", np.zeros(250000, np.float32),
                              limit_as=2 << 30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(self.check_sequence_bound(r.stderr, "available on this machine"),
                        2 << 30)


def main():
    global MPC, SOURCE_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("-v", action="store_true")
    ap.add_argument("-k", default=None)
    a = ap.parse_args()
    MPC, SOURCE_DIR = os.path.abspath(a.mpc), os.path.abspath(a.source_dir)
    loader = unittest.TestLoader()
    if a.k:
        loader.testNamePatterns = [f"*{a.k}*"]
    classes = (Inference, Training, DynamicValues)
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(c) for c in classes])
    res = unittest.TextTestRunner(verbosity=2 if a.v else 1).run(suite)
    bad = len(res.failures) + len(res.errors)
    print(f"{res.testsRun - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
