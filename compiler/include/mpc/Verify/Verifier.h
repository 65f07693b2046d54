//===- Verifier.h - Structural and type invariants of the IR ----*- C++ -*-===//
//
// Checks a model: every input defined before use (topological order), one
// definition per name, arities and element types consistent with the ONNX
// signatures, graph outputs defined. Used on imported models (errors name the
// node) and after every pass in tests and debug builds.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_VERIFY_VERIFIER_H
#define MPC_VERIFY_VERIFIER_H

#include "mpc/IR/Graph.h"
#include "llvm/Support/Error.h"

namespace mpc {

struct VerifyOptions {
  /// Check element types against the type constraints of the signatures.
  bool checkTypes = true;
};

/// Returns the first violated invariant as an InputError naming the graph,
/// node and value.
llvm::Error verifyModel(const Model &m, const VerifyOptions &opts = {});
llvm::Error verifyGraph(const Graph &g, const VerifyOptions &opts = {});

} // namespace mpc

#endif // MPC_VERIFY_VERIFIER_H
