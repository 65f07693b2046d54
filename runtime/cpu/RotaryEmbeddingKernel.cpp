//===- RotaryEmbeddingKernel.cpp - ONNX RotaryEmbedding on the CPU ---------===//
//
// RotaryEmbedding (opset 23) rotates the first rotary_embedding_dim elements
// of every head vector by position-dependent angles: pairs (x1, x2) become
// (cos*x1 - sin*x2, sin*x1 + cos*x2), the pairs being the two halves of the
// rotated part or, with interleaved=1, adjacent elements. The input is
// [batch, heads, seq, head_size] or [batch, seq, heads * head_size] (then
// num_heads says how to split it); the caches are [batch, seq, dim/2], or
// [max_position, dim/2] indexed by position_ids [batch, seq]. Each output is
// computed in the compute type (fp32 for 16-bit storage) and rounded once, by
// the slot body of Kernels/RotaryBodies.h (the CUDA launcher's too).
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Kernels/RotaryBodies.h"
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
  const k::RotaryShape r = rotaryShapeOf(*lay);
  int64_t maxPos = positions ? c.inputs[1].shape[0] : 0;
  std::vector<int64_t> pos;
  if (positions) {
    // A position past the caches is an index error against cos_cache's
    // rows (input 1), as the CUDA launcher records it.
    pos = readInts(c.inputs[3]);
    for (int64_t v : pos)
      if (v < 0 || v >= maxPos) {
        recordKernelError(c, KernelErrorCode::IndexOutOfRange, /*operand=*/1, v);
        return llvm::Error::success();
      }
  }
  int64_t half = r.dim / 2, slots = k::rotarySlots(r);
  dispatchFloat(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = c.inputs[0].as<T>(), *cosC = c.inputs[1].as<T>(), *sinC = c.inputs[2].as<T>();
    T *y = c.outputs[0].as<T>();
    for (int64_t b = 0; b < r.batch; ++b)
      for (int64_t s = 0; s < r.seq; ++s) {
        int64_t row = positions ? pos[static_cast<size_t>(b * r.seq + s)] : b * r.seq + s;
        const T *cs = cosC + row * half, *sn = sinC + row * half;
        for (int64_t h = 0; h < r.heads; ++h) {
          int64_t off = k::rotaryHeadOffset(r, b, s, h);
          for (int64_t i = 0; i < slots; ++i)
            k::rotarySlot(r, x + off, y + off, cs, sn, i);
        }
      }
  });
  return llvm::Error::success();
}
