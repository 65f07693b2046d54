//===- RotaryEmbeddingKernel.cpp - ONNX RotaryEmbedding on the CPU ---------===//
//
// RotaryEmbedding (opset 23) rotates the first rotary_embedding_dim elements
// of every head vector by position-dependent angles: pairs (x1, x2) become
// (cos*x1 - sin*x2, sin*x1 + cos*x2), the pairs being the two halves of the
// rotated part or, with interleaved=1, adjacent elements. The input is
// [batch, heads, seq, head_size] or [batch, seq, heads * head_size] (then
// num_heads says how to split it); the caches are [batch, seq, dim/2], or
// [max_position, dim/2] indexed by position_ids [batch, seq]. Each output is
// computed in the compute type (fp32 for 16-bit storage) and rounded once.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Kernels/Storage.h"

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

llvm::Error cpuk::runRotaryEmbedding(const KernelCall &c) {
  bool positions = c.hasInput(3);
  llvm::Expected<Rotary> lay = rotaryLayout(*c.node, paramsOf<RotaryParams>(c),
                                            c.inputs[0].shape, c.inputs[1].shape, positions);
  if (!lay)
    return lay.takeError();
  const Rotary r = *lay;
  int64_t maxPos = positions ? c.inputs[1].shape[0] : 0;
  std::vector<int64_t> pos;
  if (positions) {
    const TensorRef &p = c.inputs[3];
    pos.resize(static_cast<size_t>(p.numElements()));
    for (size_t i = 0; i < pos.size(); ++i) {
      pos[i] = p.dtype == DType::I32 ? p.as<int32_t>()[i] : p.as<int64_t>()[i];
      if (pos[i] < 0 || pos[i] >= maxPos)
        return nodeError(*c.node, "position_ids value " + std::to_string(pos[i]) +
                                      " is outside the caches' " + std::to_string(maxPos) +
                                      " positions");
    }
  }
  int64_t half = r.dim / 2;
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    const T *x = c.inputs[0].as<T>(), *cosC = c.inputs[1].as<T>(), *sinC = c.inputs[2].as<T>();
    T *y = c.outputs[0].as<T>();
    for (int64_t b = 0; b < r.batch; ++b)
      for (int64_t s = 0; s < r.seq; ++s) {
        int64_t row = positions ? pos[static_cast<size_t>(b * r.seq + s)] : b * r.seq + s;
        const T *cs = cosC + row * half, *sn = sinC + row * half;
        for (int64_t h = 0; h < r.heads; ++h) {
          int64_t off = r.fourD ? ((b * r.heads + h) * r.seq + s) * r.headSize
                                : (b * r.seq + s) * r.heads * r.headSize + h * r.headSize;
          const T *in = x + off;
          T *out = y + off;
          for (int64_t i = 0; i < half; ++i) {
            int64_t i1 = r.interleaved ? 2 * i : i, i2 = r.interleaved ? 2 * i + 1 : i + half;
            C x1 = C(k::load(in[i1])), x2 = C(k::load(in[i2]));
            C co = C(k::load(cs[i])), si = C(k::load(sn[i]));
            out[i1] = k::store<T>(C(co * x1 - si * x2));
            out[i2] = k::store<T>(C(si * x1 + co * x2));
          }
          for (int64_t i = r.dim; i < r.headSize; ++i)
            out[i] = in[i];
        }
      }
  });
  return llvm::Error::success();
}
