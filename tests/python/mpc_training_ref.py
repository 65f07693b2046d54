"""NumPy references of the ai.mpc.training gradient ops (docs/training.md).

Each op is an onnx.reference custom op (an OpRun subclass with op_domain
"ai.mpc.training"). They compute in float64 and return the dtype of their
first floating input, so they serve both as onnx.reference ops inside
training graphs and as the oracle of mpc's CPU kernels. OPS lists them all, with
com.microsoft FusedMatMul (train-graph reads batched operands transposed through it):

    ReferenceEvaluator(model, new_ops=mpc_training_ref.OPS)

They share no code with mpc; tests/training_ops/test_training_ref.py checks
each against central finite differences of its forward op.
"""
import itertools
import math

import numpy as np
from onnx.reference.op_run import OpRun

DOMAIN = "ai.mpc.training"

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _norm_axis(axis, rank):
    axis = -1 if axis is None else int(axis)
    return axis + rank if axis < 0 else axis


class _GradOp(OpRun):
    op_domain = DOMAIN


# ---------------------------------------------------------------- element-wise


def bias_grad(dy, shape):
    dy = _f64(dy)
    shape = [int(s) for s in np.asarray(shape).reshape(-1)]
    lead = dy.ndim - len(shape)
    out = dy.sum(axis=tuple(range(lead))) if lead > 0 else dy
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and out.shape[i] != 1)
    if axes:
        out = out.sum(axis=axes, keepdims=True)
    return out.reshape(shape)


class BiasGrad(_GradOp):
    def _run(self, dy, shape, to=None):
        # `to` = 1 (float32) over a 16-bit dY: the sum in float64, typed float32.
        return (bias_grad(dy, shape).astype(np.float32 if to == 1 else dy.dtype),)


class ReluGrad(_GradOp):
    def _run(self, dy, x):
        return (np.where(_f64(x) > 0, _f64(dy), 0.0).astype(dy.dtype),)


class SigmoidGrad(_GradOp):
    def _run(self, dy, y):
        y = _f64(y)
        return ((_f64(dy) * y * (1.0 - y)).astype(dy.dtype),)


class TanhGrad(_GradOp):
    def _run(self, dy, y):
        y = _f64(y)
        return ((_f64(dy) * (1.0 - y * y)).astype(dy.dtype),)


class ErfGrad(_GradOp):
    def _run(self, dy, x):
        x = _f64(x)
        return ((_f64(dy) * 2.0 / math.sqrt(math.pi) * np.exp(-x * x)).astype(dy.dtype),)


def gelu_grad(x, approximate):
    x = _f64(x)
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        u = c * (x + 0.044715 * x**3)
        t = np.tanh(u)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x)
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(
        2.0 * math.pi)


class GeluGrad(_GradOp):
    def _run(self, dy, x, approximate=None):
        approx = approximate or "none"
        if isinstance(approx, bytes):
            approx = approx.decode()
        return ((_f64(dy) * gelu_grad(x, approx)).astype(dy.dtype),)


class SoftmaxGrad(_GradOp):
    def _run(self, dy, y, axis=None):
        a = _norm_axis(axis, y.ndim)
        d, yy = _f64(dy), _f64(y)
        return ((yy * (d - (d * yy).sum(axis=a, keepdims=True))).astype(dy.dtype),)


class LogSoftmaxGrad(_GradOp):
    def _run(self, dy, y, axis=None):
        a = _norm_axis(axis, y.ndim)
        d = _f64(dy)
        return ((d - np.exp(_f64(y)) * d.sum(axis=a, keepdims=True)).astype(dy.dtype),)


# --------------------------------------------------------------- normalization


def _norm_grad(dy, x, scale_b, xhat, inv, red_axes):
    """dX of y = scale*xhat + b for xhat normalized over red_axes."""
    dxhat = dy * scale_b
    m1 = dxhat.mean(axis=red_axes, keepdims=True)
    m2 = (dxhat * xhat).mean(axis=red_axes, keepdims=True)
    return inv * (dxhat - m1 - xhat * m2)


