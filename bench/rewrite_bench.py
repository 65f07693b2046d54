#!/usr/bin/env python3
"""rewrite_bench.py - end-to-end speed and memory of `mpc rewrite` vs model size.

Generates synthetic transformer stacks (bench/gen_stack.py) of 10 thousand to 1
million nodes and times `mpc rewrite` on each (parse, rewrite, verify, write),
pinned to one core, median of --repeat runs. Prints a Markdown table: nodes per
second end to end (the sum of the phases `mpc rewrite --time` reports) and by the
wall time of the whole process (start-up and exit included), the phases, and the
peak resident memory, plus how both grow with size (the bar: >= 300,000 nodes/s
on one core, linear growth). A benchmark, not a test.

usage: python3 bench/rewrite_bench.py --mpc build/tools/mpc [--mpc other/mpc ...]
                                      [--sizes 10000,100000] [--repeat 3]
                                      [--workdir /tmp/mpc-bench]

With several --mpc binaries their runs interleave (run r of each before run
r+1 of any), so the drift of a shared machine affects them alike.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def generate(size, path):
    if os.path.exists(path):
        return
    subprocess.run([sys.executable, os.path.join(HERE, "gen_stack.py"), "--nodes", str(size),
                    "-o", path], check=True, stdout=subprocess.DEVNULL)


def run_once(mpc, model, out, pin):
    """One rewrite; returns (phase seconds dict, peak RSS in MiB). The phases also
    get 'process': the wall time of the whole process, start-up included."""
    cmd = [mpc, "rewrite", model, "-o", out, "--time"]
    if pin and shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    timer = shutil.which("time") or "/usr/bin/time"
    start = time.perf_counter()
    proc = subprocess.run([timer, "-f", "MAXRSS_KB %M"] + cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"mpc rewrite failed on {model}:\n{proc.stderr}")
    phases = {m.group(1): float(m.group(2))
              for m in re.finditer(r"mpc: time: (\w+)\s+([0-9.]+) s", proc.stderr)}
    rss = int(re.search(r"MAXRSS_KB (\d+)", proc.stderr).group(1)) / 1024.0
    phases["process"] = wall
    return phases, rss


def node_count(summary_model):
    import onnx  # only for counting; mpc itself does not need it
    return len(onnx.load(summary_model, load_external_data=False).graph.node)


def summarize(runs):
    """(median end-to-end s, phases of the median run, peak RSS, median process s)."""
    totals = [sum(v for k, v in p.items() if k != "process") for p, _ in runs]
    med = statistics.median(totals)
    best = runs[totals.index(med)][0]
    return med, best, max(r for _, r in runs), statistics.median(p["process"] for p, _ in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpc", required=True, action="append",
                    help="mpc binary; give several to compare them (their runs interleave)")
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp/mpc-bench")
    ap.add_argument("--no-pin", action="store_true", help="do not pin to core 0")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    rows = []  # (binary index, nodes, median s, phases, rss, model MiB, process s)
    for size in [int(s) for s in args.sizes.split(",")]:
        model = os.path.join(args.workdir, f"stack{size}.onnx")
        out = os.path.join(args.workdir, f"stack{size}.amp.onnx")
        generate(size, model)
        nodes = node_count(model)
        # Round-robin: run r of every binary before run r+1 of any, so drift
        # of a shared machine hits all of them alike.
        runs = [[] for _ in args.mpc]
        for _ in range(args.repeat):
            for i, mpc in enumerate(args.mpc):
                runs[i].append(run_once(mpc, model, out, not args.no_pin))
        for i, r in enumerate(runs):
            med, best, rss, proc = summarize(r)
            rows.append((i, nodes, med, best, rss, os.path.getsize(model) / 2**20, proc))
            print(f"# {args.mpc[i]}: {nodes} nodes: {med:.3f} s, {nodes / med:,.0f} nodes/s, "
                  f"{rss:.0f} MiB", file=sys.stderr)

    several = len(args.mpc) > 1
    print(("| build " if several else "") +
          "| nodes | model MiB | end to end s | nodes/s | process s | nodes/s (process) | load "
          "| rewrite | check | write | peak RSS MiB | RSS bytes/node |")
    print(("|---" if several else "") + "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, nodes, med, ph, rss, mib, proc in rows:
        print((f"| {args.mpc[i]} " if several else "") +
              f"| {nodes:,} | {mib:.1f} | {med:.3f} | {nodes / med:,.0f} | {proc:.3f} | "
              f"{nodes / proc:,.0f} | "
              f"{ph.get('load', 0):.3f} | {ph.get('rewrite', 0):.3f} | {ph.get('check', 0):.3f} | "
              f"{ph.get('write', 0):.3f} | {rss:.0f} | {rss * 2**20 / nodes:,.0f} |")
    for i, mpc in enumerate(args.mpc):
        mine = [r for r in rows if r[0] == i]
        if len(mine) > 1:
            (_, n0, t0, _, r0, _, _), (_, n1, t1, _, r1, _, _) = mine[0], mine[-1]
            print(f"\n{mpc + ': ' if several else ''}growth from {n0:,} to {n1:,} nodes "
                  f"({n1 / n0:.0f}x): time x{t1 / t0:.1f}, peak memory x{r1 / r0:.1f} "
                  f"(linear would be x{n1 / n0:.0f}).")


if __name__ == "__main__":
    main()
