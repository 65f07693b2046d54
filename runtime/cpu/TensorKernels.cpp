//===- TensorKernels.cpp - CPU glue for fill, N-ary and layout ops ----------===//
//
// ConstantOfShape, Dropout (inference), Sum, Mean, LRN, Pad, Split, Tile,
// DepthToSpace, SpaceToDepth, Trilu and Range. Data movement works on every
// dtype by element size; arithmetic widens 16-bit floats to float and rounds
// each result once.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/IndexParams.h"
#include "mpc/Runtime/Kernels/ImageBodies.h"
#include "mpc/Runtime/Kernels/IndexBodies.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cmath>
#include <cstring>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

static size_t elemSize(DType t) { return runtimeElementSize(t); }

static std::vector<int64_t> rowStrides(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

/// Advances a row-major multi-index over `shape`; false after the last one.
static bool nextIndex(std::vector<int64_t> &idx, llvm::ArrayRef<int64_t> shape) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < shape[d])
      return true;
    idx[d] = 0;
  }
  return false;
}

/// Element offsets of `in` for every element of its broadcast to `out`.
static std::vector<int64_t> broadcastOffsets(llvm::ArrayRef<int64_t> in,
                                             llvm::ArrayRef<int64_t> out) {
  int64_t n = k::numElements(out);
  std::vector<int64_t> offs(n);
  if (in == out) {
    for (int64_t i = 0; i < n; ++i)
      offs[i] = i;
    return offs;
  }
  size_t rank = out.size(), lead = rank - in.size();
  std::vector<int64_t> inStride = rowStrides(in), stride(rank, 0);
  for (size_t d = 0; d < in.size(); ++d)
    stride[lead + d] = in[d] == 1 ? 0 : inStride[d];
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    offs[i] = off;
    for (size_t d = rank; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < out[d])
        break;
      off -= stride[d] * out[d];
      idx[d] = 0;
    }
  }
  return offs;
}