class LayerNormalizationGrad(_GradOp):
    def _run(self, dy, x, scale, mean, inv_std_dev, axis=None):
        a = _norm_axis(axis, x.ndim)
        d, xx, s = _f64(dy), _f64(x), _f64(scale)
        inv = _f64(inv_std_dev)
        xhat = (xx - _f64(mean)) * inv
        red = tuple(range(a, x.ndim))
        dx = _norm_grad(d, xx, s, xhat, inv, red)
        lead = tuple(range(a))
        dscale = (d * xhat).sum(axis=lead).reshape(scale.shape)
        dbias = d.sum(axis=lead).reshape(scale.shape)
        return (dx.astype(dy.dtype), dscale.astype(scale.dtype), dbias.astype(scale.dtype))


class BatchNormalizationGrad(_GradOp):
    def _run(self, dy, x, scale, epsilon=None):
        eps = 1e-5 if epsilon is None else float(epsilon)
        d, xx = _f64(dy), _f64(x)
        red = tuple(i for i in range(x.ndim) if i != 1)
        bshape = [1] * x.ndim
        bshape[1] = x.shape[1]
        mean = xx.mean(axis=red, keepdims=True)
        var = ((xx - mean) ** 2).mean(axis=red, keepdims=True)
        inv = 1.0 / np.sqrt(var + eps)
        xhat = (xx - mean) * inv
        dx = _norm_grad(d, xx, _f64(scale).reshape(bshape), xhat, inv, red)
        dscale = (d * xhat).sum(axis=red)
        dbias = d.sum(axis=red)
        return (dx.astype(dy.dtype), dscale.astype(scale.dtype), dbias.astype(scale.dtype))


# ------------------------------------------------------------ conv and pooling


def _ints(v, n, default):
    return [int(i) for i in v] if v is not None and len(v) else [default] * n


def _pads(auto_pad, pads, in_sp, out_sp, kernel, strides, dilations):
    """(begin, end) pads per spatial axis, following Conv/Pool's auto_pad."""
    n = len(in_sp)
    ap = auto_pad.decode() if isinstance(auto_pad, bytes) else (auto_pad or "NOTSET")
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        b, e = [], []
        for i in range(n):
            total = max(0, (out_sp[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
                        - in_sp[i])
            small, big = total // 2, total - total // 2
            b.append(small if ap == "SAME_UPPER" else big)
            e.append(big if ap == "SAME_UPPER" else small)
        return b, e
    if ap == "VALID":
        return [0] * n, [0] * n
    p = _ints(pads, 2 * n, 0)
    return p[:n], p[n:]


def conv_grad(dy, x, w, auto_pad=None, dilations=None, group=None, kernel_shape=None,
              pads=None, strides=None):
    dy, x, w = _f64(dy), _f64(x), _f64(w)
    nsp = x.ndim - 2
    g = int(group or 1)
    kernel = list(w.shape[2:])
    strides = _ints(strides, nsp, 1)
    dil = _ints(dilations, nsp, 1)
    out_sp = list(dy.shape[2:])
    pb, pe = _pads(auto_pad, pads, x.shape[2:], out_sp, kernel, strides, dil)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pb[i], pe[i]) for i in range(nsp)])
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    m, cg = w.shape[0], w.shape[1]
    mg = m // g
    for k in itertools.product(*[range(s) for s in kernel]):
        sl = tuple(slice(k[i] * dil[i], k[i] * dil[i] + (out_sp[i] - 1) * strides[i] + 1,
                         strides[i]) for i in range(nsp))
        for gi in range(g):
            xs = xp[(slice(None), slice(gi * cg, (gi + 1) * cg)) + sl]
            ds = dy[:, gi * mg:(gi + 1) * mg]
            wk = w[(slice(gi * mg, (gi + 1) * mg), slice(None)) + k]
            dw[(slice(gi * mg, (gi + 1) * mg), slice(None)) + k] += np.einsum(
                "nmp,ncp->mc", ds.reshape(ds.shape[0], mg, -1),
                xs.reshape(xs.shape[0], cg, -1))
            dxp[(slice(None), slice(gi * cg, (gi + 1) * cg)) + sl] += np.einsum(
                "nm...,mc->nc...", ds, wk)
    crop = tuple(slice(pb[i], pb[i] + x.shape[2 + i]) for i in range(nsp))
    dx = dxp[(slice(None), slice(None)) + crop]
    db = dy.sum(axis=tuple(i for i in range(dy.ndim) if i != 1))
    return dx, dw, db


