#!/usr/bin/env python3
"""startup_bench.py - what an `mpc` process costs before it does any work.

Runs `mpc --version`, `mpc rewrite` of a small shipped model (models/mlp.onnx, written to a
temporary folder) and `mpc run --device cuda` of it (which may exit 1: no GPU) --repeat times for each --mpc binary, interleaved (run r of every
binary before run r+1 of any) and pinned to core 0 under /usr/bin/time -v, and prints a
Markdown table of the lowest wall time (the whole taskset + time + mpc process tree), user +
system CPU time (wait4, to the microsecond) and peak resident memory (/usr/bin/time) of
each: the lowest, because a shared machine only ever adds to them. Also lists which CUDA
libraries the process mapped (LD_DEBUG=files). A benchmark, not a test.

With --cuda-only, only the `--device cuda` run (which must then succeed: a GPU machine), and
--parallel N adds the wall time of N such processes started at once, unpinned (what a suite
of one process per case pays when it runs N workers on one GPU).

usage: python3 bench/startup_bench.py --mpc build/tools/mpc [--mpc /tmp/mpc-old]
                                      [--repeat 20] [--source-dir .]
                                      [--cuda-only] [--parallel N]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_LIB = re.compile(r"file=(\S*lib(?:cudart|cublasLt|cublas|cudnn)[^\s/]*)\s")


def timed(cmd, ok=(0,)):
    """(wall s, CPU s, peak RSS KiB) of one run of `cmd` under /usr/bin/time -v."""
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        p = subprocess.Popen(["taskset", "-c", "0", "/usr/bin/time", "-v", *cmd],
                             stdout=subprocess.DEVNULL, stderr=err)
        # wait4's usage covers the process and what it waited for (time, then mpc), to
        # the microsecond; /usr/bin/time -v rounds CPU time to 10 ms.
        _, status, usage = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    if p.returncode not in ok:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {stderr.strip()}")
    fields = dict(line.strip().rsplit(": ", 1) for line in stderr.splitlines()
                  if ": " in line)
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, int(fields["Maximum resident set size (kbytes)"])


def at_once(cmd, n):
    """(wall s of `n` copies of `cmd` started together, their exit statuses)."""
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(n)]
    codes = [p.wait() for p in procs]
    return time.perf_counter() - start, codes


def cuda_libraries(cmd):
    env = dict(os.environ, LD_DEBUG="files")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return sorted({os.path.basename(m) for m in CUDA_LIB.findall(p.stderr)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", action="append", required=True)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--source-dir", default=os.path.dirname(HERE))
    ap.add_argument("--cuda-only", action="store_true",
                    help="only `mpc run --device cuda`, which must succeed")
    ap.add_argument("--parallel", type=int, default=0,
                    help="also time N `--device cuda` processes started at once")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpc-startup-") as tmp:
        model = os.path.join(args.source_dir, "models", "mlp.onnx")
        commands = {
            "--version": lambda mpc: [mpc, "--version"],
            "rewrite mlp.onnx": lambda mpc: [mpc, "rewrite", model, "-o",
                                             os.path.join(tmp, "mlp.amp.onnx")],
            # Opens the CUDA backend; exits 1 where no GPU is usable.
            "run mlp.onnx --device cuda": lambda mpc: [mpc, "run", model, "--random-inputs",
                                                       "--device", "cuda"],
        }
        cuda = "run mlp.onnx --device cuda"
        if args.cuda_only:
            commands = {cuda: commands[cuda]}
        best = {}
        for _ in range(args.repeat):
            for name, make in commands.items():
                for mpc in args.mpc:
                    ok = (0,) if not "cuda" in name or args.cuda_only else (0, 1)
                    wall, cpu, rss = timed(make(mpc), ok=ok)
                    w, c, r = best.get((name, mpc), (wall, cpu, rss))
                    best[(name, mpc)] = (min(w, wall), min(c, cpu), min(r, rss))
        print(f"| command | mpc | wall ms | CPU ms | peak RSS MiB | CUDA libraries mapped |")
        print("|---|---|---:|---:|---:|---|")
        for name, make in commands.items():
            for mpc in args.mpc:
                wall, cpu, rss = best[(name, mpc)]
                libs = ", ".join(cuda_libraries(make(mpc))) or "none"
                print(f"| `mpc {name}` | {mpc} | {wall * 1000:.0f} | {cpu * 1000:.0f} | "
                      f"{rss / 1024:.0f} | {libs} |")
        if args.parallel > 0:
            print()
            for mpc in args.mpc:
                wall, codes = at_once(commands[cuda](mpc), args.parallel)
                bad = [c for c in codes if c != 0]
                print(f"{args.parallel} x `mpc {cuda}` at once ({mpc}): {wall * 1000:.0f} ms "
                      f"wall in all, {wall * 1000 / args.parallel:.0f} ms per process"
                      + (f"; {len(bad)} exited non-zero ({sorted(set(bad))})" if bad else ""))
                if bad:
                    sys.exit(1)


if __name__ == "__main__":
    main()
