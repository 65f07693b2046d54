//===- LinalgKernels.cpp - CPU glue for GEMM, conv, pooling, norms ----------===//
//
// Shape functions and run functions for the compute-heavy ops. Every matrix
// product goes through the colleague's cpu::gemm/matmul/conv (OpenBLAS);
// 16-bit storage computes in fp32 inside those kernels.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "../ops/ShapeHelpers.h"
#include "mpc/Runtime/OpParams.h"
#include <cstring>
#include "Scratch.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Runtime/Cpu/Conv.h"
#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/Cpu/Gemm.h"
#include "mpc/Runtime/Cpu/Normalization.h"
#include "mpc/Runtime/Cpu/Pool.h"
#include "mpc/Runtime/Cpu/Reduce.h"
#include "mpc/Runtime/Cpu/Softmax.h"
#include "mpc/Runtime/Cpu/TrainingOps.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>
#include <type_traits>
#include <vector>

using namespace mpc;
using namespace mpc::cpuk;

//===----------------------------------------------------------------------===//
// Gemm / MatMul
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runGemm(const KernelCall &c) {
  const TensorRef &a = c.inputs[0], &b = c.inputs[1], &y = c.outputs[0];
  const GemmParams &p = paramsOf<GemmParams>(c);
  bool ta = p.transA, tb = p.transB;
  float alpha = p.alpha, beta = p.beta;
  int64_t m = y.shape[0], n = y.shape[1], k = ta ? a.shape[0] : a.shape[1];
  int64_t rs = 0, cs = 0;
  if (c.hasInput(2)) {
    // Bias strides for a [m,n], [n], [1,n], [m,1] or scalar C.
    const auto &cshape = c.inputs[2].shape;
    int64_t cm = cshape.size() == 2 ? cshape[0] : 1;
    int64_t cn = cshape.empty() ? 1 : cshape.back();
    rs = cm == 1 ? 0 : cn;
    cs = cn == 1 ? 0 : 1;
  } else {
    beta = 0;
  }
  dispatchFloat(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::gemmWithBias<T>(ta, tb, m, n, k, alpha, a.as<T>(), a.shape[1], b.as<T>(),
                         b.shape[1], beta, c.hasInput(2) ? c.inputs[2].as<T>() : nullptr,
                         rs, cs, y.as<T>(), n);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runMatMul(const KernelCall &c) {
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::matmul<T>(c.inputs[0].as<T>(), c.inputs[0].shape, c.inputs[1].as<T>(),
                   c.inputs[1].shape, c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// GemmBiasAct (mpc/Ops/GemmBiasAct.h)
//===----------------------------------------------------------------------===//

namespace {
/// One GemmBiasAct call's matrix view: Y [M, N] = op(A) [M, K] @ op(B) [K, N],
/// A's batch folded into M (B is 2-D and a batched A is never transposed).
struct GemmView {
  GemmBiasActAttrs at;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
};

GemmView gemmViewOf(const KernelCall &c) {
  const TensorRef &a = c.inputs[0], &b = c.inputs[1], &y = c.outputs[0];
  GemmView v;
  v.at = paramsOf<GemmBiasActParams>(c).attrs;
  v.n = y.shape.back();
  v.m = v.n == 0 ? 0 : y.numElements() / v.n;
  v.k = v.at.transA ? a.shape[0] : a.shape.back();
  v.lda = a.shape.back();
  v.ldb = b.shape[1];
  return v;
}

/// The activation over y in place, through the bodies the Relu and Gelu
/// kernels run.
template <typename T> void activateInPlace(GemmActivation act, T *y, int64_t count) {
  switch (act) {
  case GemmActivation::None:
    return;
  case GemmActivation::Relu:
    kernels::applyUnary(kernels::Relu(), y, y, count);
    return;
  case GemmActivation::Gelu:
    kernels::applyUnary(kernels::Gelu{false}, y, y, count);
    return;
  case GemmActivation::GeluTanh:
    kernels::applyUnary(kernels::Gelu{true}, y, y, count);
    return;
  }
}

/// Y = act(A @ B + bias) with A, B, bias and Y of one type T, in the unfused
/// nodes' order: the product rounded to T then an Add in T (MatMul + Add),
/// or the bias in the accumulator (Gemm's C); then the activation in T. A
/// null bias: no bias.
template <typename T>
void gemmBiasActSameType(const GemmView &v, const T *a, const T *b, const T *bias,
                         llvm::ArrayRef<int64_t> biasShape, llvm::ArrayRef<int64_t> yShape,
                         T *y) {
  if (!bias) {
    cpu::gemm<T, T>(v.at.transA, v.at.transB, v.m, v.n, v.k, cpu::GemmScalar<T>(1), a, v.lda, b,
                    v.ldb, cpu::GemmScalar<T>(0), y, v.n);
  } else if (v.at.biasAfterRounding) {
    cpu::gemm<T, T>(v.at.transA, v.at.transB, v.m, v.n, v.k, cpu::GemmScalar<T>(1), a, v.lda, b,
                    v.ldb, cpu::GemmScalar<T>(0), y, v.n);
    kernels::applyBinary(kernels::Add(), y, yShape, bias, biasShape, y);
  } else {
    cpu::gemmWithBias<T>(v.at.transA, v.at.transB, v.m, v.n, v.k, cpu::GemmScalar<T>(1), a, v.lda, b,
                         v.ldb, cpu::GemmScalar<T>(1), bias, 0, 1, y, v.n);
  }
  activateInPlace(v.at.act, y, v.m * v.n);
}

/// The bias widened to float (a float32 bias is used in place).
const float *floatBias(const TensorRef &bias, std::vector<float> &widened) {
  if (bias.dtype == DType::F32)
    return bias.as<float>();
  widened.resize(size_t(bias.numElements()));
  dispatchFloat(bias.dtype, [&](auto tag) {
    using B = decltype(tag);
    if constexpr (kernels::kIsFloat16<B>)
      kernels::widenBlock(bias.as<B>(), widened.data(), bias.numElements());
  });
  return widened.data();
}
} // namespace

/// Output 1 (bias_grad): the stored operand bias_grad_of names, [K, L], summed
/// over K into L elements of Y's type, through BiasGrad's own body (so the
/// bits are those of a BiasGrad over that operand, or over the tensor it
/// flattens).
static llvm::Error writeBiasGrad(const KernelCall &c, const GemmBiasActAttrs &at) {
  if (c.outputs.size() < 2 || c.outputs[1].dtype == DType::Undefined)
    return llvm::Error::success();
  const TensorRef &x = c.inputs[at.biasGradOf == 0 ? 0 : 1], &db = c.outputs[1];
  llvm::SmallVector<int64_t, 2> shape(db.shape.begin(), db.shape.end());
  if (db.dtype == x.dtype) {
    dispatchFloat(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      cpu::biasGrad<T>(x.as<T>(), x.shape, shape, db.as<T>());
    });
  } else if (db.dtype == DType::F32 && x.dtype == DType::F16) {
    cpu::biasGrad<Half, float>(x.as<Half>(), x.shape, shape, db.as<float>());
  } else if (db.dtype == DType::F32 && x.dtype == DType::BF16) {
    cpu::biasGrad<BFloat16, float>(x.as<BFloat16>(), x.shape, shape, db.as<float>());
  } else {
    return nodeError(*c.node, "no bias_grad kernel for " + dtypeName(x.dtype).str() + " -> " +
                                  dtypeName(db.dtype).str());
  }
  return llvm::Error::success();
}

llvm::Error cpuk::runGemmBiasAct(const KernelCall &c) {
  const TensorRef &a = c.inputs[0], &b = c.inputs[1], &y = c.outputs[0];
  if (llvm::Error e = writeBiasGrad(c, paramsOf<GemmBiasActParams>(c).attrs))
    return e;
  // An absent bias: the product alone (a null pointer below).
  bool hasBias = c.hasInput(2);
  TensorRef bias = hasBias ? c.inputs[2] : TensorRef();
  GemmView v = gemmViewOf(c);
  if (v.m == 0 || v.n == 0)
    return llvm::Error::success();
  if (y.dtype == a.dtype && (!hasBias || bias.dtype == a.dtype)) {
    dispatchFloat(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      gemmBiasActSameType<T>(v, a.as<T>(), b.as<T>(), hasBias ? bias.as<T>() : nullptr,
                             bias.shape, y.shape, y.as<T>());
    });
    return llvm::Error::success();
  }
  // A folded Cast: the fp32 result, rounded once into Y's type.
  std::vector<float> widenedBias;
  const float *biasF = hasBias ? floatBias(bias, widenedBias) : nullptr;
  float *acc = y.dtype == DType::F32 ? y.as<float>()
                                     : cpu::scratch<float>(cpu::ScratchSlot::Accum,
                                                           size_t(v.m * v.n));
  if (a.dtype == DType::F32) {
    // float32 operands: the float32 nodes' own computation, then the Cast.
    gemmBiasActSameType<float>(v, a.as<float>(), b.as<float>(), biasF, bias.shape, y.shape, acc);
  } else {
    // 16-bit operands: the fp32 accumulator plus the bias, the activation
    // in fp32, no rounding before Y.
    dispatchFloat(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kernels::kIsFloat16<T>)
        cpu::gemm<T, float>(v.at.transA, v.at.transB, v.m, v.n, v.k, 1.0f, a.as<T>(), v.lda,
                            b.as<T>(), v.ldb, 0.0f, acc, v.n);
    });
    if (biasF)
      kernels::applyBinary(kernels::Add(), acc, y.shape, biasF, bias.shape, acc);
    activateInPlace(v.at.act, acc, v.m * v.n);
  }
  if (y.dtype != DType::F32)
    dispatchFloat(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kernels::kIsFloat16<T>)
        kernels::narrowBlock(acc, y.as<T>(), v.m * v.n);
    });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Conv and pooling
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runConv(const KernelCall &c) {
  auto g = convGeometry(*c.node, paramsOf<WindowParams>(c), c.inputs[0].shape,
                        c.inputs[1].shape);
  if (!g)
    return g.takeError();
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::conv<T>(*g, c.inputs[0].as<T>(), c.inputs[1].as<T>(),
                 c.hasInput(2) ? c.inputs[2].as<T>() : nullptr, c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runMaxPool(const KernelCall &c) {
  const WindowParams &p = paramsOf<WindowParams>(c);
  auto g = poolGeometry(*c.node, p, c.inputs[0].shape);
  if (!g)
    return g.takeError();
  int64_t *indices = c.outputs.size() > 1 ? c.outputs[1].as<int64_t>() : nullptr;
  bool colMajor = p.storageColumnMajor;
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::maxPool<T>(*g, c.inputs[0].as<T>(), c.outputs[0].as<T>(), indices, colMajor);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runAveragePool(const KernelCall &c) {
  const WindowParams &p = paramsOf<WindowParams>(c);
  auto g = poolGeometry(*c.node, p, c.inputs[0].shape);
  if (!g)
    return g.takeError();
  bool includePad = p.countIncludePad;
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::averagePool<T>(*g, includePad, c.inputs[0].as<T>(), c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runLpPool(const KernelCall &c) {
  const WindowParams &p = paramsOf<WindowParams>(c);
  auto g = poolGeometry(*c.node, p, c.inputs[0].shape);
  if (!g)
    return g.takeError();
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::lpPool<T>(*g, p.p, c.inputs[0].as<T>(), c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}

/// N x C planes and the size of each, for the global pools.
static void globalPlanes(const TensorRef &x, int64_t &planes, int64_t &planeSize) {
  planes = x.shape[0] * x.shape[1];
  planeSize = x.numElements() / std::max<int64_t>(planes, 1);
}

llvm::Error cpuk::runGlobalLpPool(const KernelCall &c) {
  int64_t planes, planeSize;
  globalPlanes(c.inputs[0], planes, planeSize);
  double order = paramsOf<WindowParams>(c).p;
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::globalLpPool<T>(c.inputs[0].as<T>(), c.outputs[0].as<T>(), planes, planeSize, order);
  });
  return llvm::Error::success();
}

template <bool Max> static llvm::Error runGlobalPool(const KernelCall &c) {
  int64_t planes, planeSize;
  globalPlanes(c.inputs[0], planes, planeSize);
  dispatchFloat(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (Max)
      cpu::globalMaxPool<T>(c.inputs[0].as<T>(), c.outputs[0].as<T>(), planes, planeSize);
    else
      cpu::globalAveragePool<T>(c.inputs[0].as<T>(), c.outputs[0].as<T>(), planes,
                                planeSize);
  });
  return llvm::Error::success();
}
llvm::Error cpuk::runGlobalAveragePool(const KernelCall &c) { return runGlobalPool<false>(c); }
llvm::Error cpuk::runGlobalMaxPool(const KernelCall &c) { return runGlobalPool<true>(c); }

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

// Training mode (opset 14+, training_mode = 1: batch statistics, updated
// running statistics) lives with the other training kernels.

llvm::Error cpuk::runBatchNorm(const KernelCall &c) {
  const BatchNormParams &params = paramsOf<BatchNormParams>(c);
  if (params.training)
    return runBatchNormTraining(c);
  const TensorRef &x = c.inputs[0];
  int64_t batch = x.shape.empty() ? 1 : x.shape[0];
  int64_t channels = x.shape.size() > 1 ? x.shape[1] : 1;
  int64_t spatial = x.numElements() / std::max<int64_t>(batch * channels, 1);
  float eps = params.epsilon;
  DType p = c.inputs[1].dtype;
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (p == DType::F32 && !std::is_same<T, float>::value && !std::is_same<T, double>::value)
      cpu::batchNormalization<T, float>(x.as<T>(), c.inputs[1].as<float>(),
                                        c.inputs[2].as<float>(), c.inputs[3].as<float>(),
                                        c.inputs[4].as<float>(), c.outputs[0].as<T>(),
                                        batch, channels, spatial, eps);
    else
      cpu::batchNormalization<T, T>(x.as<T>(), c.inputs[1].as<T>(), c.inputs[2].as<T>(),
                                    c.inputs[3].as<T>(), c.inputs[4].as<T>(),
                                    c.outputs[0].as<T>(), batch, channels, spatial, eps);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runLayerNorm(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  const LayerNormParams &params = paramsOf<LayerNormParams>(c);
  int64_t axis = params.axis;
  normalizeAxis(axis, x.shape.size());
  // outer: the rows normalized separately; inner: one row (the normalized
  // axes), from the dims themselves so that an empty outer keeps its rows'
  // length.
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[i];
  for (size_t i = size_t(axis); i < x.shape.size(); ++i)
    inner *= x.shape[i];
  float eps = params.epsilon;
  if (c.hasInput(1) && c.inputs[1].numElements() != inner)
    return nodeError(*c.node, "scale does not broadcast over the normalized axes");
  DType p = c.inputs[1].dtype;
  for (unsigned i = 1; i < c.outputs.size(); ++i)
    if (c.outputs[i].data && c.outputs[i].dtype != DType::F32 &&
        c.outputs[i].dtype != DType::F64)
      return nodeError(*c.node, "Mean and InvStdDev must be float or double");
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = kernels::AccumType<T>;
    // Mean/InvStdDev are computed in the accumulation type A and stored in
    // their own type U (stash_type): a staging buffer when the two differ.
    std::vector<A> stage[2];
    A *stats[2] = {nullptr, nullptr};
    for (unsigned i = 0; i < 2; ++i) {
      const TensorRef *o = c.outputs.size() > i + 1 && c.outputs[i + 1].data
                               ? &c.outputs[i + 1] : nullptr;
      if (!o)
        continue;
      bool same = (o->dtype == DType::F64) == std::is_same_v<A, double>;
      if (same) {
        stats[i] = o->as<A>();
      } else {
        stage[i].resize(static_cast<size_t>(outer));
        stats[i] = stage[i].data();
      }
    }
    A *mean = stats[0], *inv = stats[1];
    auto storeStats = [&] {
      for (unsigned i = 0; i < 2; ++i) {
        if (stage[i].empty())
          continue;
        const TensorRef &o = c.outputs[i + 1];
        for (int64_t k = 0; k < outer; ++k) {
          if (o.dtype == DType::F64)
            o.as<double>()[k] = static_cast<double>(stage[i][k]);
          else
            o.as<float>()[k] = static_cast<float>(stage[i][k]);
        }
      }
    };
    const void *bias = c.hasInput(2) ? c.inputs[2].data : nullptr;
    if constexpr (kernels::kIsFloat16<T>) {
      if (p == DType::F32) {
        cpu::layerNormalization<T, float>(x.as<T>(), c.inputs[1].as<float>(),
                                          static_cast<const float *>(bias),
                                          c.outputs[0].as<T>(), outer, inner, eps, mean, inv);
        storeStats();
        return;
      }
    }
    cpu::layerNormalization<T, T>(x.as<T>(), c.inputs[1].as<T>(),
                                  static_cast<const T *>(bias), c.outputs[0].as<T>(),
                                  outer, inner, eps, mean, inv);
    storeStats();
  });
  return llvm::Error::success();
}

/// The extents of Softmax, LogSoftmax and Hardmax around their axis: before
/// opset 13 the input is flattened to 2-d at `axis` (the axis is all of the
/// trailing dimensions), from 13 on it is the one dimension.
static llvm::Error axisExtents(const KernelCall &c, int64_t &outer, int64_t &axisDim,
                               int64_t &inner) {
  const TensorRef &x = c.inputs[0];
  int64_t rank = x.shape.size();
  int64_t axis = paramsOf<SoftmaxParams>(c).axis;
  if (!normalizeAxis(axis, std::max<int64_t>(rank, 1)))
    return nodeError(*c.node, "axis out of range for " + formatShape(x.shape));
  outer = axisDim = inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : i == axis ? axisDim : inner) *= x.shape[i];
  if (c.node->opsetVersion() < 13) {
    axisDim *= inner;
    inner = 1;
  }
  return llvm::Error::success();
}

template <bool Log> static llvm::Error runSoftmaxImpl(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t outer, axisDim, inner;
  if (auto err = axisExtents(c, outer, axisDim, inner))
    return err;
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (Log)
      cpu::logSoftmax<T>(x.as<T>(), c.outputs[0].as<T>(), outer, axisDim, inner);
    else
      cpu::softmax<T>(x.as<T>(), c.outputs[0].as<T>(), outer, axisDim, inner);
  });
  return llvm::Error::success();
}
llvm::Error cpuk::runSoftmax(const KernelCall &c) { return runSoftmaxImpl<false>(c); }
llvm::Error cpuk::runLogSoftmax(const KernelCall &c) { return runSoftmaxImpl<true>(c); }