class ConvGrad(_GradOp):
    def _run(self, dy, x, w, auto_pad=None, dilations=None, group=None, kernel_shape=None,
             pads=None, strides=None):
        dx, dw, db = conv_grad(dy, x, w, auto_pad, dilations, group, kernel_shape, pads,
                               strides)
        return (dx.astype(dy.dtype), dw.astype(dy.dtype), db.astype(dy.dtype))


def _windows(x_shape, out_sp, kernel, strides, dil, pb, pe):
    """Yields (out index, [(in index or None, counted)]) per output position;
    None marks padding, counted says the position lies inside the padded
    extent (count_include_pad)."""
    nsp = len(kernel)
    for o in itertools.product(*[range(s) for s in out_sp]):
        win = []
        for k in itertools.product(*[range(s) for s in kernel]):
            idx = tuple(o[i] * strides[i] - pb[i] + k[i] * dil[i] for i in range(nsp))
            inside = all(0 <= idx[i] < x_shape[i] for i in range(nsp))
            counted = all(-pb[i] <= idx[i] < x_shape[i] + pe[i] for i in range(nsp))
            win.append((idx if inside else None, counted))
        yield o, win


def _pool_geometry(dy, x, auto_pad, dilations, kernel_shape, pads, strides):
    nsp = x.ndim - 2
    kernel = [int(k) for k in kernel_shape]
    strides = _ints(strides, nsp, 1)
    dil = _ints(dilations, nsp, 1)
    out_sp = list(dy.shape[2:])
    pb, pe = _pads(auto_pad, pads, x.shape[2:], out_sp, kernel, strides, dil)
    return kernel, strides, dil, out_sp, pb, pe


def max_pool_grad(dy, x, auto_pad=None, dilations=None, kernel_shape=None, pads=None,
                  strides=None):
    dy, x = _f64(dy), _f64(x)
    kernel, strides, dil, out_sp, pb, pe = _pool_geometry(dy, x, auto_pad, dilations,
                                                          kernel_shape, pads, strides)
    dx = np.zeros_like(x)
    for o, win in _windows(x.shape[2:], out_sp, kernel, strides, dil, pb, pe):
        cells = [idx for idx, _ in win if idx is not None]
        if not cells:
            continue
        for n in range(x.shape[0]):
            for c in range(x.shape[1]):
                best = None
                for idx in cells:
                    if best is None or x[(n, c) + idx] > x[(n, c) + best]:
                        best = idx
                dx[(n, c) + best] += dy[(n, c) + o]
    return dx


class MaxPoolGrad(_GradOp):
    def _run(self, dy, x, auto_pad=None, ceil_mode=None, dilations=None, kernel_shape=None,
             pads=None, storage_order=None, strides=None):
        return (max_pool_grad(dy, x, auto_pad, dilations, kernel_shape, pads,
                              strides).astype(dy.dtype),)


