#!/usr/bin/env python3
"""CUDA graph replay against eager launches, for the GPU bundle (tools/gpu-run.sh).

    python3 tools/gpu_graph_check.py --mpc MPC MODEL.onnx [MODEL.onnx ...]

For each model, and for its AMP rewrite (`mpc rewrite --backend cuda`), runs
`mpc run --device cuda --random-inputs --repeat 5` twice: with CUDA graphs (the default:
run 1 warms up, run 2 captures, runs 3-5 replay the graph) and with `--cuda-graph off`.
The outputs written after the last run must be byte-identical (the graph replays the same
kernels on the same inputs). Each line gives both median times; a plan with a CPU fallback
node never captures (mpc's placement line says so), so its two times only differ by noise.
Prints one line per run and, last, 'N passed, N failed'; exit 1 on a failure.
"""

import argparse
import filecmp
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_e2e import dim_args  # noqa: E402


def run(mpc, *args):
    return subprocess.run([mpc, *map(str, args)], capture_output=True, text=True, timeout=300)


def median_ms(text):
    m = re.search(r"time: median ([0-9.]+) ms", text)
    return m.group(1) if m else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpc", required=True)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models:
            name = os.path.splitext(os.path.basename(model))[0]
            amp = os.path.join(tmp, name + ".amp.onnx")
            r = run(a.mpc, "rewrite", model, "--backend", "cuda", "-o", amp)
            variants = [(name, model)] + ([(name + ".amp", amp)] if r.returncode == 0 else [])
            for label, path in variants:
                common = ["run", path, "--device", "cuda", "--random-inputs", "--seed", 1,
                          "--repeat", 5, *dim_args(path)]
                graph, eager = os.path.join(tmp, label + ".g"), os.path.join(tmp, label + ".e")
                rg = run(a.mpc, *common, "--outputs", graph)
                re_ = run(a.mpc, *common, "--cuda-graph", "off", "--outputs", eager)
                if rg.returncode or re_.returncode:
                    bad = rg if rg.returncode else re_
                    print(f"FAIL {label}: exit {bad.returncode}: "
                          f"{(bad.stderr.strip().splitlines() or ['?'])[-1]}")
                    failed += 1
                    continue
                files = sorted(os.listdir(eager))
                diff = [f for f in files if not filecmp.cmp(os.path.join(graph, f),
                                                            os.path.join(eager, f), shallow=False)]
                place = next((l for l in (rg.stdout + rg.stderr).splitlines()
                              if l.startswith("cuda: ")), "")
                times = f"graph {median_ms(rg.stderr + rg.stdout)} ms, eager " \
                        f"{median_ms(re_.stderr + re_.stdout)} ms"
                if diff or not files:
                    print(f"FAIL {label}: outputs differ from eager: {', '.join(diff) or 'none written'}"
                          f" ({times}) [{place}]")
                    failed += 1
                else:
                    print(f"pass {label}: {len(files)} output(s) identical ({times}) [{place}]")
                    passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
