//===- MiscKernels.cpp - CPU glue for Einsum, Compress, ReverseSequence -----===//
//
// Einsum by a direct loop over every label combination (accumulated in the
// compute type's accumulator, rounded once), Compress (data-dependent shape:
// the row is dynamic), ReverseSequence and EyeLike.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
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
  int64_t outer = 1, dim = x.numElements(), inner = 1;
  if (p.flagA) { // axis given
    int64_t axis = p.axis;
    normalizeAxis(axis, x.shape.size());
    dim = x.shape[axis];
    for (int64_t i = 0; i < axis; ++i)
      outer *= x.shape[i];
    for (size_t i = axis + 1; i < x.shape.size(); ++i)
      inner *= x.shape[i];
  }
  int64_t n = std::min<int64_t>(cond.numElements(), dim);
  size_t es = elemSize(x.dtype), row = inner * es;
  const bool *keep = cond.as<bool>();
  const char *src = x.as<const char>();
  char *dst = c.outputs[0].as<char>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      if (keep[j]) {
        std::memcpy(dst, src + (o * dim + j) * row, row);
        dst += row;
      }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// ReverseSequence
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runReverseSequence(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  const ReverseSequenceParams &p = paramsOf<ReverseSequenceParams>(c);
  int64_t b = p.batchAxis, t = p.timeAxis;
  std::vector<int64_t> lens = readInts(c.inputs[1]);
  int64_t inner = 1;
  for (size_t i = 2; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  int64_t d0 = x.shape[0], d1 = x.shape[1];
  size_t es = elemSize(x.dtype), row = inner * es;
  const char *src = x.as<const char>();
  char *dst = c.outputs[0].as<char>();
  for (int64_t i = 0; i < d0; ++i)
    for (int64_t j = 0; j < d1; ++j) {
      int64_t bi = b == 0 ? i : j, ti = t == 0 ? i : j;
      int64_t len = std::min<int64_t>(std::max<int64_t>(lens[bi], 0), x.shape[t]);
      int64_t srcT = ti < len ? len - 1 - ti : ti;
      int64_t si = t == 0 ? srcT : i, sj = t == 0 ? j : srcT;
      std::memcpy(dst + (i * d1 + j) * row, src + (si * d1 + sj) * row, row);
    }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// EyeLike
//===----------------------------------------------------------------------===//

llvm::Error cpuk::runEyeLike(const KernelCall &c) {
  const TensorRef &y = c.outputs[0];
  int64_t rows = y.shape[0], cols = y.shape[1];
  int64_t diag = paramsOf<IntParams>(c).value;
  // All-zero bytes are zero in every storage type.
  if (int64_t n = y.numElements())
    std::memset(y.data, 0, size_t(n) * elemSize(y.dtype));
  dispatchAll(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T one = k::castValue<T>(1);
    T *p = y.as<T>();
    for (int64_t i = std::max<int64_t>(0, -diag); i < rows && i + diag < cols; ++i)
      p[i * cols + i + diag] = one;
  });
  return llvm::Error::success();
}