def average_pool_grad(dy, x, auto_pad=None, count_include_pad=0, dilations=None,
                      kernel_shape=None, pads=None, strides=None):
    dy, x = _f64(dy), _f64(x)
    kernel, strides, dil, out_sp, pb, pe = _pool_geometry(dy, x, auto_pad, dilations,
                                                          kernel_shape, pads, strides)
    dx = np.zeros_like(x)
    for o, win in _windows(x.shape[2:], out_sp, kernel, strides, dil, pb, pe):
        cells = [idx for idx, _ in win if idx is not None]
        count = sum(1 for _, c in win if c) if count_include_pad else len(cells)
        if not cells:
            continue
        for idx in cells:
            dx[(slice(None), slice(None)) + idx] += dy[(slice(None), slice(None)) + o] / count
    return dx


class AveragePoolGrad(_GradOp):
    def _run(self, dy, x, auto_pad=None, ceil_mode=None, count_include_pad=None,
             dilations=None, kernel_shape=None, pads=None, strides=None):
        return (average_pool_grad(dy, x, auto_pad, int(count_include_pad or 0), dilations,
                                  kernel_shape, pads, strides).astype(dy.dtype),)


class GlobalAveragePoolGrad(_GradOp):
    def _run(self, dy, x):
        size = int(np.prod(x.shape[2:]))
        dx = np.broadcast_to(_f64(dy), x.shape) / size
        return (dx.astype(dy.dtype),)


# -------------------------------------------------------------------- indexing


def gather_grad(dy, shape, indices, axis=0):
    """np.add.at of dy into zeros(shape) along axis: repeated indices add up."""
    shape = [int(s) for s in np.asarray(shape).reshape(-1)]
    axis = _norm_axis(0 if axis is None else axis, len(shape))
    dim = shape[axis]
    idx = np.asarray(indices).astype(np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"GatherGrad: index out of range for dimension {dim}")
    idx = np.where(idx < 0, idx + dim, idx)
    dx = np.zeros(shape)
    k = idx.ndim
    moved = np.moveaxis(_f64(dy), list(range(axis, axis + k)), list(range(k)))
    np.add.at(np.moveaxis(dx, axis, 0), idx, moved)
    return dx


class GatherGrad(_GradOp):
    def _run(self, dy, shape, indices, axis=None):
        return (gather_grad(dy, shape, indices, axis).astype(dy.dtype),)


def slice_grad(dy, shape, starts, ends, axes=None, steps=None):
    """zeros(shape) with dy assigned through the Python slices of the forward Slice."""
    shape = [int(s) for s in np.asarray(shape).reshape(-1)]
    starts = [int(v) for v in np.asarray(starts).reshape(-1)]
    ends = [int(v) for v in np.asarray(ends).reshape(-1)]
    axes = (list(range(len(starts))) if axes is None
            else [_norm_axis(int(a), len(shape)) for a in np.asarray(axes).reshape(-1)])
    steps = [1] * len(starts) if steps is None else [int(v) for v in np.asarray(steps).reshape(-1)]
    index = [slice(None)] * len(shape)
    for a, b, e, st in zip(axes, starts, ends, steps):
        index[a] = slice(b, e, st)
    dx = np.zeros(shape)
    dx[tuple(index)] = _f64(dy)
    return dx


class SliceGrad(_GradOp):
    def _run(self, dy, shape, starts, ends, axes=None, steps=None):
        return (slice_grad(dy, shape, starts, ends, axes, steps).astype(dy.dtype),)


# ------------------------------------------------------------------- recurrent


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _lstm_attr_check(activations, clip, input_forget, layout):
    acts = [a.decode() if isinstance(a, bytes) else a for a in (activations or [])]
    for i, a in enumerate(acts):
        if a != ("Sigmoid" if i % 3 == 0 else "Tanh"):
            raise ValueError(f"LSTMGrad: activation {a} is not supported")
    if clip is not None:
        raise ValueError("LSTMGrad: clip is not supported")
    if int(input_forget or 0) != 0 or int(layout or 0) != 0:
        raise ValueError("LSTMGrad: input_forget and layout must be 0")


