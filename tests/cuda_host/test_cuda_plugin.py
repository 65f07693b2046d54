#!/usr/bin/env python3
"""The CUDA backend is a plugin that mpc opens only when a command needs a GPU.

    python3 tests/cuda_host/test_cuda_plugin.py --mpc build/tools/mpc --source-dir . \
        --plugin build/lib/libmpc_cuda_backend.so|none --nm nm --readelf readelf --cc cc \
        --core-lib build/runtime/libmpc_runtime.a [--core-lib ...] [-v]

Checked (runtime/cuda/include/mpc/Runtime/Cuda/CudaPlugin.h, docs/backends.md):
- mpc itself needs no CUDA library (readelf: no NEEDED entry), and `mpc --version`,
  `mpc rewrite`, `mpc inspect` and `mpc run` on the CPU map none (LD_DEBUG=files);
- with a plugin (--plugin PATH): it is build/lib/libmpc_cuda_backend.so beside
  build/tools; `mpc run --device cuda` opens it and, on a machine without a GPU, gives the
  one line it gave when mpc linked the backend; the plugin defines no symbol of the core
  libraries it runs on (they are mpc's: one registry, one set of LLVM statics), needs no
  typeinfo (the build has no RTTI), and every symbol it needs is defined by mpc or by a
  library it names; moved away, or needing a library that is missing, or from another
  build, it is refused in one line naming the path and the reason, exit 1, nothing written.

The last line printed is 'N passed, N failed'; exit status 1 on any failure.
"""

import argparse
import glob
import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from mpc_proc import clean_env, run, run_unittests  # noqa: E402

ARGS = None
CUDA_LIBS = re.compile(r"lib(cudart|cublas|cublasLt|cudnn[a-z_]*)\.so")
# cudaGetDeviceCount's own text and error name follow in the parentheses.
NO_DEVICE = r"no CUDA device found \(cudaGetDeviceCount: .+\)"


def loaded_files(cmd, tmp):
    """(process, the files the dynamic loader opened for `cmd`) via LD_DEBUG=files."""
    prefix = os.path.join(tmp, "ld-debug")
    env = clean_env({"LD_DEBUG": "files", "LD_DEBUG_OUTPUT": prefix})
    p = run(cmd, env=env)
    files = set()
    for log in glob.glob(prefix + ".*"):
        with open(log) as f:
            for line in f:
                m = re.search(r"\bfile=(\S+)\s", line)
                if m:
                    files.add(m.group(1))
        os.remove(log)
    return p, files


def symbols(path, *flags):
    out = run([ARGS.nm, *flags, path]).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and len(parts[-2]) == 1:
            names.add((parts[-2], parts[-1]))
    return names


def needed(path):
    out = run([ARGS.readelf, "-d", path]).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


class CudaPluginTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mpc-plugin-test-")
        self.model = os.path.join(ARGS.source_dir, "models", "mlp.onnx")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def one_line(self, p):
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        return lines[0]

    # --- every build -------------------------------------------------------------------

    def test_mpc_needs_no_cuda_library(self):
        libs = needed(ARGS.mpc)
        self.assertTrue(libs, "readelf found no NEEDED entry at all")
        self.assertEqual([n for n in libs if CUDA_LIBS.search(n)], [], libs)

    def test_commands_without_a_gpu_map_no_cuda_library(self):
        out = os.path.join(self.tmp, "m.amp.onnx")
        for cmd in (["--version"], ["rewrite", self.model, "-o", out],
                    ["inspect", self.model], ["run", self.model, "--random-inputs"],
                    ["ops", "--op", "MatMul"]):
            with self.subTest(cmd=cmd[0]):
                p, files = loaded_files([ARGS.mpc, *cmd], self.tmp)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertTrue(any("libc.so" in f for f in files), "LD_DEBUG logged nothing")
                opened = sorted(f for f in files
                                if CUDA_LIBS.search(f) or "mpc_cuda_backend" in f)
                self.assertEqual(opened, [], f"mpc {cmd[0]} opened {opened}")

    # --- builds with the plugin ----------------------------------------------------------

    def need_plugin(self):
        if ARGS.plugin == "none":
            self.skipTest("this build has no CUDA backend")

    def test_plugin_is_beside_the_binary(self):
        self.need_plugin()
        build = os.path.dirname(os.path.dirname(os.path.realpath(ARGS.mpc)))
        self.assertEqual(os.path.realpath(ARGS.plugin),
                         os.path.join(build, "lib", "libmpc_cuda_backend.so"))
        libs = needed(ARGS.plugin)
        for lib in ("libcudart.so", "libcublasLt.so"):
            self.assertTrue(any(n.startswith(lib) for n in libs), (lib, libs))

    def test_device_cuda_opens_the_plugin(self):
        self.need_plugin()
        out = os.path.join(self.tmp, "out")
        p, files = loaded_files([ARGS.mpc, "run", self.model, "--random-inputs", "--device",
                                 "cuda", "--outputs", out], self.tmp)
        self.assertIn(os.path.realpath(ARGS.plugin), {os.path.realpath(f) for f in files
                                                      if os.path.isabs(f)}, sorted(files))
        self.assertTrue(any("libcublasLt" in f for f in files), sorted(files))
        if p.returncode == 0:
            self.skipTest("a CUDA device is present: the refusal cannot be provoked")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertRegex(self.one_line(p), "^mpc: error: --device cuda: " + NO_DEVICE + "$")
        self.assertEqual(p.stdout, "")
        self.assertFalse(os.path.exists(out))

    def test_plugin_has_no_copy_of_the_core(self):
        self.need_plugin()
        core = set()
        for lib in ARGS.core_lib:
            core |= {name for kind, name in symbols(lib, "--defined-only", "--extern-only")
                     if kind in "TDBR"}
        self.assertGreater(len(core), 500, "nm found too few symbols in the core libraries")
        plugin = symbols(ARGS.plugin, "-D", "--defined-only")
        # Strong definitions of a core symbol would be a second copy (a weak one, an
        # inline function's, is mpc's at run time: the loader binds mpc's first).
        twice = sorted(name for kind, name in plugin if kind in "TDBR" and name in core)
        self.assertEqual(twice, [])
        entries = {name for kind, name in plugin if kind == "T"}
        for e in ("mpc_cuda_plugin_abi", "mpc_cuda_plugin_version", "mpc_cuda_plugin_create"):
            self.assertIn(e, entries)
        # What the plugin leaves undefined and mpc defines: the core itself.
        undefined = {name for _, name in symbols(ARGS.plugin, "-D", "--undefined-only")}
        exported = {name for _, name in symbols(ARGS.mpc, "-D", "--defined-only")}
        from_mpc = undefined & exported
        for sym in ("_ZN4llvm11StringError2IDE", "_ZN4llvm4errsEv"):
            if sym in undefined:
                self.assertIn(sym, exported)
        self.assertTrue(any(s.startswith("_ZN3mpc") for s in from_mpc), sorted(from_mpc)[:20])
        # No RTTI in the project: nothing may need the typeinfo of a class of mpc or LLVM.
        self.assertEqual(sorted(s for s in undefined
                                if s.startswith(("_ZTIN3mpc", "_ZTIN4llvm", "_ZTSN3mpc"))), [])

    def test_every_symbol_the_plugin_needs_is_defined(self):
        self.need_plugin()
        undefined = {name.split("@")[0] for _, name in
                     symbols(ARGS.plugin, "-D", "--undefined-only")}
        defined = {name.split("@")[0] for _, name in symbols(ARGS.mpc, "-D", "--defined-only")}
        ldd = run(["ldd", ARGS.plugin]).stdout
        for path in re.findall(r"=> (/\S+)", ldd):
            defined |= {name.split("@")[0] for _, name in
                        symbols(path, "-D", "--defined-only")}
        weak = {name.split("@")[0] for kind, name in
                symbols(ARGS.plugin, "-D", "--undefined-only") if kind in "wv"}
        missing = sorted(undefined - defined - weak)
        self.assertEqual(missing, [])

    # --- the plugin refused ---------------------------------------------------------------

    def copy_mpc(self):
        """mpc alone in TMP/bin (its plugin would be TMP/lib/libmpc_cuda_backend.so)."""
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        exe = os.path.join(bindir, "mpc")
        shutil.copy2(ARGS.mpc, exe)
        return exe, os.path.join(self.tmp, "lib", "libmpc_cuda_backend.so")

    def assert_refused(self, exe, reason):
        """Every command that opens the plugin says `reason` in one line, exit 1."""
        out = os.path.join(self.tmp, "out")
        amp = os.path.join(self.tmp, "m.amp.onnx")
        for option, cmd in (("--device", ["run", self.model, "--random-inputs", "--device",
                                          "cuda", "--outputs", out]),
                            ("--compare-device", ["run", self.model, "--random-inputs",
                                                  "--compare-device", "cuda", "--outputs",
                                                  out]),
                            ("--backend", ["rewrite", self.model, "--backend", "cuda", "-o",
                                           amp])):
            with self.subTest(option=option):
                p = run([exe, *cmd])
                self.assertEqual(p.returncode, 1, p.stderr)
                line = self.one_line(p)
                self.assertTrue(line.startswith(f"mpc: error: {option} cuda: "), line)
                self.assertRegex(line[len(f"mpc: error: {option} cuda: "):], reason)
                self.assertEqual(p.stdout, "")
                self.assertFalse(os.path.exists(out))
                self.assertFalse(os.path.exists(amp))

    def test_plugin_missing(self):
        self.need_plugin()
        exe, plugin = self.copy_mpc()
        self.assert_refused(exe, "^cannot load the CUDA backend " + re.escape(f"'{plugin}'") +
                            ": cannot open shared object file: No such file or directory$")
        # What needs no GPU works as before.
        p = run([exe, "--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        p = run([exe, "run", self.model, "--random-inputs"])
        self.assertEqual(p.returncode, 0, p.stderr)

    def fake_plugin(self, plugin, source, libs=()):
        os.makedirs(os.path.dirname(plugin), exist_ok=True)
        src = os.path.join(self.tmp, "fake.c")
        with open(src, "w") as f:
            f.write(source)
        p = run([ARGS.cc, "-shared", "-fPIC", "-o", plugin, src, "-Wl,--no-as-needed", *libs])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_plugin_needs_a_missing_library(self):
        self.need_plugin()
        exe, plugin = self.copy_mpc()
        # A plugin that needs libmpc_gone.so, which is removed after the link (as a machine
        # without cuBLASLt would lack libcublasLt.so.13).
        gone = os.path.join(self.tmp, "gone")
        self.fake_plugin(os.path.join(gone, "libmpc_gone.so"), "int gone(void) { return 1; }")
        self.fake_plugin(plugin, "int gone(void);\nint f(void) { return gone(); }\n",
                         ["-L" + gone, "-lmpc_gone"])
        shutil.rmtree(gone)
        self.assert_refused(exe, "^cannot load the CUDA backend " + re.escape(f"'{plugin}'") +
                            ": libmpc_gone.so: cannot open shared object file: "
                            "No such file or directory$")

    def test_not_a_plugin(self):
        self.need_plugin()
        exe, plugin = self.copy_mpc()
        self.fake_plugin(plugin, "int mpc_cuda_plugin_abi(void) { return 1; }\n")
        self.assert_refused(exe, "^the CUDA backend " + re.escape(f"'{plugin}'") +
                            r" is not an mpc CUDA plugin \(it lacks mpc_cuda_plugin_version\)$")

    def test_plugin_of_another_build(self):
        self.need_plugin()
        exe, plugin = self.copy_mpc()
        # Its create entry would crash if it were called: the checks come first.
        self.fake_plugin(plugin, "unsigned mpc_cuda_plugin_abi(void) { return 999; }\n"
                                 "const char *mpc_cuda_plugin_version(void) { return \"0.0.9\"; }\n"
                                 "void *mpc_cuda_plugin_create(const void *o) {\n"
                                 "  return *(void **)0;\n}\n")
        self.assert_refused(exe, "^the CUDA backend " + re.escape(f"'{plugin}'") +
                            r" is from another build of mpc \(plugin ABI 999, version '0\.0\.9'; "
                            r"this mpc: ABI \d+, version '[0-9.]+'\)$")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--readelf", default="readelf")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--core-lib", action="append", default=[])
    ARGS, rest = ap.parse_known_args()
    return run_unittests(rest)


if __name__ == "__main__":
    sys.exit(main())
