#!/usr/bin/env python3
"""The GPU bundle (tools/gpu-bundle.sh --no-build) made from the build under test.

    python3 tests/cuda_host/test_gpu_bundle.py --mpc build/tools/mpc --source-dir . --build-dir build

Packs the build's mpc, its CUDA backend plugin and GPU test binaries into a temporary bundle
and checks what a GPU session relies on: the folder is within its 40 MiB; the payload holds
the binaries, the plugin in lib/ (where libexec/mpc looks for it), their shared libraries
(never the C library, the driver or cuBLAS, which the GPU machine has), the test sources and
models; the bundled mpc runs a shipped model with only the bundle's libraries and the
system's C/C++ runtime, and opens the bundle's plugin for --device cuda; `run.sh` on a
machine without a GPU prints its one line and exits 1, writing nothing else. Registered only for builds with the CUDA backend.
"""

import argparse
import os
import shutil
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from mpc_proc import run, run_unittests  # noqa: E402

ARGS = None


class GpuBundleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mpc-bundle-test-")
        cls.bundle = os.path.join(cls.tmp, "bundle")
        env = dict(os.environ, BUILD_DIR=ARGS.build_dir)
        cls.proc = run(["bash", os.path.join(ARGS.source_dir, "tools", "gpu-bundle.sh"),
                        "--no-build", cls.bundle], env=env, timeout=1200)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_1_builds_within_its_size(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertEqual(sorted(os.listdir(self.bundle)), ["payload.tar.xz", "run.sh"])
        size = sum(os.path.getsize(os.path.join(self.bundle, f)) for f in os.listdir(self.bundle))
        self.assertLessEqual(size, 40 * 1024 * 1024)

    def test_2_payload_contents(self):
        with tarfile.open(os.path.join(self.bundle, "payload.tar.xz")) as t:
            names = set(t.getnames())
        for exe in ("mpc", "RuntimeElementwiseTest", "RuntimeGemmConvTest",
                    "mpc_training_ops_tests", "RuntimeDataTest", "RuntimeRecurrentTest"):
            self.assertIn(f"libexec/{exe}", names)
        # mpc's CUDA backend, where libexec/mpc looks for it (../lib).
        self.assertIn("lib/libmpc_cuda_backend.so", names)
        for src in ("src/tests/cuda_host/test_cuda_parity.py", "src/tools/gpu_e2e.py",
                    "src/models/mlp.onnx", "src/bench/gpu_matmul.py"):
            self.assertIn(src, names)
        libs = {n[4:] for n in names if n.startswith("lib/") and ".so" in n}
        self.assertTrue(any(n.startswith("libprotobuf") for n in libs), libs)
        self.assertTrue(any(n.startswith("libcudart") for n in libs), libs)
        for banned in ("libc.so", "libcuda.so", "libcublas", "libcublasLt", "libcudnn",
                       "libstdc++"):
            self.assertFalse(any(n.startswith(banned) for n in libs), (banned, libs))

    def test_3_bundled_mpc_runs_with_its_own_libraries(self):
        work = os.path.join(self.tmp, "unpacked")
        os.makedirs(work, exist_ok=True)
        with tarfile.open(os.path.join(self.bundle, "payload.tar.xz")) as t:
            t.extractall(work, filter="data") if sys.version_info >= (3, 12) else t.extractall(work)
        # Only the bundle's lib/ and the CUDA toolkit (for cuBLASLt, as on the GPU machine).
        cuda_libs = [d for d in ("/usr/local/cuda/lib64", "/usr/local/cuda/lib")
                     if os.path.isdir(d)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "LD_LIBRARY_PATH": ":".join([os.path.join(work, "lib")] + cuda_libs)}
        # Every library the binaries load resolves to the bundle, the CUDA install, or the
        # C/C++ runtime any Linux machine has (the loader would find the rest here too, so
        # a missing one shows only in where it resolves).
        system_ok = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so",
                     "libpthread.so", "librt.so", "libstdc++.so", "libgcc_s.so")
        binaries = [os.path.join(work, "libexec", exe)
                    for exe in os.listdir(os.path.join(work, "libexec"))]
        binaries.append(os.path.join(work, "lib", "libmpc_cuda_backend.so"))
        for path in binaries:
            exe = os.path.basename(path)
            ldd = run(["ldd", path], env=env, timeout=60)
            for line in ldd.stdout.splitlines():
                name = os.path.basename(line.split()[0])
                path = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
                if name.startswith(system_ok):
                    continue
                self.assertTrue(path.startswith(tuple([os.path.join(work, "lib")] + cuda_libs)),
                                f"{exe}: {name} resolves to {path or 'nothing'}")
        model = os.path.join(work, "src", "models", "mlp.onnx")
        p = run([os.path.join(work, "libexec", "mpc"), "run", model, "--random-inputs"],
                env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("output", p.stdout)
        # --device cuda opens the bundle's plugin: without a GPU, the backend's own line.
        p = run([os.path.join(work, "libexec", "mpc"), "run", model, "--random-inputs",
                 "--device", "cuda"], env=env)
        if p.returncode != 0:
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertRegex(p.stderr, r"^mpc: error: --device cuda: no CUDA device found "
                                       r"\(cudaGetDeviceCount: .+\)\n$")

    def test_4_run_sh_without_a_gpu(self):
        out = os.path.join(self.tmp, "report")
        # A PATH without nvidia-smi stands for a machine without the driver.
        env = {"PATH": "/usr/bin:/bin", "HOME": self.tmp}
        p = run(["bash", os.path.join(self.bundle, "run.sh"), out], env=env, timeout=60)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "run.sh: no GPU present (nvidia-smi lists none); nothing was run\n")
        self.assertEqual(os.listdir(out), ["report.md"])


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    ARGS, rest = ap.parse_known_args()
    return run_unittests(rest)


if __name__ == "__main__":
    sys.exit(main())
