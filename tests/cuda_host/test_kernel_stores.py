#!/usr/bin/env python3
"""The multi-tensor kernels store what they compute: their PTX, checked without a GPU.

    python3 tests/cuda_host/test_kernel_stores.py --mpc build/tools/mpc --source-dir . \
        --build-dir build

The kernels that read their tensors' pointers from a `__grid_constant__` parameter
(LaunchPointers, runtime/cuda/include/mpc/Runtime/Cuda/UnscalePlan.h) are compiled to PTX
for sm_90 with the build's own nvcc command (compile_commands.json), and each kernel's
body must hold the global stores of its outputs. The first GPU run of the by-value
pointers (2026-11-27, docs/gpu-report.md) found MultiTensorUnscale's fp32 outputs all
zero: nvcc had dropped every store of them, since the kernel chose its destination with
`u ? u[i] : scratch` (a reference to either a global element or a local), and kept only
the flag stores. Nothing on a CPU runs these kernels, so this is what CI can see of it.
Registered only for builds with the CUDA backend.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from mpc_proc import run_unittests  # noqa: E402

ARGS = None

# source file -> kernel name -> the global stores its body must hold (PTX spelling), each
# with what it writes.
EXPECTED = {
    "runtime/cuda/UnscaleKernels.cu": {
        "multiTensorUnscaleKernel": {
            "st.global.f32": "the fp32 unscaled gradients",
            "st.global.u8": "the found-inf flag",
        },
    },
    "runtime/cuda/OptimizerKernels.cu": {
        "multiTensorStepKernel": {
            "st.global.f32": "the fp32 weights and optimizer state",
        },
    },
}


def ptx_command(entry, out):
    """The build's nvcc command for `entry` made to write sm_90 PTX to `out`."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    kept = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        if a.startswith("--generate-code") or a.startswith("-gencode") or a.startswith("-arch"):
            continue
        if a == entry["file"] or os.path.abspath(a) == os.path.abspath(entry["file"]):
            continue
        kept.append(a)
    return kept + ["-arch=sm_90", "-ptx", entry["file"], "-o", out]


def kernel_bodies(ptx):
    """Kernel name (a substring of its mangled entry) -> its PTX body, for every .entry."""
    parts = re.split(r"^\.(?:visible )?\.?entry\s+", ptx, flags=re.M)
    out = {}
    for part in parts[1:]:
        name = part.split("(", 1)[0].strip()
        out[name] = part
    return out


class KernelStoresTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        path = os.path.join(ARGS.build_dir, "compile_commands.json")
        with open(path) as f:
            cls.commands = {os.path.realpath(e["file"]): e for e in json.load(f)}
        cls.tmp = tempfile.TemporaryDirectory(prefix="mpc-ptx-")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def ptx(self, source):
        entry = self.commands.get(os.path.realpath(os.path.join(ARGS.source_dir, source)))
        self.assertIsNotNone(entry, f"{source} is not in the build's compile_commands.json")
        out = os.path.join(self.tmp.name, os.path.basename(source) + ".ptx")
        r = subprocess.run(ptx_command(entry, out), cwd=entry["directory"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            return f.read()

    def test_every_multi_tensor_kernel_stores_its_outputs(self):
        for source, kernels in EXPECTED.items():
            bodies = kernel_bodies(self.ptx(source))
            for kernel, stores in kernels.items():
                with self.subTest(kernel=kernel):
                    found = [b for name, b in bodies.items() if kernel in name]
                    self.assertEqual(len(found), 1, f"{kernel} in {source}: {sorted(bodies)}")
                    for op, what in stores.items():
                        self.assertTrue(op in found[0], f"{kernel} does not store {what} ({op})")

    def test_the_grid_constant_kernels_are_all_listed(self):
        # A new kernel taking its pointers as a __grid_constant__ parameter belongs in
        # EXPECTED: those are the kernels whose stores a miscompile removed.
        listed = {k for ks in EXPECTED.values() for k in ks}
        seen = set()
        cuda_dir = os.path.join(ARGS.source_dir, "runtime", "cuda")
        for name in sorted(os.listdir(cuda_dir)):
            if not name.endswith(".cu"):
                continue
            with open(os.path.join(cuda_dir, name)) as f:
                text = f.read()
            for m in re.finditer(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)", text):
                if "__grid_constant__" in m.group(2):
                    seen.add(m.group(1))
        self.assertEqual(seen, listed)


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
