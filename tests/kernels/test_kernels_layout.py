#!/usr/bin/env python3
"""runtime/kernels holds header-only host/device op bodies and nothing CPU-specific.

The nvcc build check (KernelsCompileWithNvcc.cu) proves the bodies compile as device
code where nvcc is found; this suite states the layout rule everywhere, nvcc or not
(docs/backends.md, "Where things are"):
- runtime/kernels holds headers only (no .cpp, no .cu), and the nvcc check includes
  every one of them;
- a kernels header includes only other kernels headers and a short list of C/C++
  headers that device code can use (no LLVM, no containers, no threads, no intrinsics);
- no CPU-only construct appears in them (std::vector, std::thread, SIMD intrinsics,
  target attributes, llvm::, BLAS);
- every function a header defines at namespace scope is MPC_HD (or constexpr, which
  nvcc accepts in device code only with --expt-relaxed-constexpr, so it is MPC_HD too).

usage:
    python3 tests/kernels/test_kernels_layout.py --source-dir . [--mpc ignored] [-v]
"""

import argparse
import os
import re
import sys
import unittest

SOURCE_DIR = None
KERNELS = "runtime/kernels"
CHECK = "tests/kernels/KernelsCompileWithNvcc.cu"

# Standard headers whose contents device code may use (types, traits, C math).
ALLOWED_SYSTEM = {"cstdint", "cstring", "stdint.h", "math.h", "type_traits"}
FORBIDDEN = [
    (r"\bstd::(vector|thread|mutex|atomic|function|string|map|unique_ptr)\b",
     "a host container or thread"),
    (r"\b_mm\d*_\w+|__m(128|256|512)\w*", "a SIMD intrinsic"),
    (r"__attribute__\s*\(\(\s*target", "a CPU target attribute"),
    (r"\bllvm::", "LLVM"),
    (r"\bcblas_\w+", "BLAS"),
]


def kernel_files():
    root = os.path.join(SOURCE_DIR, KERNELS)
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            yield os.path.relpath(os.path.join(dirpath, n), SOURCE_DIR)


def read(rel):
    with open(os.path.join(SOURCE_DIR, rel)) as f:
        return f.read()


def code_of(text):
    """The text without // comments and string literals (no block comments are used)."""
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return "\n".join(l.split("//", 1)[0] for l in text.splitlines())


class KernelsLayoutTest(unittest.TestCase):
    def test_headers_only_and_all_compiled_by_nvcc_check(self):
        files = list(kernel_files())
        self.assertGreater(len(files), 5)
        for rel in files:
            self.assertRegex(rel, r"\.(h|def)$", f"{rel}: runtime/kernels holds headers only")
        included = set(re.findall(r'#include "([^"]+)"', read(CHECK)))
        for rel in files:
            if rel.endswith(".h"):
                name = rel.split("/include/", 1)[1]
                self.assertIn(name, included, f"{CHECK} does not include {name}")

    def test_includes_stay_in_kernels(self):
        own = {f.split("/include/", 1)[-1] for f in kernel_files()}
        for rel in kernel_files():
            for kind, name in re.findall(r'#include\s*([<"])([^>"]+)[>"]', read(rel)):
                if kind == '"':
                    self.assertIn(name, own, f"{rel} includes {name}, outside runtime/kernels")
                else:
                    self.assertIn(name, ALLOWED_SYSTEM,
                                  f"{rel} includes <{name}>, not on the device-safe list")

    def test_nothing_cpu_specific(self):
        for rel in kernel_files():
            code = code_of(read(rel))
            for pattern, what in FORBIDDEN:
                m = re.search(pattern, code)
                self.assertIsNone(m, f"{rel}: {what} ({m.group(0) if m else ''})")

    def test_namespace_scope_functions_are_host_device(self):
        # The headers define functions at namespace scope unindented, the
        # signature on one line (after a `template <...>` line, if any), ending
        # in `{` or `{ ... }`; struct members are indented and covered by nvcc.
        checked = 0
        for rel in kernel_files():
            if not rel.endswith(".h"):
                continue
            lines = code_of(read(rel)).splitlines()
            for i, line in enumerate(lines):
                if (re.match(r"template <[^()]*>\s*$", line) and i + 1 < len(lines)
                        and lines[i + 1][:1] not in ("", " ")):
                    line = line + " " + lines[i + 1]
                elif line[:1] in ("", " ", "#", "}") or line.startswith("template"):
                    if not line.startswith("template"):
                        continue
                if "(" not in line or not re.search(r"\)\s*(const\s*)?\{", line):
                    continue
                if re.match(r"(template <[^()]*> )?(struct|class|enum|union|namespace)\b", line):
                    continue
                checked += 1
                self.assertIn("MPC_HD", line.split("(", 1)[0], f"{rel}:{i + 1}: not MPC_HD")
        self.assertGreater(checked, 30)


def main():
    global SOURCE_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mpc", help="unused (the suite reads sources only)")
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    SOURCE_DIR = os.path.abspath(args.source_dir)
    suite = unittest.TestLoader().loadTestsFromTestCase(KernelsLayoutTest)
    result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1,
                                     stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
