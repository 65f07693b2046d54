#!/usr/bin/env python3
"""Every registry shape function lives in runtime/ops, none in a backend.

The op registry (runtime/ops, docs/op-registry.md) names one shape function per
row; a backend's kernels call the same geometry helpers (runtime/ops/NodeGeometry.h)
but never define a shape rule of their own. This suite checks on the sources:
- every function ShapeFunctions.h declares (its list MPC_SHAPE_FUNCTIONS) is
  defined exactly once, in runtime/ops/shapes/*.cpp;
- no file of a backend or of the core (runtime/cpu, runtime/cuda, runtime/core,
  runtime/kernels) defines a function in namespace mpc::shapes;
- no registry source includes a header of the CPU backend (the build enforces
  this too: runtime/cpu/include is not on mpc_ops's include path).

usage:
    python3 tests/ops/test_shape_rules_layout.py --source-dir . [--mpc ignored] [-v]
"""

import argparse
import os
import re
import sys
import unittest

SOURCE_DIR = None
DECLS = "runtime/ops/ShapeFunctions.h"
SHAPES_DIR = "runtime/ops/shapes"
OUTSIDE = ["runtime/cpu", "runtime/cuda", "runtime/core", "runtime/kernels"]
SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh", ".def", ".inc")


def files_under(rel_dir):
    for dirpath, _, names in os.walk(os.path.join(SOURCE_DIR, rel_dir)):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, n), SOURCE_DIR)


def code_of(rel):
    """The file without comments and string literals."""
    with open(os.path.join(SOURCE_DIR, rel)) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return "\n".join(l.split("//", 1)[0] for l in text.splitlines())


# A definition `<type> shapes::name(params) {` at the start of a line (qualified,
# as runtime/ops writes them; a call inside an expression has a parenthesis
# or indentation before it), or any `namespace shapes {` block.
QUALIFIED_DEF = re.compile(
    r"^(?!\s)[^\n;(){}]*\b(?:mpc::)?shapes::(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?\{", re.M)
NAMESPACE_OPEN = re.compile(r"\bnamespace\s+(?:mpc::)?shapes\s*\{")


def declared_shape_functions():
    """The entries X(name) of ShapeFunctions.h's one list, MPC_SHAPE_FUNCTIONS."""
    m = re.search(r"#define MPC_SHAPE_FUNCTIONS\(X\)((?:[^\n]*\\\n)*[^\n]*)", code_of(DECLS))
    return re.findall(r"\bX\((shape\w+)\)", m.group(1)) if m else []


class ShapeRulesLayoutTest(unittest.TestCase):
    def test_every_declared_shape_function_is_defined_once_in_ops_shapes(self):
        declared = declared_shape_functions()
        self.assertGreater(len(declared), 70, f"{DECLS}: declarations not found")
        where = {}
        for rel in files_under(SHAPES_DIR):
            for name in QUALIFIED_DEF.findall(code_of(rel)):
                where.setdefault(name, []).append(rel)
        for name in declared:
            self.assertEqual(len(where.get(name, [])), 1,
                             f"shapes::{name} is defined in {where.get(name, [])}, "
                             f"expected exactly once in {SHAPES_DIR}")

    def test_no_backend_or_core_file_defines_a_shapes_function(self):
        checked = 0
        for top in OUTSIDE:
            for rel in files_under(top):
                checked += 1
                code = code_of(rel)
                m = QUALIFIED_DEF.search(code)
                self.assertIsNone(m, f"{rel} defines shapes::{m.group(1) if m else ''}; "
                                     f"shape rules and their helpers belong in runtime/ops")
                self.assertIsNone(NAMESPACE_OPEN.search(code),
                                  f"{rel} opens namespace shapes; shape rules and their "
                                  f"helpers belong in runtime/ops")
        self.assertGreater(checked, 30)

    def test_registry_includes_no_cpu_backend_header(self):
        cpu = re.compile(r'#include\s*[<"]([^>"]*(?:Runtime/Cpu/|CpuBackend\.h|CpuKernels\.h|'
                         r'\.\./cpu/)[^>"]*)[>"]')
        for rel in files_under("runtime/ops"):
            with open(os.path.join(SOURCE_DIR, rel)) as f:
                m = cpu.search(f.read())
            self.assertIsNone(m, f"{rel} includes {m.group(1) if m else ''} of the CPU backend")


def main():
    global SOURCE_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", help="unused (the suite reads sources only)")
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    SOURCE_DIR = os.path.abspath(args.source_dir)
    suite = unittest.TestLoader().loadTestsFromTestCase(ShapeRulesLayoutTest)
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1,
                                     stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
