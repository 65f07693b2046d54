"""Mixed-precision training of the PyTorch exports of tests/train/torch_fixtures (the models
of test_torch_parity.py), the user's path:

    mpc train-graph NAME.onnx --loss cross-entropy [the manifest's flags] --optimizer adam ...
    mpc rewrite ... --target fp16 (dynamic loss scaling) / --target bf16
    mpc run M --train --data d.npz --batch 32 --steps 300 --seed 3 --holdout 0.2

judged exactly as test_amp_archs.py judges its architectures (its Runs and check are used
here): the heavy ops and their gradients in 16 bits, finite losses, few skipped steps, and
the last sixth's mean loss and the held-out accuracy within the batch-order noise of fp32's
(the distance between the fp32 runs with seeds 3 and 4, or 10% / 5 points).

The fixtures' 10-step data (40 samples) is too small to learn from, so each model gets a
seeded synthetic task of 2000 samples with the input shapes and classes it was exported
with, built here: class templates plus noise for images and sequences, tokens whose residue
modulo the class count leans towards the label for the token classifiers, arithmetic
sequences modulo the vocabulary for the GPT decoder. (Generated, not stored: nothing to keep
in step with the fixtures but the shapes, read from the ONNX inputs.)

--quick (the default ctest run): the MobileNetV2 block, the GRU and the GPT decoder. Without
it (ctest -C full, train_torch_amp_full): every fixture model.
Prints "N passed, N failed[, N skipped]".
"""
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import mpc_testlib as lib  # noqa: E402

lib.require_onnx_reference()
import numpy as np  # noqa: E402
import onnx  # noqa: E402

import mpc_trainlib as tl  # noqa: E402
import test_amp_archs as amp  # noqa: E402

FIXTURES = os.path.join(HERE, "torch_fixtures")
QUICK = ("mobilenet_block", "gru_last", "gpt")


def load(name):
    return onnx.load(os.path.join(FIXTURES, f"{name}.onnx"))


def fixed_dims(name):
    """{input name: its dimensions after the batch} (all fixed for the non-token inputs)."""
    return {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim[1:]]
            for i in load(name).graph.input}


def leaning_tokens(names, t, vocab, classes, lean):
    """Token inputs `names` [N, t] over `vocab` ids; each position is, with probability
    `lean`, an id whose residue modulo `classes` is the sample's label, else uniform."""
    def task(seed):
        rng = np.random.default_rng(seed)
        labels = rng.integers(0, classes, amp.SAMPLES)
        leaning = labels[:, None] + classes * rng.integers(0, vocab // classes,
                                                          (amp.SAMPLES, t))
        tok = np.where(rng.random((amp.SAMPLES, t)) < lean, leaning,
                       rng.integers(0, vocab, (amp.SAMPLES, t)))
        feeds = {names[0]: tok.astype(np.int64)}
        for other in names[1:]:  # token types: 0 then 1 from a random split
            split = rng.integers(1, t, size=(amp.SAMPLES, 1))
            feeds[other] = (np.arange(t)[None] >= split).astype(np.int64)
        return feeds, labels.astype(np.int64)
    return task


def sequences(vocab, t):
    """Next-token prediction on (start + k * step) mod vocab, steps 1 or 2."""
    def task(seed):
        rng = np.random.default_rng(seed)
        start, step = rng.integers(0, vocab, amp.SAMPLES), rng.integers(1, 3, amp.SAMPLES)
        seq = (start[:, None] + step[:, None] * np.arange(t + 1)[None]) % vocab
        return {"tokens": seq[:, :-1].astype(np.int64)}, seq[:, 1:].astype(np.int64)
    return task


def templates(name, noise):
    """Class templates plus noise, shaped like the model's float input, 3 classes."""
    (shape,) = fixed_dims(name).values()
    return lambda seed: amp.templates(tuple(shape), seed, noise)


# name: (task(seed), Adam learning rate)
TASKS = {
    "embedding_pool": (leaning_tokens(["tokens"], 5, 12, 4, 0.5), 0.01),
    "lstm_last": (templates("lstm_last", 1.2), 0.01),
    "gru_last": (templates("gru_last", 1.6), 0.01),
    "transformer_encoder": (templates("transformer_encoder", 1.6), 0.01),
    "gpt": (sequences(11, 5), 0.01),
    "mobilenet_block": (templates("mobilenet_block", 1.2), 0.01),
    "bert_encoder": (leaning_tokens(["tokens", "token_types"], 6, 12, 3, 0.4), 0.005),
    "resnet_block": (templates("resnet_block", 2.0), 0.01),
    "bn_cnn": (templates("bn_cnn", 2.0), 0.01),
    "resnet18": (templates("resnet18", 3.5), 0.003),
    "mobilenet_v2": (templates("mobilenet_v2", 1.5), 0.01),
    "efficientnet_block": (templates("efficientnet_block", 1.5), 0.01),
    "vit": (templates("vit", 1.5), 0.01),
    "t5_encoder": (leaning_tokens(["tokens"], 6, 12, 3, 0.5), 0.01),
}


def register():
    """Adds every fixture model to test_amp_archs' table (as torch_NAME) and a test for it."""
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        models = json.load(f)["models"]
    assert sorted(models) == sorted(TASKS), "every fixture model needs a task here"
    for name, (task, lr) in TASKS.items():
        amp.ARCHS[f"torch_{name}"] = (lambda n=name: load(n), task,
                                      tuple(models[name]["train_graph_flags"]), lr)
        setattr(TorchAmp, f"test_{name}", lambda self, n=name: self.check(f"torch_{n}"))


class TorchAmp(unittest.TestCase):
    check = amp.AmpArchitectures.check


register()


def main():
    if "--quick" in sys.argv:
        sys.argv.remove("--quick")
        for name in set(TASKS) - set(QUICK):
            delattr(TorchAmp, f"test_{name}")
    return tl.test_main((TorchAmp,), lambda args: setattr(amp, "ARGS", args))


if __name__ == "__main__":
    sys.exit(main())