def lstm_grad(dy, dy_h, dy_c, x, w, r, b=None, sequence_lens=None, initial_h=None,
              initial_c=None, direction="forward"):
    """float64 backpropagation through time of ONNX LSTM (layout 0, gates i, o, f, c,
    sigmoid/tanh/tanh, no peepholes). Any of dy, dy_h, dy_c may be None. Returns
    (dX, dW, dR, dB, dinitial_h, dinitial_c); dB is [dirs, 8H] even without b."""
    x, w, r = _f64(x), _f64(w), _f64(r)
    seq, batch, _ = x.shape
    dirs, hid = w.shape[0], r.shape[2]
    lens = (np.full(batch, seq, np.int64) if sequence_lens is None
            else np.asarray(sequence_lens).astype(np.int64).reshape(batch))
    zeros_state = np.zeros((dirs, batch, hid))
    b = np.zeros((dirs, 8 * hid)) if b is None else _f64(b)
    h0 = zeros_state if initial_h is None else _f64(initial_h)
    c0 = zeros_state if initial_c is None else _f64(initial_c)
    dy = None if dy is None else _f64(dy)
    dy_h = zeros_state if dy_h is None else _f64(dy_h)
    dy_c = zeros_state if dy_c is None else _f64(dy_c)
    dx, dw, dr = np.zeros_like(x), np.zeros_like(w), np.zeros_like(r)
    db, dh0, dc0 = np.zeros((dirs, 8 * hid)), np.zeros_like(zeros_state), np.zeros_like(zeros_state)
    for d in range(dirs):
        backwards = direction == "reverse" or d == 1
        bias = b[d, :4 * hid] + b[d, 4 * hid:]
        for n in range(batch):
            length = int(lens[n])
            times = list(range(length))[::-1] if backwards else list(range(length))
            # Forward over the entry's steps, keeping what the backward needs.
            h, c = h0[d, n], c0[d, n]
            tape = []
            for t in times:
                z = w[d] @ x[t, n] + r[d] @ h + bias
                i, o, f = _sigmoid(z[:hid]), _sigmoid(z[hid:2 * hid]), _sigmoid(z[2 * hid:3 * hid])
                g = np.tanh(z[3 * hid:])
                c_new = f * c + i * g
                tape.append((t, h, c, i, o, f, g, c_new))
                h, c = o * np.tanh(c_new), c_new
            # Backward, last processed step first.
            dh, dc = dy_h[d, n].copy(), dy_c[d, n].copy()
            for t, h_prev, c_prev, i, o, f, g, c_new in reversed(tape):
                if dy is not None:
                    dh = dh + dy[t, d, n]
                tc = np.tanh(c_new)
                dc = dc + dh * o * (1.0 - tc ** 2)
                dz = np.concatenate([dc * g * i * (1.0 - i), dh * tc * o * (1.0 - o),
                                     dc * c_prev * f * (1.0 - f), dc * i * (1.0 - g ** 2)])
                dx[t, n] += w[d].T @ dz
                dw[d] += np.outer(dz, x[t, n])
                dr[d] += np.outer(dz, h_prev)
                db[d, :4 * hid] += dz
                db[d, 4 * hid:] += dz
                dh = r[d].T @ dz
                dc = dc * f
            dh0[d, n], dc0[d, n] = dh, dc
    return dx, dw, dr, db, dh0, dc0


class LSTMGrad(_GradOp):
    def _run(self, dy, dy_h, dy_c, x, w, r, b=None, sequence_lens=None, initial_h=None,
             initial_c=None, activation_alpha=None, activation_beta=None, activations=None,
             clip=None, direction=None, hidden_size=None, input_forget=None, layout=None):
        _lstm_attr_check(activations, clip, input_forget, layout)
        direction = direction or "forward"
        direction = direction.decode() if isinstance(direction, bytes) else direction
        res = lstm_grad(dy, dy_h, dy_c, x, w, r, b, sequence_lens, initial_h, initial_c,
                        direction)
        return tuple(v.astype(x.dtype) for v in res[:len(self.onnx_node.output)])


