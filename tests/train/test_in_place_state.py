"""In-place state updates (docs/training.md, "Training state"): with device-resident state the
training step writes each updated state tensor over its old value where no node reads the old
value after that write starts (Executor::writeOverProblem), instead of into a second buffer
swapped after the step. `MPC_TRAIN_DOUBLE_BUFFER=1` gives every updated state its second
buffer (the layout before); both must give the same bits. The way a user runs it:

    mpc train-graph models/digits_mlp.onnx --loss cross-entropy --optimizer adam ... -o t.onnx
    mpc rewrite t.onnx [--multi-tensor-optimizer | --optimizer-weight-copy] -o t.amp.onnx
    mpc run t.amp.onnx --train --data models/data/digits.npz --stats --log t.csv --checkpoint ck

For each variant (the per-op optimizer update of train-graph, the fused optimizer steps SGD,
Momentum and Adam, the multi-tensor Adam step, the 16-bit weight copies; fp32, fp16 with
dynamic loss scaling grown into overflows so that steps are skipped, bf16):
(a) the log, stdout and every byte of the final checkpoint are the same in place and
    double-buffered, and a resumed run in place ends on the straight run's checkpoint bytes;
(b) the `--stats` line states the decision exactly: every updated state is written in place
    except the loss scale (its value before the step is logged after it), which keeps its
    second buffer; the double-buffered run writes none in place;
(c) the backend's peak memory falls by the bytes that are no longer double-buffered, less at
    most the step plan's growth (a guarded update's unguarded value now has arena space);
(d) a model whose step reads a parameter after its update (an extra output of the algorithm
    graph computed from the old value late in the graph) keeps that parameter
    double-buffered, and still trains to the same bits.

--device cuda (on a GPU machine) runs the same on the GPU.
Prints "N passed, N failed[, N skipped]".
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mpc_testlib as lib  # noqa: E402

lib.require_onnx_reference()
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

import mpc_trainlib as tl  # noqa: E402

ARGS = None
DEVICE = "cpu"
STATS = re.compile(r"state in backend buffers \((\d+) tensor\(s\), [^;]+; (\d+) updated in "
                   r"place, [^;]+; (\d+) double-buffered, [^)]+\)")
PEAK = re.compile(r"backend peak ([0-9.]+) (B|KiB|MiB|GiB)")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def run_mpc(*args, env=None, timeout=300):
    return subprocess.run([ARGS.mpc, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def source(*parts):
    return os.path.join(ARGS.source_dir, *parts)


class InPlaceState(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mpc-inplace-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def ok(self, *args, env=None):
        r = run_mpc(*args, env=env)
        self.assertEqual(r.returncode, 0, f"mpc {' '.join(map(str, args))}:\n{r.stderr}")
        return r

    def build(self, name, optimizer, fused, target, rewrite_flags=()):
        train = os.path.join(self.dir, name + ".train.onnx")
        flags = ["--fused-optimizer"] if fused else []
        self.ok("train-graph", source("models", "digits_mlp.onnx"), "--loss", "cross-entropy",
                "--optimizer", optimizer, "--lr", "0.01", *flags, "-o", train)
        if target == "fp32":
            return train
        out = os.path.join(self.dir, name + ".amp.onnx")
        scaling = ["--loss-scale", "dynamic", "--loss-scale-interval", "5"] \
            if target == "fp16" else []
        self.ok("rewrite", train, "--target", target, *scaling, *rewrite_flags, "-o", out)
        return out

    def train(self, model, tag, steps, env=None, resume=None):
        ck = os.path.join(self.dir, tag)
        log = os.path.join(self.dir, tag + ".csv")
        extra = ["--resume", resume] if resume else []
        r = self.ok("run", model, "--train", "--device", DEVICE, "--data",
                    source("models", "data", "digits.npz"), "--batch", "32", "--steps", steps,
                    "--eval-every", "20", "--seed", "5", "--stats", "--log", log,
                    "--checkpoint", ck, *extra, env=env)
        with open(os.path.join(ck, "checkpoint.onnx"), "rb") as f:
            checkpoint = f.read()
        with open(log) as f:
            rows = f.read()
        m = STATS.search(r.stderr)
        self.assertIsNotNone(m, r.stderr)
        peak = PEAK.search(r.stderr)
        self.assertIsNotNone(peak, r.stderr)
        return dict(out=r.stdout, checkpoint=checkpoint, log=rows,
                    decision=tuple(int(g) for g in m.groups()),
                    peak=float(peak.group(1)) * UNITS[peak.group(2)], ck=ck)

    def updated(self, model):
        m = onnx.load(model)
        return [b.key for b in m.training_info[0].update_binding]

    def check_variant(self, name, optimizer, fused, target, rewrite_flags=()):
        model = self.build(name, optimizer, fused, target, rewrite_flags)
        updated = self.updated(model)
        scaled = target == "fp16"
        a = self.train(model, name + "-inplace", 60)
        b = self.train(model, name + "-double", 60, env={"MPC_TRAIN_DOUBLE_BUFFER": "1"})
        # (a) the same bits
        self.assertEqual(a["out"], b["out"])
        self.assertEqual(a["log"], b["log"])
        self.assertEqual(a["checkpoint"], b["checkpoint"])
        if scaled:
            header, *rows = [r.split(",") for r in a["log"].splitlines()]
            skipped = [r[header.index("skipped")] for r in rows]
            self.assertIn("1", skipped, "no step was skipped")
        # (b) the decisions
        tensors, in_place, double = a["decision"]
        self.assertEqual(in_place, len(updated) - (1 if scaled else 0), a["decision"])
        self.assertEqual(double, 1 if scaled else 0)
        self.assertEqual(b["decision"], (tensors, 0, len(updated)))
        # (c) the memory: never more (on this model the unguarded values of
        # the per-op update are smaller than the states' second buffers)
        self.assertLess(a["peak"], b["peak"])
        return model, a

    def test_per_op_adam_fp32(self):
        self.check_variant("perop32", "adam", False, "fp32")

    def test_per_op_adam_fp16(self):
        self.check_variant("perop16", "adam", False, "fp16")

    def test_fused_sgd_momentum_adam_fp16(self):
        for opt in ("sgd", "momentum", "adam"):
            with self.subTest(optimizer=opt):
                self.check_variant("fused-" + opt, opt, True, "fp16")

    def test_multi_tensor_adam_fp16_and_bf16(self):
        for target in ("fp16", "bf16"):
            with self.subTest(target=target):
                self.check_variant("multi-" + target, "adam", True, target,
                                   ["--multi-tensor-optimizer"])

    def test_weight_copies_and_resume(self):
        model, straight = self.check_variant("copy", "adam", True, "fp16",
                                             ["--optimizer-weight-copy"])
        # A run resumed from step 40 in place ends on the straight run's bytes.
        mid = self.train(model, "copy-mid", 40)
        resumed = self.train(model, "copy-resumed", 60,
                             resume=os.path.join(mid["ck"], "checkpoint.onnx"))
        self.assertEqual(resumed["checkpoint"], straight["checkpoint"])

    def test_late_reader_keeps_its_second_buffer(self):
        # (d) the algorithm graph gets one more output, Identity of the old
        # fc0/W placed after its update: the old value is read after the
        # update, so fc0/W keeps two buffers; its moments do not.
        model = self.build("late", "adam", True, "fp32")
        m = onnx.load(model)
        alg = m.training_info[0].algorithm
        alg.node.append(helper.make_node("Identity", ["fc0/W"], ["late/old_W"], name="late"))
        alg.output.append(helper.make_tensor_value_info("late/old_W", onnx.TensorProto.FLOAT,
                                                        None))
        late = os.path.join(self.dir, "late-reader.onnx")
        onnx.save(m, late)
        updated = self.updated(late)
        a = self.train(late, "late-inplace", 30)
        b = self.train(late, "late-double", 30, env={"MPC_TRAIN_DOUBLE_BUFFER": "1"})
        self.assertEqual(a["decision"][1:], (len(updated) - 1, 1))
        self.assertEqual((a["out"], a["log"], a["checkpoint"]),
                         (b["out"], b["log"], b["checkpoint"]))


def main():
    global DEVICE
    DEVICE = tl.pop_device_arg()

    def set_args(args):
        global ARGS
        ARGS = args
    return tl.test_main((InPlaceState,), set_args)


if __name__ == "__main__":
    sys.exit(main())
