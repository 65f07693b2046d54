#!/usr/bin/env python3
"""The node conformance suite's own decisions (test_node_conformance.py), without a device.

    python3 tests/conformance/test_harness.py --mpc build/tools/mpc --source-dir .

On a device other than the CPU, a node test whose model holds an op mpc does not know at
all (no row of `mpc ops --json`) is counted unsupported without starting mpc, whose every
process opens the device first (the 2026-11-27 H100 run: about 3.8 s per test on each of 16
workers). Checked here with a stand-in for mpc that records each start: such a test never
starts it on `cuda` and still does on the CPU (where the suite checks mpc's own refusal), and
a test of a known op starts it on both. The op lists come from the real `mpc ops --json`,
and the chosen unknown-op test must be one the CPU run counts unsupported.
"""

import argparse
import os
import stat
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from mpc_proc import run_unittests  # noqa: E402

ARGS = None


class UnknownOpsOnADevice(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import test_node_conformance as conf
        cls.conf = conf
        cls.root = conf.node_test_root()
        if not os.path.isdir(cls.root):
            raise unittest.SkipTest(f"no ONNX node tests under {cls.root}")
        cls.device_ops, cls.known = conf.kernel_ops(ARGS.mpc, "cuda")
        cls.tmp = tempfile.TemporaryDirectory(prefix="mpc-conf-harness-")
        cls.log = os.path.join(cls.tmp.name, "starts")
        cls.fake = os.path.join(cls.tmp.name, "mpc")
        with open(cls.fake, "w") as f:
            f.write(f"#!/bin/sh\necho \"$*\" >> '{cls.log}'\nexit 2\n")
        os.chmod(cls.fake, stat.S_IRWXU)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def starts(self):
        if not os.path.exists(self.log):
            return 0
        with open(self.log) as f:
            n = len(f.readlines())
        os.remove(self.log)
        return n

    def unknown_op_test(self):
        """The first node test (by name) whose model has an op mpc does not know."""
        import onnx
        for name in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, name, "model.onnx")
            if not os.path.exists(path) or self.conf.exclusion_reason(name):
                continue
            unknown = self.conf.graph_ops(onnx.load(path).graph) - self.known
            if unknown:
                return name, sorted(unknown)
        self.skipTest("every node test's ops are known to mpc")

    def one(self, name, device, known):
        return self.conf.run_one(self.fake, name, os.path.join(self.root, name), self.device_ops,
                                 60, device, known)

    def test_the_lists_are_mpcs(self):
        self.assertIn("MatMul", self.known)
        self.assertIn("MatMul", self.device_ops)
        self.assertIn("Constant", self.known)  # a CPU row, none on cuda
        self.assertNotIn("Constant", self.device_ops)

    def test_unknown_op_starts_no_mpc_on_a_device(self):
        name, unknown = self.unknown_op_test()
        r = self.one(name, "cuda", self.known)
        self.assertEqual(r["status"], "unsupported", r)
        self.assertIn(unknown[0], r["detail"])
        self.assertEqual(self.starts(), 0)
        # The real mpc refuses the model on the CPU: the skip agrees with it.
        real = self.conf.run_one(ARGS.mpc, name, os.path.join(self.root, name),
                                 self.conf.kernel_ops(ARGS.mpc, "cpu")[0], 120, "cpu")
        self.assertEqual(real["status"], "unsupported", real)

    def test_unknown_op_still_starts_mpc_on_the_cpu(self):
        name, _ = self.unknown_op_test()
        r = self.one(name, "cpu", self.known)
        self.assertEqual(r["status"], "failed", r)  # the stand-in exits 2
        self.assertEqual(self.starts(), 1)

    def test_known_op_starts_mpc_on_a_device(self):
        r = self.one("test_abs", "cuda", self.known)
        self.assertEqual(r["status"], "failed", r)
        self.assertEqual(self.starts(), 1)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        print(f"onnx is required ({sys.executable}: {e})")
        print("0 passed, 0 failed, 1 skipped")
        return 77
    return run_unittests(rest)


if __name__ == "__main__":
    sys.exit(main())