def _gru_attr_check(activations, clip, layout):
    acts = [a.decode() if isinstance(a, bytes) else a for a in (activations or [])]
    for i, a in enumerate(acts):
        if a != ("Sigmoid" if i % 2 == 0 else "Tanh"):
            raise ValueError(f"GRUGrad: activation {a} is not supported")
    if clip is not None:
        raise ValueError("GRUGrad: clip is not supported")
    if int(layout or 0) != 0:
        raise ValueError("GRUGrad: layout must be 0")


def gru_grad(dy, dy_h, x, w, r, b=None, sequence_lens=None, initial_h=None,
             direction="forward", linear_before_reset=0):
    """float64 backpropagation through time of ONNX GRU (layout 0, gates z, r, h,
    sigmoid/tanh). dy and dy_h may be None. Returns (dX, dW, dR, dB, dinitial_h); dB is
    [dirs, 6H] even without b."""
    x, w, r = _f64(x), _f64(w), _f64(r)
    seq, batch, _ = x.shape
    dirs, hid = w.shape[0], r.shape[2]
    lens = (np.full(batch, seq, np.int64) if sequence_lens is None
            else np.asarray(sequence_lens).astype(np.int64).reshape(batch))
    zeros_state = np.zeros((dirs, batch, hid))
    b = np.zeros((dirs, 6 * hid)) if b is None else _f64(b)
    h0 = zeros_state if initial_h is None else _f64(initial_h)
    dy = None if dy is None else _f64(dy)
    dy_h = zeros_state if dy_h is None else _f64(dy_h)
    dx, dw, dr = np.zeros_like(x), np.zeros_like(w), np.zeros_like(r)
    db, dh0 = np.zeros((dirs, 6 * hid)), np.zeros_like(zeros_state)
    zr, hb = slice(0, 2 * hid), slice(2 * hid, 3 * hid)
    for d in range(dirs):
        backwards = direction == "reverse" or d == 1
        wb, rb = b[d, :3 * hid], b[d, 3 * hid:]
        for n in range(batch):
            length = int(lens[n])
            times = list(range(length))[::-1] if backwards else list(range(length))
            h = h0[d, n]
            tape = []
            for t in times:
                gzr = _sigmoid(w[d, zr] @ x[t, n] + r[d, zr] @ h + wb[zr] + rb[zr])
                z, rg = gzr[:hid], gzr[hid:]
                if linear_before_reset:
                    q = r[d, hb] @ h + rb[hb]
                    ht = np.tanh(w[d, hb] @ x[t, n] + wb[hb] + rg * q)
                else:
                    q = None
                    ht = np.tanh(w[d, hb] @ x[t, n] + wb[hb] + r[d, hb] @ (rg * h) + rb[hb])
                tape.append((t, h, z, rg, ht, q))
                h = (1.0 - z) * ht + z * h
            dh = dy_h[d, n].copy()
            for t, h_prev, z, rg, ht, q in reversed(tape):
                if dy is not None:
                    dh = dh + dy[t, d, n]
                da = dh * (1.0 - z) * (1.0 - ht ** 2)
                dz = dh * (h_prev - ht) * z * (1.0 - z)
                dh_prev = dh * z
                dx[t, n] += w[d, hb].T @ da
                dw[d, hb] += np.outer(da, x[t, n])
                db[d, hb] += da
                if linear_before_reset:
                    dq = da * rg
                    drg = da * q
                    dr[d, hb] += np.outer(dq, h_prev)
                    db[d, 3 * hid + 2 * hid:] += dq
                    dh_prev = dh_prev + r[d, hb].T @ dq
                else:
                    drh = r[d, hb].T @ da
                    dr[d, hb] += np.outer(da, rg * h_prev)
                    db[d, 3 * hid + 2 * hid:] += da
                    drg = drh * h_prev
                    dh_prev = dh_prev + drh * rg
                dzr = np.concatenate([dz, drg * rg * (1.0 - rg)])
                dx[t, n] += w[d, zr].T @ dzr
                dw[d, zr] += np.outer(dzr, x[t, n])
                dr[d, zr] += np.outer(dzr, h_prev)
                db[d, zr] += dzr
                db[d, 3 * hid:5 * hid] += dzr
                dh = dh_prev + r[d, zr].T @ dzr
            dh0[d, n] = dh
    return dx, dw, dr, db, dh0


