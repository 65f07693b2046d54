#!/usr/bin/env python3
"""Training-step speed of mpc against PyTorch on the same models (issue 15's benchmark).

    python3 bench/gpu/step_bench.py --mpc MPC [--device cuda] [--scale full|tiny]
        [--models bert,gpt,resnet] [--steps 20] [--out DIR] [--no-torch] [--compile]
        [--fused-optimizer] [--profile]
        [--fused-unscale]
        [--weight-copy] [--multi-tensor-optimizer] [--plain-graph] [--epilogues]
        [--max-batch [--max-memory SIZE] [--max-batch-limit N] [--max-batch-start B]]

Needs PyTorch and onnx (the GPU machine has both; here: /tmp/torchenv). For each model, built
below from PyTorch code with a fixed seed:

- bert:   a BERT-base-like encoder (token and position embeddings, 12 post-norm layers of
          nn.TransformerEncoderLayer, hidden 768, 12 heads, feed-forward 3072, sequence 128,
          mean-pooled classifier over 2 classes);
- gpt:    a GPT-2-small-like decoder (12 pre-norm blocks, hidden 768, 12 heads, causal mask,
          vocabulary 50257, sequence 128, next-token loss over [N, T, V] logits);
- resnet: a ResNet-50-like CNN (bottleneck blocks 3-4-6-3, widths 64-2048, BatchNorm,
          224x224 RGB, 1000 classes);

(`--scale tiny` shrinks every dimension, for a smoke test on a CPU), it exports the model
(`torch.onnx.export`, dynamo=False, opset 17, symbolic batch, `training=PRESERVE` and
`keep_initializers_as_inputs=True`: an eval-mode export would fold each BatchNormalization
into its Conv and merge initializers of equal values, so that the ResNet would train without
BatchNorm and the encoder's 12 deep-copied layers would train as one tied layer, not
PyTorch's model), builds its training graph (`mpc train-graph`, Adam), rewrites it to fp16
and to bf16 (`mpc rewrite`, dynamic loss scaling for fp16), and times
`mpc run --train --device D --steps 4+S --shuffle none` on random data: the steady rate the
time line gives for the S steps after the first 4 (warm-up: on cuda, each of the two sets
of state addresses runs eagerly, then is captured as a CUDA graph), by wall time with the
device's work included, evaluation excluded. PyTorch runs the same module on the
same device in eager fp32, with `torch.autocast` fp16 + `GradScaler` and bf16, and (with
--compile) under `torch.compile`: the median of S steps after 3 warm-up steps, synchronized.

On cuda mpc also runs the fp32 graph with `--tf32`. Prints a markdown table (steps/s and
peak device memory per variant: the backend's peak from `--stats` for mpc,
`torch.cuda.max_memory_allocated` for PyTorch; each mpc variant against mpc fp32 and
against PyTorch's of the same precision) and writes it with a JSON of every figure to --out.
A variant that fails prints its one-line reason in the table instead of a figure.

With --fused-optimizer every mpc variant is also timed on the training graph built with
`mpc train-graph --fused-optimizer` (one AdamStep node per parameter instead of the
element-wise update; docs/training.md): rows "mpc fp32 fused", "mpc fp16 fused", ... next to
the primitive graph's rows of the same run.

--fused-unscale adds the variant fp16-fusedunscale (with --fused-optimizer also
"fp16-fusedunscale fused"): fp16 rewritten with `mpc rewrite --fused-unscale` (one
MultiTensorUnscale launch for the unscale and overflow check of every gradient), to compare
with the fp16 row (issue 15: kept only if it pays).

--weight-copy (implies --fused-optimizer) adds the variants "fp16-weightcopy fused" and
"bf16-weightcopy fused": the fused graph rewritten with `mpc rewrite --optimizer-weight-copy`
(the AdamStep writes each parameter's 16-bit copy, no per-step Cast of the master weights),
to compare with "fp16 fused" and "bf16 fused".

--multi-tensor-optimizer (implies --fused-optimizer) adds the variant "fp16-multi fused": the
fused fp16 graph rewritten with `mpc rewrite --multi-tensor-optimizer` (one
MultiTensorAdamStep launch over every parameter instead of one AdamStep launch per
parameter), to compare with "fp16 fused".
--plain-graph adds the variant fp16-plain (and "fp16-plain fused"): the fp16 graph of
`mpc train-graph` run with MPC_TRAIN_GRAPH_PLAIN=1, which differentiates node by node as
before the rules that save passes over memory (docs/training.md, "Four rules keep the step
from moving the largest tensors"), to compare with "fp16".
--export DIR writes the exported models and their data into DIR and stops (no GPU needed).
--epilogues adds the variant fp16-epilogues (and "fp16-epilogues fused"): fp16 rewritten with
`mpc rewrite --fuse-gemm-epilogues` (each weight gradient's GEMM writes its float32 gradient, no
Cast, and its layer's bias gradient, no BiasGrad; forward bias Adds and the logits' Cast folded
into cuBLASLt epilogues; docs/user-guide.md "GEMM epilogues"), to compare with "fp16".
--profile also runs every mpc variant with `--profile` for 2 steps after the warm-up and
writes the step's node time by op type (each node waited for: its kernels plus a stream
synchronization, so small nodes weigh more than in a captured step) to OUT/step_profile.md.

--max-batch (issue 15: "the largest batch that fits, fp32 against AMP") also searches, per
model, the largest batch whose training step runs for mpc fp32, fp16 and bf16
(bench/gpu/max_batch.py: doubling from --max-batch-start, then bisection, each run 2 steps
bounded by --run-timeout, up to --max-batch-limit; with --max-memory SIZE every run is held to SIZE,
`mpc run --max-memory`, which on the CPU is the only limit) and, on cuda, for PyTorch eager
fp32, fp16 and bf16 (autocast + GradScaler; a batch fits unless CUDA runs out of memory). At
the model's bench batch it reads each mpc step's activation memory (the step plan peak of
`--stats`, persistent state excluded) and PyTorch's (peak minus what is allocated before the
step), and prints AMP's against fp32's (the goal: <= 0.55x). A second table gives the
figures; --out adds max_batch.json.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx
from max_batch import largest_batch, search_mpc, activation_memory
import torch
import torch.nn as nn
import torch.nn.functional as F

SCALES = {
    # name: (bert/gpt: layers, hidden, heads, seq, vocab_gpt, vocab_bert; resnet: width
    #        divisor, image side, classes; batch)
    "full": dict(layers=12, hidden=768, heads=12, seq=128, vocab_gpt=50257, vocab_bert=30522,
                 width_div=1, side=224, classes=1000, batch={"bert": 32, "gpt": 8, "resnet": 32}),
    "tiny": dict(layers=2, hidden=32, heads=2, seq=16, vocab_gpt=101, vocab_bert=101,
                 width_div=16, side=32, classes=10, batch={"bert": 4, "gpt": 4, "resnet": 4}),
}


class Bert(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.tok = nn.Embedding(s["vocab_bert"], s["hidden"])
        self.pos = nn.Embedding(s["seq"], s["hidden"])
        layer = nn.TransformerEncoderLayer(s["hidden"], s["heads"], 4 * s["hidden"], dropout=0.0,
                                           batch_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, s["layers"], enable_nested_tensor=False)
        self.fc = nn.Linear(s["hidden"], 2)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.tok(tokens) + self.pos(torch.arange(t, device=tokens.device))
        return self.fc(self.enc(x).mean(dim=1))


class Block(nn.Module):
    def __init__(self, d, heads, tmax):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(tmax, tmax)).view(1, 1, tmax, tmax))

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        heads = lambda a: a.view(n, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(n, t, d)
        x = x + self.proj(y)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, s):
        super().__init__()
        d = s["hidden"]
        self.wte, self.wpe = nn.Embedding(s["vocab_gpt"], d), nn.Embedding(s["seq"], d)
        self.blocks = nn.Sequential(*[Block(d, s["heads"], s["seq"]) for _ in range(s["layers"])])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, s["vocab_gpt"], bias=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
        return self.head(self.ln(self.blocks(x)))


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride):
        super().__init__()
        cout = 4 * mid
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


class ResNet50(nn.Module):
    def __init__(self, s):
        super().__init__()
        w = lambda c: max(c // s["width_div"], 2)
        layers = [nn.Conv2d(3, w(64), 7, 2, 3, bias=False), nn.BatchNorm2d(w(64)), nn.ReLU(),
                  nn.MaxPool2d(3, 2, 1)]
        cin = w(64)
        for i, (mid, n) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
            for j in range(n):
                layers.append(Bottleneck(cin, w(mid), 2 if (j == 0 and i > 0) else 1))
                cin = 4 * w(mid)
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, s["classes"])

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


def make(name, s, rng, batch):
    """(module, input name, inputs [k*batch, ...], labels, train-graph flags, loss)"""
    n = 4 * batch
    if name == "bert":
        x = rng.integers(0, s["vocab_bert"], (n, s["seq"])).astype(np.int64)
        return Bert(s), "tokens", x, rng.integers(0, 2, n).astype(np.int64), [], F.cross_entropy
    if name == "gpt":
        x = rng.integers(0, s["vocab_gpt"], (n, s["seq"])).astype(np.int64)
        y = np.roll(x, -1, axis=1)
        loss = lambda logits, y: F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 y.reshape(-1))
        return Gpt(s), "tokens", x, y, ["--class-axis", "-1"], loss
    x = rng.standard_normal((n, 3, s["side"], s["side"])).astype(np.float32)
    return (ResNet50(s), "x", x, rng.integers(0, s["classes"], n).astype(np.int64),
            ["--bn-variance", "unbiased"], F.cross_entropy)


RUN_TIMEOUT = 3600  # seconds per `mpc run --train` (--run-timeout)
WARM_STEPS = 4  # the steps mpc's time line leaves out of its steady rate


def mpc_step_time(mpc, args, label):
    """(ms per step after the warm-up from `mpc run --train`'s `time:` line, or None; the placement
    line, or the failure's last line; the backend's peak bytes from `--stats`, or None)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([mpc, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"{label}: timed out after {RUN_TIMEOUT} s", None
    finally:
        # Progress on stderr as each run ends: a bench stopped by a time limit still says
        # which runs finished and how long each took.
        print(f"step_bench: {label}: {time.perf_counter() - t0:.1f} s", file=sys.stderr,
              flush=True)
    m = re.search(r"; steps \d+-\d+: ([0-9.]+) ms per step", p.stderr)
    if p.returncode != 0 or not m:
        lines = (p.stderr.strip() or p.stdout.strip() or "no output").splitlines()
        return None, f"{label}: exit {p.returncode}: {lines[-1][:200]}", None
    placement = next((l for l in p.stdout.splitlines() if l.startswith("cuda: ")), "")
    mem = re.search(r"backend peak ([0-9.]+) (B|KiB|MiB)", p.stderr)
    peak = float(mem.group(1)) * {"B": 1, "KiB": 1024, "MiB": 1 << 20}[mem.group(2)] if mem else None
    return float(m.group(1)), placement, peak


def mpc_profile(mpc, args, label):
    """The `profile: node time by op type` block of `mpc run --train ... --profile` (every
    node waited for: its kernels plus a synchronization), or the failure's last line."""
    try:
        p = subprocess.run([mpc, *args, "--profile"], capture_output=True, text=True,
                           timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"{label}: --profile timed out after {RUN_TIMEOUT} s"
    lines = p.stderr.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("profile: node time by op")),
                 None)
    if p.returncode != 0 or start is None:
        return f"{label}: --profile: exit {p.returncode}: " + \
            ((lines or ["no output"])[-1][:200])
    block = [lines[start]]
    block += [l for l in lines[start + 1:start + 16] if l.startswith("  ")]
    return "\n".join(block)


def torch_step_time(module, x, y, loss_fn, device, steps, precision, compile_):
    module = module.to(device).train()
    opt = torch.optim.Adam(module.parameters(), lr=1e-4)
    fn = torch.compile(module) if compile_ else module
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    scaler = torch.amp.GradScaler(device, enabled=precision == "fp16")
    xs, ys = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    b = xs.shape[0] // 4
    times = []
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for i in range(steps + 3):
        xb, yb = xs[(i % 4) * b:(i % 4 + 1) * b], ys[(i % 4) * b:(i % 4 + 1) * b]
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dt or torch.float32, enabled=dt is not None):
            loss = loss_fn(fn(xb), yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
    peak = float(torch.cuda.max_memory_allocated()) if device == "cuda" else None
    return float(np.median(times)), peak


def build_variants(a, path, base, flags, suffix, row, variants):
    """train-graph (Adam; --fused-optimizer when suffix is " fused") and the fp16/bf16
    rewrites of the exported model `path`: adds {variant + suffix: model path} to `variants`,
    or the failing step's one line to `row`."""
    train = base + ".train.onnx"
    p = subprocess.run([a.mpc, "train-graph", path, "--loss", "cross-entropy",
                        "--optimizer", "adam", "--lr", "1e-4", *flags,
                        *(["--fused-optimizer"] if suffix else []), "-o", train],
                       capture_output=True, text=True)
    if p.returncode != 0:
        row["mpc" + suffix] = f"train-graph: {p.stderr.strip().splitlines()[-1][:200]}"
        return
    variants["fp32" + suffix] = train
    if a.device == "cuda":
        variants["tf32" + suffix] = train  # the fp32 graph, its products in TF32
    for target in ("fp16", "bf16"):
        out = f"{base}.{target}.onnx"
        r = subprocess.run([a.mpc, "rewrite", train, "--target", target, "-o", out],
                           capture_output=True, text=True)
        if r.returncode == 0:
            variants[target + suffix] = out
        else:
            row[f"mpc {target}{suffix}"] = f"rewrite: {r.stderr.strip().splitlines()[-1][:200]}"
    if a.fused_unscale:  # issue 15: one MultiTensorUnscale launch vs per-gradient nodes
        out = f"{base}.fp16-fusedunscale.onnx"
        r = subprocess.run([a.mpc, "rewrite", train, "--target", "fp16", "--fused-unscale",
                            "-o", out], capture_output=True, text=True)
        if r.returncode == 0:
            variants["fp16-fusedunscale" + suffix] = out
        else:
            row[f"mpc fp16-fusedunscale{suffix}"] = \
                f"rewrite: {r.stderr.strip().splitlines()[-1][:200]}"
    for target in (("fp16", "bf16") if a.weight_copy and suffix else ()):  # issue 15
        key, out = f"{target}-weightcopy{suffix}", f"{base}.{target}-weightcopy.onnx"
        r = subprocess.run([a.mpc, "rewrite", train, "--target", target,
                            "--optimizer-weight-copy", "-o", out], capture_output=True, text=True)
        variants.update({key: out} if r.returncode == 0 else {})
        row.update({} if r.returncode == 0 else {f"mpc {key}": "rewrite: " + (
            r.stderr.strip().splitlines() or ["failed"])[-1][:200]})
    if a.plain_graph:  # issue 15: the graph rules that save passes, before and after
        plain, out = base + ".plain.train.onnx", f"{base}.fp16-plain.onnx"
        env = dict(os.environ, MPC_TRAIN_GRAPH_PLAIN="1")
        p = subprocess.run([a.mpc, "train-graph", path, "--loss", "cross-entropy",
                            "--optimizer", "adam", "--lr", "1e-4", *flags,
                            *(["--fused-optimizer"] if suffix else []), "-o", plain],
                           capture_output=True, text=True, env=env)
        r = p if p.returncode else subprocess.run(
            [a.mpc, "rewrite", plain, "--target", "fp16", "-o", out], capture_output=True,
            text=True)
        variants.update({"fp16-plain" + suffix: out} if r.returncode == 0 else {})
        row.update({} if r.returncode == 0 else {f"mpc fp16-plain{suffix}": (
            r.stderr.strip().splitlines() or ["failed"])[-1][:200]})
    if a.epilogues:  # issue 15: casts and bias Adds folded into the GEMMs
        key, out = "fp16-epilogues" + suffix, f"{base}.fp16-epilogues.onnx"
        r = subprocess.run([a.mpc, "rewrite", train, "--target", "fp16",
                            "--fuse-gemm-epilogues", "-o", out], capture_output=True, text=True)
        variants.update({key: out} if r.returncode == 0 else {})
        row.update({} if r.returncode == 0 else {f"mpc {key}": "rewrite: " + (
            r.stderr.strip().splitlines() or ["failed"])[-1][:200]})
    if a.multi_tensor_optimizer and suffix:  # issue 15: one launch for every AdamStep
        key, out = "fp16-multi" + suffix, f"{base}.fp16-multi.onnx"
        r = subprocess.run([a.mpc, "rewrite", train, "--target", "fp16",
                            "--multi-tensor-optimizer", "-o", out], capture_output=True,
                           text=True)
        variants.update({key: out} if r.returncode == 0 else {})
        row.update({} if r.returncode == 0 else {f"mpc {key}": "rewrite: " + (
            r.stderr.strip().splitlines() or ["failed"])[-1][:200]})


def torch_try_batch(name, s, module, x, y, loss_fn, device, precision, batch):
    """Two training steps of a copy of `module` at `batch` (rows cut cyclically from x, y):
    (True, activation bytes: the second step's peak above what was allocated before it) or
    (False, None) when CUDA ran out of memory; an exception's line otherwise."""
    m2 = None
    try:
        m2 = make(name, s, np.random.default_rng(0), 1)[0]
        m2.load_state_dict(module.state_dict())
        m2 = m2.to(device).train()
        opt = torch.optim.Adam(m2.parameters(), lr=1e-4)
        dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        scaler = torch.amp.GradScaler(device, enabled=precision == "fp16")
        idx = np.arange(batch) % x.shape[0]
        xb, yb = torch.from_numpy(x[idx]).to(device), torch.from_numpy(y[idx]).to(device)
        act = None
        for i in range(2):
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=dt or torch.float32, enabled=dt is not None):
                loss = loss_fn(m2(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if device == "cuda":
                torch.cuda.synchronize()
                act = torch.cuda.max_memory_allocated() - before
        return True, act
    except torch.OutOfMemoryError:
        return False, None
    except Exception as e:  # reported, not fatal
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", None
    finally:
        del m2
        if device == "cuda":
            torch.cuda.empty_cache()


def max_batch_rows(a, name, s, variants, data, batch, module, loss_fn):
    """--max-batch for one model: {variant: {"largest", "runs", "error", "activation", ...}}
    for mpc fp32/fp16/bf16 (and, on cuda without --no-torch, PyTorch's)."""
    out = {}
    for target in ("fp32", "fp16", "bf16"):
        if target not in variants:
            continue
        r = search_mpc(a.mpc, variants[target], data, a.device, a.max_memory,
                       a.max_batch_start, a.max_batch_limit, a.run_timeout,
                       label=f"{name} mpc {target}")
        r["activation"] = activation_memory(a.mpc, variants[target], data, batch, a.device,
                                            a.run_timeout)
        if isinstance(r["activation"], dict):
            r["activation"] = r["activation"]["step_peak"]
        out[f"mpc {target}"] = r
    if a.device == "cuda" and not a.no_torch:
        x, y = data[next(k for k in data if k != "labels")], data["labels"]
        for precision in ("fp32", "fp16", "bf16"):
            t0 = time.perf_counter()
            tries = {}

            def fits(b):
                tries[b] = torch_try_batch(name, s, module, x, y, loss_fn, a.device, precision, b)
                return tries[b][0]

            best, runs, err = largest_batch(fits, a.max_batch_start, a.max_batch_limit)
            at = torch_try_batch(name, s, module, x, y, loss_fn, a.device, precision, batch)
            out[f"torch {precision}"] = {
                "largest": best, "runs": [[b, r] for b, r in runs], "error": err,
                "activation": at[1] if at[0] is True else (at[0] or "out of memory"),
                "seconds": round(time.perf_counter() - t0, 2)}
    else:
        out["torch"] = {"skipped": "PyTorch's search needs --device cuda (no device memory "
                                   "to fill on the CPU)" if not a.no_torch else "--no-torch"}
    return out


def print_max_batch(all_rows, a):
    """The --max-batch table: returns the number of searches that failed."""
    failures = 0
    print()
    print(f"largest batch that fits (--max-memory {a.max_memory or 'not set'}, limit "
          f"{a.max_batch_limit}); activation memory at the model's bench batch, against fp32 of "
          f"the same framework (issue 15's goal for AMP: <= 0.55x)")
    print()
    print("| model | variant | largest batch | runs | activation MiB | vs fp32 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, rows in all_rows.items():
        for key, r in rows.items():
            if "skipped" in r:
                print(f"| {name} | {key} | skipped: {r['skipped']} | | | |")
                continue
            act = r["activation"]
            ref = rows.get(key.split()[0] + " fp32", {}).get("activation")
            vs = (f"{act / ref:.2f}x" if isinstance(act, int) and isinstance(ref, int) and ref
                  else "")
            largest = str(r["largest"])
            if r["error"]:
                largest += f" (stopped: {r['error']})"
            elif r["largest"] == a.max_batch_limit:
                largest += " (the limit: more may fit)"
            mib = f"{act / (1 << 20):.2f}" if isinstance(act, int) else str(act)
            failures += bool(r["error"]) or not isinstance(act, int)
            print(f"| {name} | {key} | {largest} | {len(r['runs'])} | {mib} | {vs} |")
    return failures


def export_model(name, s, folder):
    """Builds model `name` at scale `s` (fixed seeds) and exports it to FOLDER/NAME.onnx with
    its data in FOLDER/NAME.npz; returns make()'s tuple and the two paths."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    module, in_name, x, y, flags, loss_fn = make(name, s, rng, s["batch"][name])
    path = os.path.join(folder, f"{name}.onnx")
    module.eval()
    torch.onnx.export(module, (torch.from_numpy(x[:2]),), path, dynamo=False,
                      opset_version=17, input_names=[in_name], output_names=["logits"],
                      dynamic_axes={in_name: {0: "N"}, "logits": {0: "N"}},
                      training=torch.onnx.TrainingMode.PRESERVE,
                      keep_initializers_as_inputs=True)
    data = os.path.join(folder, f"{name}.npz")
    np.savez(data, **{in_name: x, "labels": y})
    return module, in_name, x, y, flags, loss_fn, path, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", default="full", choices=sorted(SCALES))
    ap.add_argument("--models", default="bert,gpt,resnet")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--fused-optimizer", action="store_true",
                    help="also time the graphs of `mpc train-graph --fused-optimizer`")
    ap.add_argument("--fused-unscale", action="store_true",
                    help="also time fp16 rewritten with --fused-unscale (variant fp16-fusedunscale)")
    ap.add_argument("--weight-copy", action="store_true",
                    help="also time the fused graph rewritten with --optimizer-weight-copy "
                         "(variants fp16-weightcopy fused, bf16-weightcopy fused)")
    ap.add_argument("--multi-tensor-optimizer", action="store_true",
                    help="also time the fused fp16 graph rewritten with "
                         "--multi-tensor-optimizer (variant fp16-multi fused)")
    ap.add_argument("--run-timeout", type=int, default=3600,
                    help="seconds per mpc training run (a run past it is reported, not fatal)")
    ap.add_argument("--profile", action="store_true",
                    help="also run each mpc variant with --profile (2 steps after the "
                         "warm-up) and write its node time by op type to OUT/step_profile.md")
    ap.add_argument("--max-batch", action="store_true",
                    help="also search the largest batch that fits (see the module help)")
    ap.add_argument("--max-memory", default=None,
                    help="with --max-batch: mpc run --max-memory SIZE for every search run")
    ap.add_argument("--max-batch-limit", type=int, default=4096,
                    help="with --max-batch: the largest batch tried")
    ap.add_argument("--max-batch-start", type=int, default=1,
                    help="with --max-batch: the first batch tried (doubled from there)")
    ap.add_argument("--plain-graph", action="store_true",
                    help="also time fp16 built with MPC_TRAIN_GRAPH_PLAIN=1 (variant "
                         "fp16-plain: train-graph's node-by-node rules, before the rules that "
                         "save passes over memory)")
    ap.add_argument("--epilogues", action="store_true",
                    help="also time fp16 rewritten with --fuse-gemm-epilogues (variant "
                         "fp16-epilogues)")
    ap.add_argument("--export", default=None, metavar="DIR",
                    help="only export each model (NAME.onnx) and its data (NAME.npz) into "
                         "DIR, as the timed runs use them, and stop (no mpc run; no GPU)")
    a = ap.parse_args()
    if a.export:
        os.makedirs(a.export, exist_ok=True)
        for name in a.models.split(","):
            export_model(name, SCALES[a.scale], a.export)
            print(f"{a.export}/{name}.onnx {a.export}/{name}.npz")
        return 0
    a.fused_optimizer |= a.weight_copy  # the copies are written by the fused steps
    a.fused_optimizer |= a.multi_tensor_optimizer  # it merges the fused steps
    global RUN_TIMEOUT
    RUN_TIMEOUT = a.run_timeout
    s = SCALES[a.scale]
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the TorchScript exporter
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results, failures = {}, 0
    profiles = []  # --profile: one markdown section per mpc variant
    max_batch = {}  # --max-batch: per model, per variant
    print("| model | variant | ms/step | steps/s | peak device MiB | vs mpc fp32 "
          "| vs PyTorch same precision |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            batch = s["batch"][name]
            module, in_name, x, y, flags, loss_fn, path, data = export_model(name, s, tmp)
            row = results.setdefault(name, {})
            variants = {}
            for fused in ([False, True] if a.fused_optimizer else [False]):
                build_variants(a, path, os.path.join(tmp, name + (".fused" if fused else "")),
                               flags, " fused" if fused else "", row, variants)
            for target, model in variants.items():
                ms, what, peak = mpc_step_time(
                    a.mpc, ["run", model, "--train", "--device", a.device, "--data", data,
                            "--batch", str(batch), "--steps", str(WARM_STEPS + a.steps),
                            "--shuffle", "none",
                            "--stats", *(["--tf32"] if target.startswith("tf32") else [])],
                    f"{name} mpc {target}")
                row[f"mpc {target}"] = ms if ms is not None else what
                if a.profile:  # where the step's node time goes, by op type
                    text = mpc_profile(
                        a.mpc, ["run", model, "--train", "--device", a.device, "--data", data,
                                "--batch", str(batch), "--steps", str(WARM_STEPS + 2),
                                "--shuffle", "none",
                                *(["--tf32"] if target.startswith("tf32") else [])],
                        f"{name} mpc {target}")
                    profiles.append(f"### {name} mpc {target}\n\n```\n{text}\n```\n")
                    if a.out:  # as each ends: a run stopped by a time limit keeps them
                        os.makedirs(a.out, exist_ok=True)
                        with open(os.path.join(a.out, "step_profile.md"), "w") as f:
                            f.write("\n".join(profiles))
                    print(f"step_bench: {name} mpc {target}:\n{text}", file=sys.stderr,
                          flush=True)
                if peak is not None:
                    row[f"mpc {target} peak bytes"] = peak
                if ms is not None and what:
                    row[f"mpc {target} placement"] = what
            if not a.no_torch:
                for precision in ("fp32", "fp16", "bf16"):
                    for comp in ([False, True] if a.compile else [False]):
                        key = f"torch {precision}{' compile' if comp else ''}"
                        try:
                            m2 = make(name, s, np.random.default_rng(0), batch)[0]
                            m2.load_state_dict(module.state_dict())
                            row[key], peak = torch_step_time(m2, x, y, loss_fn, a.device,
                                                             a.steps, precision, comp)
                            if peak is not None:
                                row[f"{key} peak bytes"] = peak
                        except Exception as e:  # a variant that fails is reported, not fatal
                            row[key] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            base = row.get("mpc fp32")
            for key, v in row.items():
                if key.endswith("placement") or key.endswith("peak bytes"):
                    continue
                peak = row.get(f"{key} peak bytes")
                mib = f"{peak / (1 << 20):.0f}" if peak is not None else ""
                if isinstance(v, float):
                    rel = f"{base / v:.2f}x" if isinstance(base, float) and key.startswith("mpc") else ""
                    prec = key.split()[1].split("-")[0]  # fp16-fusedunscale: against torch fp16
                    tv = row.get(f"torch {prec}")
                    vs = f"{tv / v:.2f}x" if key.startswith("mpc") and isinstance(tv, float) else ""
                    print(f"| {name} | {key} | {v:.2f} | {1000 / v:.1f} | {mib} | {rel} | {vs} |")
                else:
                    failures += 1
                    print(f"| {name} | {key} | {v} | | | | |")
            for key, v in row.items():
                if key.endswith("placement"):
                    print(f"| {name} | {key} | {v} | | | | |")
            sys.stdout.flush()
            if a.max_batch:  # issue 15: the largest batch that fits, fp32 against AMP
                max_batch[name] = max_batch_rows(a, name, s, variants,
                                                 {in_name: x, "labels": y}, batch, module,
                                                 loss_fn)
    if a.max_batch:
        failures += print_max_batch(max_batch, a)
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "max_batch.json"), "w") as f:
                json.dump({"scale": a.scale, "device": a.device, "max_memory": a.max_memory,
                           "limit": a.max_batch_limit, "results": max_batch}, f, indent=1,
                          sort_keys=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "step_bench.json"), "w") as f:
            json.dump({"scale": a.scale, "device": a.device, "steps": a.steps,
                       "results": results}, f, indent=1, sort_keys=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
