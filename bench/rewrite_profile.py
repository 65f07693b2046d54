#!/usr/bin/env python3
"""rewrite_profile.py - instructions per node of each `mpc rewrite` phase (callgrind).

Runs `mpc rewrite` once under `valgrind --tool=callgrind` (instruction counts do not depend
on machine load, unlike times on a shared machine) and prints, per phase, the inclusive
instruction count divided by the model's node count. Several binaries may be given to
compare them side by side (an old build next to a new one).

usage: python3 bench/rewrite_profile.py --mpc build/tools/mpc [--mpc /tmp/mpc-old]
                                        [--shape stack] [--nodes 100000]
                                        [--workdir /tmp/mpc-bench]
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (label, regular expression on the function names of callgrind_annotate --inclusive=yes)
PHASES = [
    ("total", r"^main$"),
    # Before the wire reader: protobuf's parse of the whole file, then the IR
    # built from the ModelProto. Since: the wire bytes read into views (with
    # protobuf's parse of the rest), then the IR built from the views
    # (importViews, into which g++ inlines Importer::importModel).
    ("import: protobuf parse",
     r"google::protobuf::MessageLite::ParseFromCodedStream|^mpc::onnxio::decodeModel\("),
    ("import: IR construction",
     r"^mpc::importOnnx\(onnx::ModelProto|^importViews\(|Importer::importModel\(onnx::ModelProto"),
    ("verifier (input and output)", r"^mpc::verifyModel\("),
    ("  of which after the rewrite", r"^verifyAfter\("),
    ("type inference", r"^mpc::inferTypes\(mpc::Model"),
    ("painting (AmpColoring)", r"^mpc::AmpColoring::AmpColoring\("),
    ("decision summary", r"^mpc::summarizeDecisions\("),
    ("cast insertion", r"^mpc::insertAmpCasts\("),
    ("cast folding and cleanup", r"^mpc::foldCasts\("),
    ("export and write", r"^mpc::writeOnnxFile\("),
]


def profile(mpc, model, workdir, tag):
    out = os.path.join(workdir, f"callgrind.{tag}.out")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", mpc,
                    "rewrite", model, "-o", os.path.join(workdir, f"profile.{tag}.onnx")],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                          check=True, capture_output=True, text=True).stdout
    counts = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S.*?):(.*?)( \[.*\])?$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        fn = m.group(3)
        for label, pat in PHASES:
            if re.search(pat, fn):
                counts[label] = max(counts.get(label, 0), n)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpc", action="append", required=True, help="binary (repeatable)")
    ap.add_argument("--nodes", type=int, default=100000)
    ap.add_argument("--shape", default="stack", help="graph shape of bench/gen_stack.py")
    ap.add_argument("--workdir", default="/tmp/mpc-bench")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    model = os.path.join(args.workdir, f"{args.shape}{args.nodes}.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_stack.py"), "--shape",
                        args.shape, "--nodes", str(args.nodes), "-o", model], check=True,
                       stdout=subprocess.DEVNULL)
    import onnx  # only for counting
    from gen_stack import count_nodes
    nodes = count_nodes(onnx.load(model, load_external_data=False).graph)
    results = [profile(b, model, args.workdir, str(i)) for i, b in enumerate(args.mpc)]
    print(f"instructions per node, {nodes:,} nodes ({os.path.basename(model)})\n")
    print("| phase | " + " | ".join(args.mpc) + " |")
    print("|---|" + "---:|" * len(args.mpc))
    for label, _ in PHASES:
        cells = [f"{r.get(label, 0) / nodes:,.0f}" for r in results]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