class GRUGrad(_GradOp):
    def _run(self, dy, dy_h, x, w, r, b=None, sequence_lens=None, initial_h=None,
             activation_alpha=None, activation_beta=None, activations=None, clip=None,
             direction=None, hidden_size=None, layout=None, linear_before_reset=None):
        _gru_attr_check(activations, clip, layout)
        direction = direction or "forward"
        direction = direction.decode() if isinstance(direction, bytes) else direction
        res = gru_grad(dy, dy_h, x, w, r, b, sequence_lens, initial_h, direction,
                       int(linear_before_reset or 0))
        return tuple(v.astype(x.dtype) for v in res[:len(self.onnx_node.output)])


# ---------------------------------------------------------------------- losses


def _reduction(r):
    r = r or "mean"
    return r.decode() if isinstance(r, bytes) else r


def sce_loss_grad(dloss, log_prob, labels, reduction="mean", ignore_index=None):
    lp = _f64(log_prob)
    labels = np.asarray(labels).astype(np.int64)
    c = lp.shape[1]
    keep = np.ones(labels.shape, dtype=bool)
    if ignore_index is not None:
        keep = labels != int(ignore_index)
    safe = np.where(keep, labels, 0)
    onehot = np.moveaxis(np.eye(c)[safe], -1, 1)
    grad = (np.exp(lp) - onehot) * np.expand_dims(keep, 1)
    d = _f64(dloss)
    if reduction == "none":
        grad = grad * np.expand_dims(d, 1)
    else:
        grad = grad * d.reshape(())
        if reduction == "mean":
            count = int(keep.sum())
            grad = grad / count if count else np.zeros_like(grad)
    return grad


class SoftmaxCrossEntropyLossGrad(_GradOp):
    def _run(self, dloss, log_prob, labels, reduction=None, ignore_index=None):
        return (sce_loss_grad(dloss, log_prob, labels, _reduction(reduction),
                              ignore_index).astype(log_prob.dtype),)


class MSELossGrad(_GradOp):
    def _run(self, dloss, pred, target, reduction=None):
        r = _reduction(reduction)
        diff = 2.0 * (_f64(pred) - _f64(target))
        d = _f64(dloss)
        if r == "none":
            g = d * diff
        else:
            g = d.reshape(()) * diff
            if r == "mean":
                g = g / diff.size
        return (g.astype(pred.dtype),)


# ------------------------------------------------------------ optimizer steps
# SGDStep, MomentumStep, AdamStep: param, grad, states, scalars, then the
# optional weight_decay and skip inputs; the new param and states out.


def _skipped(skip):
    return skip is not None and bool(np.asarray(skip).reshape(-1)[0])


def optimizer_step(kind, param, grad, states, scalars, weight_decay=None):
    """One step in float64: the new param and states (docs/training.md)."""
    p, g = _f64(param), _f64(grad)
    if weight_decay is not None:
        g = g + _f64(weight_decay).reshape(()) * p
    sc = [_f64(s).reshape(()) for s in scalars]
    lr = sc[0]
    if kind == "sgd":
        return [p - lr * g]
    if kind == "momentum":
        v = sc[1] * _f64(states[0]) + g
        return [p - lr * v, v]
    b1, b2, omb1, omb2, eps, bc1, bc2 = sc[1:]
    m = b1 * _f64(states[0]) + omb1 * g
    v = b2 * _f64(states[1]) + omb2 * g * g
    return [p - lr * (m / bc1) / (np.sqrt(v / bc2) + eps), m, v]


