#!/usr/bin/env python3
"""Exports scikit-learn's digits set (8x8 images of handwritten digits, 1,797 samples,
UCI "Optical Recognition of Handwritten Digits", test part) to digits.npz for mpc's
training demos.

    pip install scikit-learn && python3 models/data/export_digits.py

Arrays (the names are the inputs of the training graphs built from models/digits_*.onnx):
    x           float32 [1438, 64]  pixels scaled from 0..16 to 0..1 (the CNN reshapes
                                    them to 1x8x8 images itself)
    labels      int64   [1438]      digit 0..9
    x_test, labels_test             the held-out 359 samples (20%)

The split is a fixed seeded permutation, so the file is byte-identical on every run.
"""
import argparse
import io
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(os.path.dirname(__file__), "digits.npz"))
    args = ap.parse_args()

    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(20181).permutation(len(y))
    n_test = len(y) // 5
    test, train = perm[:n_test], perm[n_test:]
    arrays = {
        "x": x[train], "labels": y[train], "x_test": x[test], "labels_test": y[test],
    }
    # np.savez stores zip entries with the current time; write them with a fixed one,
    # uncompressed (mpc's .npz reader takes stored members).
    import zipfile
    tmp = args.output + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.save(buf, arrays[name])
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, buf.getvalue())
    os.replace(tmp, args.output)
    print(f"wrote {args.output}: {len(train)} training and {n_test} held-out samples")


if __name__ == "__main__":
    main()