/// 1 at the first largest element along the axis (the first NaN where there
/// is one, as numpy's argmax), 0 elsewhere; before opset 13 along the
/// flattened trailing axes from `axis` on, as Softmax.
llvm::Error cpuk::runHardmax(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t outer, axisDim, inner;
  if (auto err = axisExtents(c, outer, axisDim, inner))
    return err;
  dispatchFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = x.as<T>();
    T *out = c.outputs[0].as<T>();
    auto value = [](T v) {
      if constexpr (kernels::kIsFloat16<T>)
        return static_cast<double>(static_cast<float>(v));
      else
        return static_cast<double>(v);
    };
    std::fill(out, out + outer * axisDim * inner, T(0.0f));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T *row = in + o * axisDim * inner + i;
        int64_t best = 0;
        double bestValue = axisDim ? value(row[0]) : 0.0;
        for (int64_t k = 1; k < axisDim && bestValue == bestValue; ++k) {
          double v = value(row[k * inner]);
          if (v > bestValue || v != v) {
            best = k;
            bestValue = v;
          }
        }
        if (axisDim)
          out[o * axisDim * inner + best * inner + i] = T(1.0f);
      }
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static cpu::ReduceKind reduceKind(llvm::StringRef op) {
  return llvm::StringSwitch<cpu::ReduceKind>(op)
      .Case("ReduceSum", cpu::ReduceKind::Sum)
      .Case("ReduceMean", cpu::ReduceKind::Mean)
      .Case("ReduceMax", cpu::ReduceKind::Max)
      .Case("ReduceMin", cpu::ReduceKind::Min)
      .Case("ReduceProd", cpu::ReduceKind::Prod)
      .Case("ReduceSumSquare", cpu::ReduceKind::SumSquare)
      .Case("ReduceL1", cpu::ReduceKind::L1)
      .Case("ReduceL2", cpu::ReduceKind::L2)
      .Case("ReduceLogSum", cpu::ReduceKind::LogSum)
      .Default(cpu::ReduceKind::LogSumExp);
}

