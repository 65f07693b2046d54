//===- MiscKernels.cpp - CPU glue for Einsum, Compress, ReverseSequence -----===//
//
// Einsum by a direct loop over every label combination (accumulated in the
// compute type's accumulator, rounded once), Compress (data-dependent shape:
// the row is dynamic), ReverseSequence and EyeLike.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Kernels/MoveBodies.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

static size_t elemSize(DType t) { return runtimeElementSize(t); }

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runEinsum(const KernelCall &c) {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorRef &t : c.inputs)
    shapes.emplace_back(t.shape.begin(), t.shape.end());
  auto p = einsumPlan(*c.node, paramsOf<EinsumParams>(c).equation, shapes);
  if (!p)
    return p.takeError();
  // Loop labels: output labels first, then the summed ones.
  std::string labels = p->output;
  for (auto &kv : p->sizes)
    if (labels.find(kv.first) == std::string::npos)
      labels += kv.first;
  size_t nl = labels.size(), nOut = p->output.size();
  std::vector<int64_t> dims(nl);
  for (size_t i = 0; i < nl; ++i)
    dims[i] = p->sizes[labels[i]];
  // Stride of every loop label in every operand (summed over repeated labels).
  std::vector<std::vector<int64_t>> strides(c.inputs.size(), std::vector<int64_t>(nl, 0));
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    int64_t s = 1;
    const std::string &ops = p->operands[i];
    for (size_t d = ops.size(); d-- > 0;) {
      strides[i][labels.find(ops[d])] += s;
      s *= shapes[i][d];
    }
  }
  int64_t outN = 1, sumN = 1;
  for (size_t i = 0; i < nl; ++i)
    (i < nOut ? outN : sumN) *= dims[i];
  dispatchSigned(c.outputs[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_integral<T>::value, int64_t, double>;
    // One odometer over every label; output labels are the most significant,
    // so element `it` belongs to output it / sumN.
    std::vector<A> acc(outN, A(0));
    std::vector<int64_t> idx(nl, 0), off(c.inputs.size(), 0);
    for (int64_t it = 0, total = outN * sumN; it < total; ++it) {
      A prod = 1;
      for (size_t i = 0; i < c.inputs.size(); ++i)
        prod *= A(k::load(c.inputs[i].as<T>()[off[i]]));
      acc[it / sumN] += prod;
      for (size_t d = nl; d-- > 0;) {
        for (size_t i = 0; i < off.size(); ++i)
          off[i] += strides[i][d];
        if (++idx[d] < dims[d])
          break;
        for (size_t i = 0; i < off.size(); ++i)
          off[i] -= strides[i][d] * dims[d];
        idx[d] = 0;
      }
    }
    T *y = c.outputs[0].as<T>();
    for (int64_t o = 0; o < outN; ++o)
      y[o] = k::store<T>(k::ComputeType<T>(acc[o]));
  });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Compress
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runCompress(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &cond = c.inputs[1];
  const AxisParams &p = paramsOf<AxisParams>(c);
  k::AxisSplit split;
  split.dim = x.numElements();
  if (p.flagA) { // axis given
    int64_t axis = p.axis;
    normalizeAxis(axis, x.shape.size());
    split.dim = x.shape[axis];
    for (int64_t i = 0; i < axis; ++i)
      split.outer *= x.shape[i];
    for (size_t i = axis + 1; i < x.shape.size(); ++i)
      split.inner *= x.shape[i];
  }
  // The kept positions in order, then every output element from its source
  // (the body the CUDA launcher runs).
  int64_t n = std::min<int64_t>(cond.numElements(), split.dim);
  const bool *keep = cond.as<bool>();
  std::vector<int64_t> list;
  for (int64_t j = 0; j < n; ++j)
    if (keep[j])
      list.push_back(j);
  int64_t kept = int64_t(list.size()), count = c.outputs[0].numElements();
  size_t es = elemSize(x.dtype);
  const char *src = x.as<const char>();
  char *dst = c.outputs[0].as<char>();
  for (int64_t e = 0; e < count; ++e)
    std::memcpy(dst + e * es, src + k::compressSource(split, kept, list.data(), e) * es, es);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// ReverseSequence
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runReverseSequence(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  const ReverseSequenceParams &p = paramsOf<ReverseSequenceParams>(c);
  std::vector<int64_t> lens = readInts(c.inputs[1]);
  k::ReverseSequencePlan plan;
  plan.d0 = x.shape[0];
  plan.d1 = x.shape[1];
  for (size_t i = 2; i < x.shape.size(); ++i)
    plan.inner *= x.shape[i];
  plan.batchFirst = p.batchAxis == 0;
  size_t es = elemSize(x.dtype), row = plan.inner * es;
  const char *src = x.as<const char>();
  char *dst = c.outputs[0].as<char>();
  for (int64_t r = 0; r < plan.d0 * plan.d1; ++r) {
    int64_t len = lens[size_t(k::reverseSequenceBatch(plan, r))];
    std::memcpy(dst + r * row, src + k::reverseSequenceSource(plan, r, len) * row, row);
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// EyeLike
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runEyeLike(const KernelCall &c) {
  const TensorRef &y = c.outputs[0];
  int64_t cols = y.shape[1], n = y.numElements();
  int64_t diag = paramsOf<IntParams>(c).value;
  // Every element through the body the CUDA launcher runs.
  dispatchAll(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T one = k::castValue<T>(1), zero = k::castValue<T>(0);
    T *p = y.as<T>();
    for (int64_t e = 0; e < n; ++e)
      p[e] = k::eyeLikeOne(e / cols, e % cols, diag) ? one : zero;
  });
  return llvm::Error::success();
}
