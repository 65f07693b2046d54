#!/usr/bin/env python3
"""The device probe of the Python op suites (mpc_device.py) tells a skip from a failure.

    python3 tests/python/test_mpc_device.py --mpc build/tools/mpc

Against the real binary: the CPU runs the probe; `--device cuda` in a build without the CUDA
backend is mpc's one-line refusal, a reason to skip (and a suite given `--device cuda` exits 77
with one line). Against stand-in binaries (shell scripts): a crash, another error message, a
refusal spread over two lines and a wrong result are failures, never skips. Exit 77 when numpy
or onnx is missing.
"""
import argparse
import os
import stat
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy  # noqa: F401
    import onnx  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"numpy and onnx are required ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpc_device  # noqa: E402

MPC = None
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


class ProbeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="mpc_device_test_")

    def tearDown(self):
        self.tmp.cleanup()

    def fake_mpc(self, body):
        """A stand-in for mpc: a shell script with `body`."""
        path = os.path.join(self.tmp.name, "fake-mpc")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
        return path

    def test_cpu_runs(self):
        self.assertIsNone(mpc_device.probe(MPC, "cpu"))

    def test_cuda_without_backend_is_a_reason(self):
        reason = mpc_device.probe(MPC, "cuda")
        if reason is None:
            self.skipTest("this build runs on cuda")
        # A build without the backend, or one with it on a machine without a GPU.
        self.assertTrue(reason.startswith("this build has no CUDA backend") or
                        reason.startswith("no CUDA device found"), reason)

    def test_suite_exits_77_with_one_line(self):
        if mpc_device.probe(MPC, "cuda") is None:
            self.skipTest("this build runs on cuda")
        for script in (os.path.join("tests", "conformance", "test_node_conformance.py"),
                       os.path.join("tests", "training_ops", "test_training_kernels.py")):
            r = subprocess.run([sys.executable, os.path.join(SOURCE, script), "--mpc", MPC,
                                "--source-dir", SOURCE, "--device", "cuda"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 77, script + ": " + r.stdout + r.stderr)
            self.assertEqual(r.stdout.splitlines(), [
                "skipped: device 'cuda' is not available: " + mpc_device.probe(MPC, "cuda")],
                script)
            self.assertEqual(r.stderr, "", script)

    def test_other_failures_are_not_skips(self):
        cases = {
            "crash": "kill -SEGV $$",
            "other message": "echo 'mpc: error: unsupported op Relu' >&2; exit 1",
            "two lines": "echo 'mpc: error: --device cuda: no GPU' >&2; echo more >&2; exit 1",
            "wrong exit": "echo 'mpc: error: --device cuda: no GPU' >&2; exit 3",
        }
        for name, body in cases.items():
            with self.subTest(name):
                with self.assertRaises(RuntimeError):
                    mpc_device.probe(self.fake_mpc(body), "cuda")

    def test_refusal_line_is_a_skip(self):
        fake = self.fake_mpc("echo 'mpc: error: --device cuda: no GPU' >&2; exit 1")
        self.assertEqual(mpc_device.probe(fake, "cuda"), "no GPU")

    def test_wrong_result_is_a_failure(self):
        # Runs "successfully" but writes zeros where Relu gives [0, 0.5, 2].
        fake = self.fake_mpc(
            'while [ $# -gt 0 ]; do [ "$1" = --outputs ] && out=$2; shift; done\n'
            'mkdir -p "$out" && ' + sys.executable +
            ' -c "import numpy, sys; numpy.save(sys.argv[1], numpy.zeros(3, numpy.float32))"'
            ' "$out/y.npy"')
        with self.assertRaisesRegex(RuntimeError, "computed Relu wrong"):
            mpc_device.probe(fake, "cuda")


def main():
    global MPC
    p = argparse.ArgumentParser()
    p.add_argument("--mpc", required=True)
    p.add_argument("--source-dir", default=None)
    args = p.parse_args()
    MPC = os.path.abspath(args.mpc)
    result = unittest.TextTestRunner(verbosity=2).run(
        unittest.TestLoader().loadTestsFromTestCase(ProbeTest))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