def weight_copy(param, copy_to):
    """The optional param_copy output: the new float32 param rounded to nearest even to
    float16 (copy_to 10) or bfloat16 (copy_to 16, as ml_dtypes rounds)."""
    if int(copy_to) == 16:
        import ml_dtypes
        return np.asarray(param, np.float32).astype(ml_dtypes.bfloat16)
    return np.asarray(param, np.float32).astype(np.float16)


def _step_op(kind, n_states, n_scalars):
    def _run(self, param, grad, *rest, copy_to=None):
        rest = list(rest) + [None] * (n_states + n_scalars + 2 - len(rest))
        states = rest[:n_states]
        scalars = rest[n_states:n_states + n_scalars]
        decay, skip = rest[n_states + n_scalars:]
        if _skipped(skip):
            out = [np.array(t, copy=True) for t in [param] + states]
        else:
            out = [o.astype(param.dtype)
                   for o in optimizer_step(kind, param, grad, states, scalars, decay)]
        if copy_to is not None:
            out.append(weight_copy(out[0], copy_to))
        return tuple(out)
    return _run


class SGDStep(_GradOp):
    _run = _step_op("sgd", 0, 1)


class MomentumStep(_GradOp):
    _run = _step_op("momentum", 1, 2)


class AdamStep(_GradOp):
    _run = _step_op("adam", 2, 8)


class MultiTensorUnscale(_GradOp):
    """inv_scale, g_1..g_N -> found_inf, flags[N], u_1..u_N (docs/training.md, "Loss
    scaling"): u = float32(float64(g) * inv_scale), one rounding as a float32 multiply."""
    def _run(self, inv_scale, *grads):
        inv = _f64(inv_scale).reshape(())
        with np.errstate(over="ignore", invalid="ignore"):
            us = [(_f64(g) * inv).astype(np.float32) for g in grads]
        flags = np.array([np.nan if not np.all(np.isfinite(u)) else 0.0 for u in us],
                         np.float32)
        return (np.array(bool(np.isnan(flags).any())), flags, *us)


class FusedMatMul(OpRun):
    """com.microsoft FusedMatMul as train-graph writes it (a MatMul with the last two axes of
    A and/or B read transposed, times alpha), in float64: onnx.reference has no contrib ops."""
    op_domain = "com.microsoft"

    def _run(self, a, b, alpha=None, transA=None, transB=None, transBatchA=None,
             transBatchB=None):
        if transBatchA or transBatchB:
            # Outside this oracle's contract: train-graph never writes them, so a graph
            # that has them is not one this reference is meant to check.
            raise ValueError("FusedMatMul: transBatchA/transBatchB are not written by "
                             "train-graph; this reference does not evaluate them")
        x, y = _f64(a), _f64(b)
        if transA:
            x = np.swapaxes(x, -1, -2)
        if transB:
            y = np.swapaxes(y, -1, -2)
        out = np.matmul(x, y) * (1.0 if alpha is None else float(alpha))
        return (out.astype(np.asarray(a).dtype),)


OPS = [BiasGrad, ReluGrad, SigmoidGrad, TanhGrad, ErfGrad, GeluGrad, SoftmaxGrad,
       LogSoftmaxGrad, LayerNormalizationGrad, BatchNormalizationGrad, ConvGrad, MaxPoolGrad,
       AveragePoolGrad, GlobalAveragePoolGrad, LSTMGrad, GRUGrad, SoftmaxCrossEntropyLossGrad,
       MSELossGrad, GatherGrad, SliceGrad, SGDStep, MomentumStep, AdamStep,
       MultiTensorUnscale, FusedMatMul]
