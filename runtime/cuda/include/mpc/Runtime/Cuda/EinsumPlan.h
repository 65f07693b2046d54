//===- EinsumPlan.h - Einsum as gathers and one batched GEMM ----*- C++ -*-===//
//
// How the CUDA backend runs an Einsum equation (the labels the CPU's
// shapes::einsumPlan parses, '...' already replaced by digit labels), as a
// pure function of the labels and their sizes, so that CI (no GPU) tests
// it. Every label of the equation is one of:
//
//   batch  in both operands and the output
//   m      in operand A and the output only
//   n      in operand B and the output only
//   k      in both operands, not the output (contracted by the GEMM)
//   summed in one operand only, not the output (summed by its gather)
//
// One operand: a single gather writes the output (a transpose, a diagonal,
// a trace or a sum). Two operands: A is gathered into a dense row-major
// [batch, m, k] and B into [batch, k, n] (a label repeated inside an
// operand reads a diagonal: its strides add up), one strided-batch GEMM
// makes D [batch, m, n] in fp32, and a last gather rounds D into the
// output's label order. Each group of labels is flattened into one
// dimension (batch, m, n and k are products). More than two operands, or a
// gather with more than kEinsumMaxDims dimensions, is not planned (the node
// then runs on the CPU).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_EINSUMPLAN_H
#define MPC_RUNTIME_CUDA_EINSUMPLAN_H

#include "mpc/Runtime/Cuda/EinsumGather.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mpc {
namespace cuda {

/// The lowering of one equation.
struct EinsumLowering {
  /// Two operands (gathers a and b, the GEMM, gather out); otherwise gather
  /// a alone writes the output.
  bool product = false;
  EinsumGather a, b, out;
  /// The GEMM's sizes: D[batch, m, n] = A'[batch, m, k] * B'[batch, k, n].
  int64_t batch = 1, m = 1, n = 1, k = 1;
};

/// Plans the equation whose operand labels are `operands` (one string per
/// input, one label per dimension), whose output labels are `output`, and
/// whose label sizes are `sizes`. Fails, saying why, for what is not
/// planned: more than two operands, a repeated output label, a gather of
/// more than kEinsumMaxDims dimensions.
llvm::Expected<EinsumLowering> planEinsum(const std::vector<std::string> &operands,
                                          const std::string &output,
                                          const std::map<char, int64_t> &sizes);

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_EINSUMPLAN_H
