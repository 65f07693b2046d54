#!/usr/bin/env python3
"""The runtime core knows no backend; the backends depend on the core.

mpc_runtime (runtime/core with the registry, runtime/ops) is the backend
interface, the executor and the trainer; mpc_runtime_cpu and the CUDA
libraries implement backends on top of it. The dependency is one way. This
suite checks it where it would silently come back:
- symbols: no object of mpc_runtime references a symbol that only a backend
  library defines (nm over the static libraries); as a check of the check,
  the CPU backend does reference the core (Backend's destructor), so a
  reference in the other direction would be found the same way;
- sources: no file of runtime/core includes a header of runtime/cpu or
  runtime/cuda (the build enforces this too: no backend include directory is
  on mpc_runtime's include path).

usage:
    python3 tests/layering/test_runtime_layering.py --source-dir . --nm nm \\
        --core build/runtime/libmpc_runtime.a --backend cpu=build/.../libmpc_runtime_cpu.a
"""

import argparse
import os
import re
import subprocess
import sys
import unittest

ARGS = None
CORE_DIR = "runtime/core"
BACKEND_INCLUDES = re.compile(
    r'^\s*#\s*include\s*[<"]([^">]*(?:\.\./cpu/|\.\./cuda/|mpc/Runtime/Cpu/|'
    r'mpc/Runtime/CpuBackend\.h|mpc/Runtime/Cuda/)[^">]*)[">]', re.M)


def symbols(lib, *flags):
    """The symbol names nm lists for `lib` with `flags` (mangled)."""
    out = subprocess.run([ARGS.nm, *flags, lib], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        # "<address> <type> <name>" for defined symbols, "U <name>" for
        # undefined ones; archive member headers ("x.o:") have no type.
        if len(parts) >= 2 and len(parts[-2]) == 1:
            names.add(parts[-1])
    return names


def defined(lib):
    return symbols(lib, "--defined-only", "--extern-only")


def undefined(lib):
    return symbols(lib, "--undefined-only")


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(sorted(names)), capture_output=True,
                         text=True)
    return out.stdout.splitlines() if out.returncode == 0 else sorted(names)


def crossing(user, provider):
    """Symbols `user` needs that only `provider` defines."""
    return (undefined(user) & defined(provider)) - defined(user)


class RuntimeLayeringTest(unittest.TestCase):
    def test_core_references_no_backend_symbol(self):
        self.assertTrue(ARGS.backend, "no backend library given")
        for name, lib in ARGS.backend:
            with self.subTest(backend=name):
                found = crossing(ARGS.core, lib)
                self.assertFalse(found, f"mpc_runtime ({ARGS.core}) references symbols defined "
                                        f"only in the {name} backend ({lib}): " +
                                 "; ".join(demangle(found)[:10]))

    def test_the_check_sees_the_cpu_backend_use_the_core(self):
        cpu = dict(ARGS.backend).get("cpu")
        self.assertIsNotNone(cpu, "the cpu backend library is not given")
        found = demangle(crossing(cpu, ARGS.core))
        self.assertIn("mpc::Backend::~Backend()", found,
                      "nm found no reference from the CPU backend to the core's Backend: "
                      "the symbol check cannot see a dependency")

    def test_core_sources_include_no_backend_header(self):
        root = os.path.join(ARGS.source_dir, CORE_DIR)
        checked = 0
        for dirpath, _, names in os.walk(root):
            for n in sorted(names):
                if not n.endswith((".cpp", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, n), ARGS.source_dir)
                with open(os.path.join(dirpath, n)) as f:
                    m = BACKEND_INCLUDES.search(f.read())
                checked += 1
                self.assertIsNone(m, f"{rel} includes the backend header "
                                     f"'{m.group(1) if m else ''}'")
        self.assertGreater(checked, 10, f"no sources found under {root}")

    def test_the_include_check_finds_a_backend_include(self):
        for line in ('#include "../cpu/CpuKernels.h"', '#include "mpc/Runtime/CpuBackend.h"',
                     '#include "mpc/Runtime/Cpu/Broadcast.h"',
                     '#include "mpc/Runtime/Cuda/CudaBackend.h"'):
            self.assertIsNotNone(BACKEND_INCLUDES.search(line), line)
        for line in ('#include "mpc/Runtime/Backend.h"', '#include "../ops/ShapeHelpers.h"',
                     '#include "mpc/Runtime/Kernels/Storage.h"'):
            self.assertIsNone(BACKEND_INCLUDES.search(line), line)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--source-dir", required=True)
    p.add_argument("--mpc", help="unused (every pytest suite gets it)")
    p.add_argument("--nm", default="nm")
    p.add_argument("--core", required=True)
    p.add_argument("--backend", action="append", default=[],
                   type=lambda s: tuple(s.split("=", 1)), help="NAME=static library")
    p.add_argument("-v", action="store_true")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2 if ARGS.v else 1)


if __name__ == "__main__":
    main()
