//===- SchemaRegistry.h - Adding mpc's own schemas to libonnx's -*- C++ -*-===//
//
// Private to compiler/lib/Ops: the ai.mpc.training and com.microsoft schemas
// are registered with libonnx the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_LIB_OPS_SCHEMAREGISTRY_H
#define MPC_LIB_OPS_SCHEMAREGISTRY_H

#include "onnx/defs/schema.h"
#include <string>
#include <vector>

namespace mpc {

/// Declares `domain` at version 1 and registers each schema (all version 1)
/// that libonnx does not have yet. Callers run it once (a function-local
/// static), so it needs no lock of its own.
void addVersion1Schemas(const char *domain, std::vector<onnx::OpSchema> schemas);

/// The float tensor types the gradient and contrib schemas accept.
const std::vector<std::string> &schemaFloatTypes();

/// Output 0's shape of a product with transposable operands (com.microsoft
/// FusedMatMul, ai.mpc.training GemmBiasAct): MatMul's rule (numpy matmul)
/// on op(A) and op(B), where transBatch moves axis 0 behind the batch axes
/// (rank >= 3) and trans swaps the last two (a vector is left as it is).
/// Nothing without both input shapes; a shape error names `op`.
void inferTransposedMatMulShape(onnx::InferenceContext &ctx, const char *op, bool transA,
                                bool transB, bool transBatchA, bool transBatchB);

} // namespace mpc

#endif // MPC_LIB_OPS_SCHEMAREGISTRY_H