//===----------------------------------------------------------------------===//
// ConstantOfShape
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runConstantOfShape(const KernelCall &c) {
  const FillParams &v = paramsOf<FillParams>(c);
  const TensorRef &y = c.outputs[0];
  size_t es = v.bytes.size();
  char *dst = y.as<char>();
  for (int64_t i = 0, n = y.numElements(); i < n; ++i)
    std::memcpy(dst + i * es, v.bytes.data(), es);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Dropout: inference is the identity; training mode is random, so refused
// unless its ratio is 0.
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runDropout(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  if (x.data != c.outputs[0].data)
    std::memcpy(c.outputs[0].data, x.data, x.numElements() * elemSize(x.dtype));
  if (c.outputs.size() > 1 && c.outputs[1].data) {
    const TensorRef &m = c.outputs[1];
    dispatchAll(m.dtype, [&](auto tag) {
      using T = decltype(tag);
      T one = k::castValue<T>(true);
      std::fill(m.as<T>(), m.as<T>() + m.numElements(), one);
    });
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Sum, Mean: N-ary broadcasting, accumulated in the compute type left to
// right (as numpy does), rounded once.
//===----------------------------------------------------------------------===//

static llvm::Error runSumOrMean(const KernelCall &c, bool mean) {
  const TensorRef &y = c.outputs[0];
  int64_t n = y.numElements();
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorRef &x : c.inputs)
    shapes.emplace_back(x.shape.begin(), x.shape.end());
  // The NaryPlan bodies the CUDA launcher runs: one plan for up to
  // kMaxNaryInputs operands, else runs of them added to a C accumulator.
  std::vector<k::NaryPlan> runs;
  if (k::naryRuns(shapes, y.shape, runs)) {
    dispatchFloat(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      using C = k::ComputeType<T>;
      T *out = y.as<T>();
      std::vector<C> acc(runs.size() > 1 ? size_t(n) : 0);
      size_t first = 0;
      for (size_t r = 0; r < runs.size(); ++r) {
        const T *in[k::kMaxNaryInputs] = {};
        for (int i = 0; i < runs[r].inputs; ++i)
          in[i] = c.inputs[first + size_t(i)].as<T>();
        first += size_t(runs[r].inputs);
        const C *before = r == 0 ? nullptr : acc.data();
        bool last = r + 1 == runs.size();
        for (int64_t e = 0; e < n; ++e) {
          C sum = k::naryContinue(runs[r], in, e, before);
          if (!last)
            acc[size_t(e)] = sum;
          else
            out[e] = k::store<T>(mean ? C(sum / C(c.inputs.size())) : sum);
        }
      }
    });
    return llvm::Error::success();
  }
  dispatchFloat(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    std::vector<C> acc(n, C(0));
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const T *x = c.inputs[i].as<T>();
      std::vector<int64_t> offs = broadcastOffsets(c.inputs[i].shape, y.shape);
      for (int64_t e = 0; e < n; ++e)
        acc[e] = i == 0 ? k::load(x[offs[e]]) : C(acc[e] + k::load(x[offs[e]]));
    }
    C count = C(c.inputs.size());
    for (int64_t e = 0; e < n; ++e)
      y.as<T>()[e] = k::store<T>(mean ? C(acc[e] / count) : acc[e]);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runSum(const KernelCall &c) { return runSumOrMean(c, false); }
llvm::Error cpuk::runMean(const KernelCall &c) { return runSumOrMean(c, true); }

//===----------------------------------------------------------------------===//
// LRN: y = x / (bias + alpha / size * sum of squares over nearby channels)^beta
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runLRN(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  const LRNParams &p = paramsOf<LRNParams>(c);
  int64_t size = p.size;
  double alpha = p.alpha, beta = p.beta, bias = p.bias;
  int64_t batch = x.shape[0], ch = x.shape[1];
  int64_t inner = x.numElements() / std::max<int64_t>(batch * ch, 1);
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = k::ComputeType<T>;
    const T *in = x.as<T>();
    T *out = c.outputs[0].as<T>();
    std::vector<C> sq(ch * inner);
    for (int64_t b = 0; b < batch; ++b) {
      const T *xb = in + b * ch * inner;
      for (int64_t i = 0; i < ch * inner; ++i) {
        C v = k::load(xb[i]);
        sq[i] = v * v;
      }
      for (int64_t ci = 0; ci < ch; ++ci) {
        int64_t c0, c1;
        k::lrnWindow(ci, ch, size, &c0, &c1);
        for (int64_t s = 0; s < inner; ++s) {
          C sum = 0;
          for (int64_t cc = c0; cc <= c1; ++cc)
            sum += sq[cc * inner + s];
          C v = k::lrnValue<C>(k::load(xb[ci * inner + s]), sum, C(bias), C(alpha), C(size),
                               C(beta));
          out[(b * ch + ci) * inner + s] = k::store<T>(v);
        }
      }
    }
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

static_assert(int(PadMode::Constant) == k::kPadConstant && int(PadMode::Reflect) == k::kPadReflect &&
                  int(PadMode::Edge) == k::kPadEdge && int(PadMode::Wrap) == k::kPadWrap,
              "ImageBodies.h's Pad codes follow PadMode");

llvm::Error cpuk::runPad(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  const Node &n = *c.node;
  const PadParams &params = paramsOf<PadParams>(c);
  std::vector<int64_t> pads, axes, begin, end;
  if (n.opsetVersion() < 11) {
    pads = params.pads;
  } else {
    pads = readInts(c.inputs[1]);
    if (c.hasInput(3))
      axes = readInts(c.inputs[3]);
  }
  PadMode mode = PadMode::Constant;
  auto m = padMode(n, params.mode);
  if (!m)
    return m.takeError();
  mode = *m;
  if (auto e = padAmounts(n, x.shape, pads, axes, begin, end))
    return e;
  size_t es = elemSize(x.dtype), rank = x.shape.size();
  // The pad value in the element type.
  std::vector<char> value(es, 0);
  if (n.opsetVersion() < 11) {
    double v = params.value;
    dispatchAll(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      T t = k::castValue<T>(v);
      std::memcpy(value.data(), &t, es);
    });
  } else if (c.hasInput(2) && c.inputs[2].numElements() > 0) {
    std::memcpy(value.data(), c.inputs[2].data, es);
  }
  const char *src = x.as<const char>();
  char *dst = y.as<char>();
  int64_t total = y.numElements();
  if (mode == PadMode::Constant) {
    // The value everywhere, then the input's part (the CUDA launchers' plan).
    kernels::CopyPlan plan;
    if (!k::padInteriorPlan(x.shape, y.shape, begin, plan))
      return nodeError(n, "cannot pad " + formatShape(x.shape) +
                              ": too many dimensions after merging");
    for (int64_t o = 0; o < total; ++o)
      std::memcpy(dst + o * es, value.data(), es);
    k::copyByPlan(plan, src, dst, es);
    return llvm::Error::success();
  }
  std::vector<int64_t> inStride = rowStrides(x.shape), idx(rank, 0);
  std::vector<int64_t> lo(rank), kept(rank), shift(rank);
  for (size_t d = 0; d < rank; ++d)
    k::padKeptAxis(x.shape[d], begin[d], end[d], &lo[d], &kept[d], &shift[d]);
  for (int64_t o = 0; o < total; ++o) {
    int64_t off = 0;
    bool constant = false;
    for (size_t d = 0; d < rank && !constant; ++d) {
      int64_t s = k::padSource(idx[d] - shift[d], kept[d], int32_t(mode));
      if (s < 0)
        constant = true;
      else
        off += (lo[d] + s) * inStride[d];
    }
    std::memcpy(dst + o * es, constant ? value.data() : src + off * es, es);
    nextIndex(idx, y.shape);
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Split
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runSplit(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, x.shape.size());
  int64_t pos = 0;
  for (const TensorRef &y : c.outputs) {
    kernels::CopyPlan plan;
    if (y.data) {
      if (!k::concatPlan(y.shape, x.shape, axis, pos, plan))
        return nodeError(*c.node, "cannot split " + formatShape(x.shape) +
                                      ": too many dimensions after merging");
      k::swapCopySides(plan); // Concat's plan read backwards
      k::copyByPlan(plan, x.data, y.data, elemSize(x.dtype));
    }
    pos += y.shape[axis];
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Tile
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runTile(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  kernels::CopyPlan plan;
  if (!k::tilePlan(x.shape, y.shape, plan))
    return nodeError(*c.node, "cannot tile " + formatShape(x.shape) +
                                  ": too many dimensions after merging");
  k::copyByPlan(plan, x.data, y.data, elemSize(x.dtype));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// DepthToSpace, SpaceToDepth
//===----------------------------------------------------------------------===//

/// Walks the space-side tensor [N, C, H*b, W*b] and copies each element
/// to or from its depth-side position [N, C*b*b, H, W] (blockDepthOffset,
/// the body the CUDA launcher runs).
static llvm::Error moveBlocks(const KernelCall &c, bool toSpace) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  const TensorRef &space = toSpace ? y : x;
  const BlockParams &p = paramsOf<BlockParams>(c);
  k::BlockMovePlan plan;
  if (!k::makeBlockMovePlan(space.shape.data(), int(space.shape.size()), p.blocksize,
                            toSpace && p.crd, plan))
    return nodeError(*c.node, "cannot move blocks of " + std::to_string(p.blocksize) +
                                  " in " + formatShape(space.shape));
  size_t es = elemSize(x.dtype);
  const char *src = x.as<const char>();
  char *dst = y.as<char>();
  for (int64_t e = 0; e < plan.count; ++e) {
    int64_t d = k::blockDepthOffset(plan, e);
    if (toSpace)
      std::memcpy(dst + e * es, src + d * es, es);
    else
      std::memcpy(dst + d * es, src + e * es, es);
  }
  return llvm::Error::success();
}

llvm::Error cpuk::runDepthToSpace(const KernelCall &c) { return moveBlocks(c, true); }
llvm::Error cpuk::runSpaceToDepth(const KernelCall &c) { return moveBlocks(c, false); }
//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runTrilu(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  int64_t kd = c.hasInput(1) ? readInts(c.inputs[1]).at(0) : 0;
  bool upper = paramsOf<AxisParams>(c).flagA;
  size_t rank = x.shape.size(), es = elemSize(x.dtype);
  int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
  int64_t mats = x.numElements() / std::max<int64_t>(rows * cols, 1);
  const char *src = x.as<const char>();
  char *dst = y.as<char>();
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        int64_t o = (m * rows + i) * cols + j;
        if (k::triluKeeps(i, j, kd, upper))
          std::memcpy(dst + o * es, src + o * es, es);
        else
          std::memset(dst + o * es, 0, es);
      }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Range
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runRangeOp(const KernelCall &c) {
  const TensorRef &y = c.outputs[0];
  dispatchSigned(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    T start = *c.inputs[0].as<T>(), delta = *c.inputs[2].as<T>();
    for (int64_t i = 0, n = y.numElements(); i < n; ++i)
      y.as<T>()[i] = k::rangeValue(start, delta, i);
  });
  return llvm::Error::success();
}
