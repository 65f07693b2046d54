//===- LstmKernel.cpp - ONNX LSTM on the CPU ---------------------------------===//
//
// The cell loop over the colleague's gemm and element-wise helpers. State and
// gate math is in fp64 for double storage and fp32 otherwise: 16-bit inputs
// are widened once and the outputs narrowed once (fp32 accumulation). Scratch
// vectors are heap-allocated inside the kernel, outside the planned arena.
//
//   per direction:  XW = X[seq*batch, in] * W^T        (one gemm)
//   per step t:     G  = XW[t] + H * R^T + Wb + Rb     (one gemm, beta = 1)
//                   h, c = lstmCell(G, P, c) per element (RecurrentBodies.h,
//                   the body the CUDA launcher runs too)
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

template <typename A> std::vector<A> cpuk::widenInput(const KernelCall &c, unsigned i) {
  std::vector<A> v;
  if (!c.hasInput(i))
    return v;
  v.resize(c.inputs[i].numElements());
  dispatchFloat(c.inputs[i].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::castArray<T, A>(c.inputs[i].as<T>(), v.data(), v.size());
  });
  return v;
}

template <typename A> void cpuk::narrowFrom(const TensorRef &out, const std::vector<A> &v) {
  if (!out.data)
    return;
  dispatchFloat(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::castArray<A, T>(v.data(), out.as<T>(), v.size());
  });
}

template std::vector<float> cpuk::widenInput<float>(const KernelCall &, unsigned);
template std::vector<double> cpuk::widenInput<double>(const KernelCall &, unsigned);
template void cpuk::narrowFrom<float>(const TensorRef &, const std::vector<float> &);
template void cpuk::narrowFrom<double>(const TensorRef &, const std::vector<double> &);

/// The cell loop in the compute type A: double for double storage, float
/// otherwise.
template <typename A> static void lstmIn(const KernelCall &c) {
  const RecurrentParams &params = paramsOf<RecurrentParams>(c);
  int64_t seq = c.inputs[0].shape[0], batch = c.inputs[0].shape[1];
  int64_t in = c.inputs[0].shape[2];
  int64_t dirs = params.numDirections(), hid = c.inputs[2].shape[2];
  bool reverse = params.reverse();
  std::vector<A> x = widenInput<A>(c, 0), w = widenInput<A>(c, 1), r = widenInput<A>(c, 2),
                 b = widenInput<A>(c, 3), h0 = widenInput<A>(c, 5), c0 = widenInput<A>(c, 6),
                 p = widenInput<A>(c, 7);
  int64_t g4 = 4 * hid;
  std::vector<A> y(seq * dirs * batch * hid), yh(dirs * batch * hid), yc(dirs * batch * hid);
  std::vector<A> xw(seq * batch * g4), gates(batch * g4), h(batch * hid), cell(batch * hid);
  for (int64_t d = 0; d < dirs; ++d) {
    cpu::gemm<A, A>(false, true, seq * batch, g4, in, A(1), x.data(), in,
                    w.data() + d * g4 * in, in, A(0), xw.data(), g4);
    if (!b.empty())
      for (int64_t row = 0; row < seq * batch; ++row)
        for (int64_t j = 0; j < g4; ++j)
          xw[row * g4 + j] += b[d * 2 * g4 + j] + b[d * 2 * g4 + g4 + j];
    for (int64_t i = 0; i < batch * hid; ++i) {
      h[i] = h0.empty() ? A(0) : h0[d * batch * hid + i];
      cell[i] = c0.empty() ? A(0) : c0[d * batch * hid + i];
    }
    const A *pd = p.empty() ? nullptr : p.data() + d * 3 * hid;
    for (int64_t step = 0; step < seq; ++step) {
      int64_t t = (reverse || d == 1) ? seq - 1 - step : step;
      std::copy_n(xw.data() + t * batch * g4, batch * g4, gates.data());
      cpu::gemm<A, A>(false, true, batch, g4, hid, A(1), h.data(), hid,
                      r.data() + d * g4 * hid, hid, A(1), gates.data(), g4);
      for (int64_t bi = 0; bi < batch; ++bi) {
        const A *gi = gates.data() + bi * g4, *go = gi + hid, *gf = gi + 2 * hid,
                *gc = gi + 3 * hid;
        A *cp = cell.data() + bi * hid, *hp = h.data() + bi * hid;
        for (int64_t j = 0; j < hid; ++j)
          hp[j] = k::lstmCell(gi[j], go[j], gf[j], gc[j], pd != nullptr, pd ? pd[j] : A(0),
                              pd ? pd[hid + j] : A(0), pd ? pd[2 * hid + j] : A(0), cp[j]);
      }
      for (int64_t bi = 0; bi < batch; ++bi)
        std::copy_n(h.data() + bi * hid, hid, y.data() + ((t * dirs + d) * batch + bi) * hid);
    }
    std::copy(h.begin(), h.end(), yh.begin() + d * batch * hid);
    std::copy(cell.begin(), cell.end(), yc.begin() + d * batch * hid);
  }
  if (c.outputs.size() > 0)
    narrowFrom(c.outputs[0], y);
  if (c.outputs.size() > 1)
    narrowFrom(c.outputs[1], yh);
  if (c.outputs.size() > 2)
    narrowFrom(c.outputs[2], yc);
}

llvm::Error cpuk::runLSTM(const KernelCall &c) {
  if (c.inputs[0].dtype == DType::F64)
    lstmIn<double>(c);
  else
    lstmIn<float>(c);
  return llvm::Error::success();
}
