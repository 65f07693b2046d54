#!/usr/bin/env python3
"""startup_bench.py - what an `mpc` process costs before it does any work.

Runs `mpc --version` and `mpc rewrite` of a small shipped model (models/mlp.onnx, written
to a temporary folder) --repeat times for each --mpc binary, interleaved (run r of every
binary before run r+1 of any) and pinned to core 0, under /usr/bin/time -v, and prints a
Markdown table of the lowest wall time, user + system CPU time and peak resident memory of
each (the lowest, because a shared machine only ever adds to them). Also lists which CUDA
libraries the process mapped (LD_DEBUG=files). A benchmark, not a test.

usage: python3 bench/startup_bench.py --mpc build/tools/mpc [--mpc /tmp/mpc-old]
                                      [--repeat 20] [--source-dir .]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CUDA_LIB = re.compile(r"file=(\S*lib(?:cudart|cublasLt|cublas|cudnn)[^\s/]*)\s")


def timed(cmd):
    """(wall s, cpu s, peak RSS KiB) of one run of `cmd` under /usr/bin/time -v."""
    p = subprocess.run(["taskset", "-c", "0", "/usr/bin/time", "-v", *cmd],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    fields = dict(line.strip().rsplit(": ", 1) for line in p.stderr.splitlines()
                  if ": " in line)
    wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"]
    seconds = 0.0
    for part in wall.split(":"):
        seconds = seconds * 60 + float(part)
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    return seconds, cpu, int(fields["Maximum resident set size (kbytes)"])


def cuda_libraries(cmd):
    env = dict(os.environ, LD_DEBUG="files")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return sorted({os.path.basename(m) for m in CUDA_LIB.findall(p.stderr)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", action="append", required=True)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--source-dir", default=os.path.dirname(HERE))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpc-startup-") as tmp:
        model = os.path.join(args.source_dir, "models", "mlp.onnx")
        commands = {
            "--version": lambda mpc: [mpc, "--version"],
            "rewrite mlp.onnx": lambda mpc: [mpc, "rewrite", model, "-o",
                                             os.path.join(tmp, "mlp.amp.onnx")],
        }
        best = {}
        for _ in range(args.repeat):
            for name, make in commands.items():
                for mpc in args.mpc:
                    wall, cpu, rss = timed(make(mpc))
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


if __name__ == "__main__":
    main()
