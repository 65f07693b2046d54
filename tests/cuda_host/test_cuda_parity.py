#!/usr/bin/env python3
"""The CUDA backend against the CPU backend, through `mpc run` (ctest label `gpu`).

    python3 tests/cuda_host/test_cuda_parity.py --mpc build/tools/mpc --source-dir . [-v]

Each model below runs with `--device cpu` and `--device cuda` on the same inputs (.npy
files), and every output of the CUDA run is compared with the CPU run's:
  * element-wise chains (unary bodies with attributes, numpy broadcasting on both sides,
    comparisons to bool, i64 arithmetic) and casts between f32/f16/bf16/i32/i64/bool:
    the same bodies run on both backends, so float results must agree within 4 ulps of the
    compute type (device math functions may differ from the host's by a few ulps; the
    difference d = sg - g of two such results, 8 ulps of the larger operand), integer
    and bool results exactly;
  * MatMul (2-D, batched, broadcast batch, 1-D operand) and Gemm (transposes, alpha, a [N]
    bias, a [M, 1] C with beta) in f32, f16 and bf16: fp32 accumulation in both, in another
    order, so relative L2 error <= 1e-5 (f32), 2e-3 (f16), 1e-2 (bf16) of the CPU result;
  * the data-movement index ops (DepthToSpace CRD, SpaceToDepth, GatherND, ScatterND with
    add over duplicate tuples, ScatterElements with duplicates, ReverseSequence, EyeLike,
    Compress and NonZero of a computed condition) in f32 and f16, with `--no-fallback`:
    values are moved or combined in the CPU's order, so every output is bit-identical.
  * Einsum (batched product, diagonal, sums), Attention (4-D grouped heads, causal; 3-D with
    a bool mask) and RotaryEmbedding (interleaved, position ids), with --no-fallback so that
    each runs on the GPU, to the same tolerances.
Where no GPU is usable (or the build has no CUDA backend) every case is skipped and one line
says why; this suite then passes, so CI runs it harmlessly.

The last line printed is 'N passed, N failed'; exit status 1 on any failure, 77 when onnx
or numpy is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
except ImportError as e:  # pragma: no cover
    print(f"onnx and numpy are required ({e})", file=sys.stderr)
    print("0 passed, 0 failed")
    sys.exit(77)

MPC = None
NO_GPU = None  # the one-line reason, once known

F32, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16


def mpc(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPC_")}
    return subprocess.run([MPC, *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def elementwise_model():
    n = helper.make_node
    nodes = [
        n("Relu", ["x"], ["r"]),
        n("LeakyRelu", ["x"], ["lr"], alpha=0.3),
        n("Add", ["r", "y"], ["s"]),            # [2,3,8] + [8]
        n("Mul", ["s", "z"], ["m"]),            # [2,3,8] * [3,1]
        n("Sigmoid", ["m"], ["sg"]),
        n("Gelu", ["lr"], ["g"], approximate="tanh"),
        n("Sub", ["sg", "g"], ["d"]),
        n("Greater", ["d", "y"], ["gt"]),
        n("Cast", ["d"], ["d16"], to=F16),
        n("Exp", ["d16"], ["e16"]),
        n("Div", ["e16", "d16"], ["q16"]),
        n("Cast", ["d"], ["db"], to=BF16),
        n("Tanh", ["db"], ["tb"]),
        n("Cast", ["tb"], ["tf"], to=F32),
        n("Mul", ["i", "j"], ["ij"]),           # i64 [2,3,1] * [4]
        n("Cast", ["x"], ["xi"], to=TensorProto.INT32),
        n("IsNaN", ["q16"], ["nan"]),
    ]
    g = helper.make_graph(
        nodes, "ew",
        [vi("x", F32, [2, 3, 8]), vi("y", F32, [8]), vi("z", F32, [3, 1]),
         vi("i", TensorProto.INT64, [2, 3, 1]), vi("j", TensorProto.INT64, [4])],
        [vi("d", F32, [2, 3, 8]), vi("sg", F32, [2, 3, 8]), vi("g", F32, [2, 3, 8]),
         vi("gt", TensorProto.BOOL, [2, 3, 8]), vi("q16", F16, [2, 3, 8]),
         vi("tf", F32, [2, 3, 8]), vi("ij", TensorProto.INT64, [2, 3, 4]),
         vi("xi", TensorProto.INT32, [2, 3, 8]), vi("nan", TensorProto.BOOL, [2, 3, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def gemm_model(elem):
    """Products in `elem`: the f32 inputs are cast in and the results cast out."""
    n = helper.make_node
    ins = {"a": [4, 16], "b": [16, 8], "ba": [3, 4, 16], "bb": [3, 16, 8], "bc": [2, 3, 4, 16],
           "v": [16], "wt": [8, 16], "bias": [8], "c41": [4, 1]}
    nodes = [n("Cast", [k], [k + "_"], to=elem) for k in ins]
    nodes += [
        n("MatMul", ["a_", "b_"], ["mm"]),
        n("MatMul", ["ba_", "bb_"], ["bmm"]),
        n("MatMul", ["bc_", "b_"], ["bcm"]),
        n("MatMul", ["v_", "b_"], ["vm"]),
        n("Gemm", ["a_", "wt_", "bias_"], ["g1"], transB=1, alpha=0.5),
        n("Gemm", ["a_", "b_", "c41_"], ["g2"], beta=0.25),
        n("Gemm", ["b_", "wt_"], ["g3"], transA=1, transB=1),
    ]
    outs = {"mm": [4, 8], "bmm": [3, 4, 8], "bcm": [2, 3, 4, 8], "vm": [8], "g1": [4, 8],
            "g2": [4, 8], "g3": [8, 8]}
    nodes += [n("Cast", [o], [o + "_f"], to=F32) for o in outs]
    g = helper.make_graph(nodes, "gemm", [vi(k, F32, s) for k, s in ins.items()],
                          [vi(o + "_f", F32, s) for o, s in outs.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def movement_model(elem):
    """The data-movement index ops over x [2, 8, 3, 4] cast to `elem`; indices are
    initializers (in range, negative ones included), conditions computed by the graph."""
    n = helper.make_node
    i64 = lambda name, dims, vals: helper.make_tensor(name, TensorProto.INT64, dims, vals)
    inits = [
        i64("nd_idx", [2, 2], [1, -1, 0, 3]),
        i64("snd_idx", [3, 1], [0, 1, 0]),
        i64("sel_idx", [2, 2, 3, 4], [(i * 5) % 8 - 4 for i in range(48)]),
        i64("lens", [8], [2, 1, 0, 2, 1, 2, 2, 1]),
        i64("raxes", [3], [0, 2, 3]),
    ]
    nodes = [n("Cast", [k], [k + "_"], to=elem) for k in ("x", "u", "su", "m")]
    nodes += [
        n("DepthToSpace", ["x_"], ["d2s"], blocksize=2, mode="CRD"),
        n("SpaceToDepth", ["d2s"], ["s2d"], blocksize=2),
        n("GatherND", ["x_", "nd_idx"], ["gnd"]),
        n("ScatterND", ["x_", "snd_idx", "u_"], ["snd"], reduction="add"),
        n("ScatterElements", ["x_", "sel_idx", "su_"], ["sel"], axis=1),
        n("ReverseSequence", ["x_", "lens"], ["rsq"], batch_axis=1, time_axis=0),
        n("EyeLike", ["m_"], ["eye"], k=1),
        n("Greater", ["x", "zero"], ["pos"]),
        n("NonZero", ["pos"], ["nz"]),
        n("ReduceMean", ["x", "raxes"], ["mean"], keepdims=0),
        n("Greater", ["mean", "zero"], ["keep"]),
        n("Compress", ["x_", "keep"], ["cmp"], axis=1),
    ]
    inits.append(helper.make_tensor("zero", F32, [], [0.0]))
    outs = {"d2s": [2, 2, 6, 8], "s2d": [2, 8, 3, 4], "gnd": [2, 3, 4], "snd": [2, 8, 3, 4],
            "sel": [2, 8, 3, 4], "rsq": [2, 8, 3, 4], "eye": [5, 7], "cmp": [2, "kept", 3, 4]}
    nodes += [n("Cast", [o], [o + "_f"], to=F32) for o in outs]
    ins = [vi("x", F32, [2, 8, 3, 4]), vi("u", F32, [3, 8, 3, 4]), vi("su", F32, [2, 2, 3, 4]),
           vi("m", F32, [5, 7])]
    g = helper.make_graph(nodes, "movement", ins,
                          [vi(o + "_f", F32, s) for o, s in outs.items()] +
                          [vi("nz", TensorProto.INT64, [4, "nonzero"])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
def transformer_model(elem):
    """Einsum, Attention and RotaryEmbedding (opset 23) in `elem`, f32 in and out."""
    n = helper.make_node
    ins = {"a": [2, 3, 5], "b": [2, 5, 4], "sq": [4, 4], "q": [2, 4, 3, 8], "k": [2, 2, 6, 8],
           "v": [2, 2, 6, 8], "q3": [1, 5, 12], "kv3": [1, 7, 4], "cos": [9, 4], "sin": [9, 4]}
    mask = helper.make_tensor("mask", TensorProto.BOOL, [5, 7],
                              [j == 0 or (i + j) % 3 != 0 for i in range(5) for j in range(7)])
    pos = helper.make_tensor("pos", TensorProto.INT64, [2, 3], [0, 4, 8, 1, 1, 7])
    nodes = [n("Cast", [k], [k + "_"], to=elem) for k in ins]
    nodes += [
        n("Einsum", ["a_", "b_"], ["bmm"], equation="bij,bjk->bik"),
        n("Einsum", ["sq_"], ["diag"], equation="ii->i"),
        n("Einsum", ["a_"], ["sums"], equation="bij->jb"),
        n("Attention", ["q_", "k_", "v_"], ["att"], is_causal=1),
        n("Attention", ["q3_", "kv3_", "kv3_", "mask"], ["att3"], q_num_heads=3, kv_num_heads=1),
        n("RotaryEmbedding", ["q_", "cos_", "sin_", "pos"], ["rot"], interleaved=1),
    ]
    outs = {"bmm": [2, 3, 4], "diag": [4], "sums": [3, 2], "att": [2, 4, 3, 8],
            "att3": [1, 5, 12], "rot": [2, 4, 3, 8]}
    nodes += [n("Cast", [o], [o + "_f"], to=F32) for o in outs]
    g = helper.make_graph(nodes, "transformer", [vi(k, F32, s) for k, s in ins.items()],
                          [vi(o + "_f", F32, s) for o, s in outs.items()],
                          initializer=[mask, pos])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def inputs_for(model, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        t = i.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if t.elem_type == TensorProto.INT64:
            feeds[i.name] = rng.integers(-50, 50, shape).astype(np.int64)
        else:
            feeds[i.name] = rng.uniform(-2, 2, shape).astype(np.float32)
    return feeds


def ulp_diff(a, b, dtype):
    """Distance in units in the last place of `dtype` (f32 or f16)."""
    ai = a.astype(dtype).view(np.int32 if dtype == np.float32 else np.int16).astype(np.int64)
    bi = b.astype(dtype).view(np.int32 if dtype == np.float32 else np.int16).astype(np.int64)
    ai = np.where(ai < 0, np.int64(-(1 << 31)) - ai if dtype == np.float32 else -32768 - ai, ai)
    bi = np.where(bi < 0, np.int64(-(1 << 31)) - bi if dtype == np.float32 else -32768 - bi, bi)
    return np.abs(ai - bi)


class CudaParityTest(unittest.TestCase):
    def setUp(self):
        global NO_GPU
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        if NO_GPU is None:
            probe = os.path.join(self.dir, "probe.onnx")
            onnx.save(elementwise_model(), probe)
            r = mpc("run", probe, "--random-inputs", "--device", "cuda")
            NO_GPU = "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[0]
            if NO_GPU:
                print(f"cuda_parity: skipped: {NO_GPU}")
        if NO_GPU:
            self.skipTest(NO_GPU)

    def tearDown(self):
        self.tmp.cleanup()

    def run_both(self, model, name, cuda_args=()):
        path = os.path.join(self.dir, name + ".onnx")
        onnx.save(model, path)
        args = []
        for k, v in inputs_for(model).items():
            f = os.path.join(self.dir, f"{name}_{k}.npy")
            np.save(f, v)
            args += ["--input", f"{k}={f}"]
        outs = {}
        for device in ("cpu", "cuda"):
            d = os.path.join(self.dir, f"{name}_{device}")
            extra = cuda_args if device == "cuda" else ()
            r = mpc("run", path, *args, "--device", device, *extra, "--outputs", d)
            self.assertEqual(r.returncode, 0, f"{device}: {r.stderr}")
            outs[device] = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)}
        self.assertEqual(sorted(outs["cpu"]), sorted(outs["cuda"]))
        return outs["cpu"], outs["cuda"]

    def test_elementwise_and_casts(self):
        cpu, gpu = self.run_both(elementwise_model(), "ew")
        for k in cpu:
            c, g = cpu[k], gpu[k]
            self.assertEqual((c.dtype, c.shape), (g.dtype, g.shape), k)
            if c.dtype.kind in "biu":
                np.testing.assert_array_equal(c, g, err_msg=k)
            elif k == "d":
                # d = sg - g cancels: its error is that of its operands (each held to 4 ulps
                # below), so it is held to 8 ulps of the larger operand, not to ulps of the
                # possibly tiny difference.
                scale = np.maximum(np.abs(cpu["sg"]), np.abs(cpu["g"]))
                err = np.abs(c.astype(np.float64) - g.astype(np.float64))
                bound = 8 * np.spacing(scale.astype(np.float32)).astype(np.float64)
                self.assertTrue(np.all(err <= bound), f"d: {err.max()} > {bound.min()}")
            else:
                dt = np.float16 if k == "q16" else np.float32
                self.assertLessEqual(int(ulp_diff(c, g, dt).max()), 4, k)

    def check_close(self, cpu, gpu, elem, tol):
        for k in cpu:
            c, g = cpu[k].astype(np.float64), gpu[k].astype(np.float64)
            self.assertEqual(c.shape, g.shape, k)
            err = np.linalg.norm(c - g) / max(np.linalg.norm(c), 1e-30)
            self.assertLessEqual(err, tol, f"{k} in type {elem}")

    def test_matrix_products(self):
        for elem, tol in ((F32, 1e-5), (F16, 2e-3), (BF16, 1e-2)):
            cpu, gpu = self.run_both(gemm_model(elem), f"gemm{elem}")
            self.check_close(cpu, gpu, elem, tol)

    def test_transformer_ops(self):
        # --no-fallback: every node of the model has to run on the GPU.
        for elem, tol in ((F32, 1e-5), (F16, 2e-3), (BF16, 1e-2)):
            cpu, gpu = self.run_both(transformer_model(elem), f"tf{elem}", ("--no-fallback",))
            self.check_close(cpu, gpu, elem, tol)

    def test_data_movement_index_ops(self):
        for elem in (F32, F16):
            cpu, gpu = self.run_both(movement_model(elem), f"move{elem}", ["--no-fallback"])
            for k in cpu:
                self.assertEqual((cpu[k].dtype, cpu[k].shape), (gpu[k].dtype, gpu[k].shape), k)
                np.testing.assert_array_equal(cpu[k], gpu[k], err_msg=f"{k} in type {elem}")


def main():
    global MPC
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpc", required=True)
    ap.add_argument("--source-dir", default=".")
    ap.add_argument("-v", action="store_true")
    args, _ = ap.parse_known_args()
    MPC = os.path.abspath(args.mpc)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(CudaParityTest)
    result = unittest.TextTestRunner(verbosity=2 if args.v else 1).run(suite)
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed - len(result.skipped)} passed, {failed} failed, "
          f"{len(result.skipped)} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
