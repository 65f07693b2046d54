//===- EinsumPlan.cpp - Einsum as gathers and one batched GEMM --------------===//
//
// See EinsumPlan.h.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/EinsumPlan.h"

#include <algorithm>

using namespace mpc;
using namespace mpc::cuda;

namespace {

llvm::Error refuse(const std::string &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

/// The stride of `label` in an operand of `labels` (dense row-major): the
/// sum over its positions, so a repeated label walks the diagonal.
int64_t strideOf(const std::string &labels, char label, const std::map<char, int64_t> &sizes) {
  int64_t stride = 0, s = 1;
  for (size_t d = labels.size(); d-- > 0;) {
    if (labels[d] == label)
      stride += s;
    s *= sizes.at(labels[d]);
  }
  return stride;
}

/// Labels of `labels` in first-appearance order, each once.
std::string distinct(const std::string &labels) {
  std::string out;
  for (char l : labels)
    if (out.find(l) == std::string::npos)
      out += l;
  return out;
}

/// The gather of `src` (labels of the operand) into the dense dims
/// `dims` (labels), summing `summed` (labels).
llvm::Expected<EinsumGather> gatherOf(const std::string &src, const std::string &dims,
                                      const std::string &summed,
                                      const std::map<char, int64_t> &sizes) {
  EinsumGather g;
  if (dims.size() > size_t(kEinsumMaxDims) || summed.size() > size_t(kEinsumMaxDims))
    return refuse("a gather of " + std::to_string(dims.size()) + " dimensions summing " +
                  std::to_string(summed.size()) + " (at most " +
                  std::to_string(kEinsumMaxDims) + " each)");
  g.rank = int32_t(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    g.dims[d] = sizes.at(dims[d]);
    g.strides[d] = strideOf(src, dims[d], sizes);
  }
  g.sumRank = int32_t(summed.size());
  for (size_t d = 0; d < summed.size(); ++d) {
    g.sumDims[d] = sizes.at(summed[d]);
    g.sumStrides[d] = strideOf(src, summed[d], sizes);
  }
  return g;
}

int64_t product(const std::string &labels, const std::map<char, int64_t> &sizes) {
  int64_t n = 1;
  for (char l : labels)
    n *= sizes.at(l);
  return n;
}

bool has(const std::string &s, char l) { return s.find(l) != std::string::npos; }

} // namespace

llvm::Expected<EinsumLowering> cuda::planEinsum(const std::vector<std::string> &operands,
                                                const std::string &output,
                                                const std::map<char, int64_t> &sizes) {
  if (operands.empty() || operands.size() > 2)
    return refuse(std::to_string(operands.size()) + " operands (one or two are planned)");
  if (distinct(output).size() != output.size())
    return refuse("the output label " + output + " repeats a label");
  for (const std::string &o : operands)
    for (char l : o)
      if (!sizes.count(l) || sizes.at(l) < 0)
        return refuse(std::string("label '") + l + "' has no size");
  for (char l : output)
    if (!sizes.count(l))
      return refuse(std::string("output label '") + l + "' has no size");
  EinsumLowering p;
  const std::string &a = operands[0];
  if (operands.size() == 1) {
    std::string summed;
    for (char l : distinct(a))
      if (!has(output, l))
        summed += l;
    auto g = gatherOf(a, output, summed, sizes);
    if (!g)
      return g.takeError();
    p.a = *g;
    return p;
  }
  const std::string &b = operands[1];
  std::string batch, m, n, k, sumA, sumB;
  for (char l : output) {
    bool inA = has(a, l), inB = has(b, l);
    (inA && inB ? batch : inA ? m : n) += l;
  }
  for (char l : distinct(a))
    if (!has(output, l))
      (has(b, l) ? k : sumA) += l;
  for (char l : distinct(b))
    if (!has(output, l) && !has(a, l))
      sumB += l;
  auto ga = gatherOf(a, batch + m + k, sumA, sizes);
  if (!ga)
    return ga.takeError();
  auto gb = gatherOf(b, batch + k + n, sumB, sizes);
  if (!gb)
    return gb.takeError();
  // D is dense [batch..., m..., n...]: its strides by label.
  std::string dLabels = batch + m + n;
  auto gd = gatherOf(dLabels, output, "", sizes);
  if (!gd)
    return gd.takeError();
  p.product = true;
  p.a = *ga;
  p.b = *gb;
  p.out = *gd;
  p.batch = product(batch, sizes);
  p.m = product(m, sizes);
  p.n = product(n, sizes);
  p.k = product(k, sizes);
  return p;
}