llvm::Error cpuk::runReduce(const KernelCall &c) {
  bool hasAxes = c.hasInput(1);
  HostTensor axesValue;
  if (hasAxes) {
    std::vector<int64_t> a = readInts(c.inputs[1]);
    axesValue = HostTensor(DType::I64, {int64_t(a.size())});
    std::copy(a.begin(), a.end(), axesValue.data<int64_t>());
  }
  const ReduceParams &params = paramsOf<ReduceParams>(c);
  // The shape function's rule, from the parsed attributes.
  auto axes = shapes::reduceAxes(*c.node, params.axes, params.noopWithEmptyAxes,
                                 c.inputs[0].shape.size(), &axesValue, hasAxes);
  if (!axes)
    return axes.takeError();
  if (axes->empty() && params.noopWithEmptyAxes) {
    std::memcpy(c.outputs[0].data, c.inputs[0].data,
                size_t(c.inputs[0].numElements()) * runtimeElementSize(c.inputs[0].dtype));
    return llvm::Error::success();
  }
  cpu::ReduceKind kind = reduceKind(c.node->opType);
  dispatchSigned(c.inputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, int8_t>::value || std::is_same<T, int16_t>::value)
      return;
    else
      cpu::reduce<T>(kind, c.inputs[0].as<T>(), c.inputs[0].shape, *axes,
                     c.outputs[0].as<T>());
  });
  return llvm::Error::success();
}
