#!/usr/bin/env python3
"""rewrite_bench.py - end-to-end speed and memory of `mpc rewrite` vs model size.

Generates synthetic models (bench/gen_stack.py) of 10 thousand to 1 million
nodes in every graph shape it knows (transformer stacks with their own or with
shared weights, one constant feeding every node, wide fan-out and fan-in, a deep
chain, many small If/Loop bodies, many graph outputs; --shapes picks some) and
times `mpc rewrite` on each (parse, rewrite, verify, write), pinned to one core, median of --repeat runs. Prints a Markdown table: nodes per
second end to end (the sum of the phases `mpc rewrite --time` reports) and by the
wall time of the whole process (start-up and exit included), the phases, and the
peak resident memory, plus how both grow with size (the bar: >= 300,000 nodes/s
on one core, linear growth). A benchmark, not a test.

usage: python3 bench/rewrite_bench.py --mpc build/tools/mpc [--mpc other/mpc ...]
                                      [--shapes stack,wide] [--sizes 10000,100000]
                                      [--repeat 3] [--timeout 120]
                                      [--workdir /tmp/mpc-bench]

With several --mpc binaries their runs interleave (run r of each before run
r+1 of any), so the drift of a shared machine affects them alike. A run
that takes longer than --timeout seconds is stopped and shown as "> T"; the
binary is not run again on larger models of that shape.
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


SHAPES = ["stack", "shared", "const", "wide", "widest", "chain", "subgraphs", "outputs"]


def model_path(workdir, shape, size):
    return os.path.join(workdir, f"{shape}{size}.onnx")


def generate(shape, size, path):
    if os.path.exists(path):
        return
    subprocess.run([sys.executable, os.path.join(HERE, "gen_stack.py"), "--shape", shape,
                    "--nodes", str(size), "-o", path], check=True, stdout=subprocess.DEVNULL)


def run_once(mpc, model, out, pin, timeout=None):
    """One rewrite; returns (phase seconds dict, peak RSS in MiB), or None when it
    ran past `timeout` seconds. The phases also get 'process': the wall time of the
    whole process, start-up included, and 'cpu': its user + system CPU time (less
    disturbed than wall time when other work shares the core)."""
    cmd = [mpc, "rewrite", model, "-o", out, "--time"]
    if pin and shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    timer = shutil.which("time") or "/usr/bin/time"
    start = time.perf_counter()
    try:
        proc = subprocess.run([timer, "-f", "MAXRSS_KB %M CPU %U %S"] + cmd, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"mpc rewrite failed on {model}:\n{proc.stderr}")
    phases = {m.group(1): float(m.group(2))
              for m in re.finditer(r"mpc: time: (\w+)\s+([0-9.]+) s", proc.stderr)}
    rss = int(re.search(r"MAXRSS_KB (\d+)", proc.stderr).group(1)) / 1024.0
    phases["process"] = wall
    cpu = re.search(r"CPU ([0-9.]+) ([0-9.]+)", proc.stderr)
    phases["cpu"] = float(cpu.group(1)) + float(cpu.group(2))
    return phases, rss


def node_count(summary_model):
    """Nodes of the model, those of nested graphs (If/Loop bodies) included."""
    import onnx  # only for counting; mpc itself does not need it
    sys.path.insert(0, HERE)
    from gen_stack import count_nodes
    return count_nodes(onnx.load(summary_model, load_external_data=False).graph)


def summarize(runs):
    """(median end-to-end s, phases of the median run, peak RSS, median process s);
    the phases also get 'cpu', the median process CPU time."""
    totals = [sum(v for k, v in p.items() if k not in ("process", "cpu")) for p, _ in runs]
    med = statistics.median_low(totals)  # a run's own total (the lower one of two)
    best = dict(runs[totals.index(med)][0])
    best["cpu"] = statistics.median(p["cpu"] for p, _ in runs)
    return med, best, max(r for _, r in runs), statistics.median(p["process"] for p, _ in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpc", required=True, action="append",
                    help="mpc binary; give several to compare them (their runs interleave)")
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help="graph shapes of bench/gen_stack.py (default: all)")
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds after which a run is stopped and reported as too slow")
    ap.add_argument("--workdir", default="/tmp/mpc-bench")
    ap.add_argument("--no-pin", action="store_true", help="do not pin to core 0")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    shapes = args.shapes.split(",")
    for shape in shapes:
        if shape not in SHAPES:
            ap.error(f"unknown shape '{shape}' (known: {', '.join(SHAPES)})")

    # (shape, binary index, nodes, median s, phases, rss, model MiB, process s); median
    # s is None for a binary that ran past --timeout.
    rows = []
    for shape in shapes:
        slow = set()  # binaries that timed out on a smaller model of this shape
        for size in [int(s) for s in args.sizes.split(",")]:
            model = model_path(args.workdir, shape, size)
            out = os.path.join(args.workdir, f"{shape}{size}.amp.onnx")
            generate(shape, size, model)
            nodes = node_count(model)
            mib = os.path.getsize(model) / 2**20
            # Round-robin: run r of every binary before run r+1 of any, so drift
            # of a shared machine hits all of them alike.
            runs = [[] for _ in args.mpc]
            for _ in range(args.repeat):
                for i, mpc in enumerate(args.mpc):
                    if i in slow:
                        continue
                    r = run_once(mpc, model, out, not args.no_pin, args.timeout)
                    if r is None:
                        slow.add(i)
                    else:
                        runs[i].append(r)
            for i, r in enumerate(runs):
                if i in slow:
                    rows.append((shape, i, nodes, None, {}, 0, mib, 0))
                    print(f"# {args.mpc[i]}: {shape}: {nodes} nodes: > {args.timeout} s",
                          file=sys.stderr)
                    continue
                med, best, rss, proc = summarize(r)
                rows.append((shape, i, nodes, med, best, rss, mib, proc))
                print(f"# {args.mpc[i]}: {shape}: {nodes} nodes: {med:.3f} s, "
                      f"{nodes / med:,.0f} nodes/s, {rss:.0f} MiB", file=sys.stderr)

    several = len(args.mpc) > 1
    print("| shape " + ("| build " if several else "") +
          "| nodes | model MiB | end to end s | nodes/s | process s | nodes/s (process) "
          "| process CPU s | nodes/s (CPU) | load | rewrite | check | write | peak RSS MiB "
          "| RSS bytes/node |")
    print("|---" + ("|---" if several else "") +
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape, i, nodes, med, ph, rss, mib, proc in rows:
        head = f"| {shape} " + (f"| {args.mpc[i]} " if several else "")
        if med is None:
            print(head + f"| {nodes:,} | {mib:.1f} | > {args.timeout:g} |" + " |" * 11)
            continue
        print(head +
              f"| {nodes:,} | {mib:.1f} | {med:.3f} | {nodes / med:,.0f} | {proc:.3f} | "
              f"{nodes / proc:,.0f} | {ph['cpu']:.3f} | {nodes / ph['cpu']:,.0f} | "
              f"{ph.get('load', 0):.3f} | {ph.get('rewrite', 0):.3f} | {ph.get('check', 0):.3f} | "
              f"{ph.get('write', 0):.3f} | {rss:.0f} | {rss * 2**20 / nodes:,.0f} |")
    print()
    for shape in shapes:
        for i, mpc in enumerate(args.mpc):
            mine = [r for r in rows if r[0] == shape and r[1] == i and r[3] is not None]
            if len(mine) < 2:
                continue
            (_, _, n0, t0, _, r0, _, _), (_, _, n1, t1, _, r1, _, _) = mine[0], mine[-1]
            print(f"{shape}: {mpc + ': ' if several else ''}from {n0:,} to {n1:,} nodes "
                  f"({n1 / n0:.0f}x): time x{t1 / t0:.1f}, per-node time x{t1 * n0 / (t0 * n1):.2f}, "
                  f"peak memory x{r1 / r0:.1f} (linear would be x{n1 / n0:.0f} and x1.00)")

if __name__ == "__main__":
    main()
