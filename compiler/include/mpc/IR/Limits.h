//===- Limits.h - Limits on the shape of a model ----------------*- C++ -*-===//
//
// Bounds that keep every recursive walk of the IR finite in stack: the
// importers (ONNX and text) refuse a model beyond them, and the verifier, the
// exporter and the executor check them again for IR built any other way.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_LIMITS_H
#define MPC_IR_LIMITS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>

namespace mpc {

class Graph;

/// How deep graphs may nest in graph attributes (If/Loop/Scan bodies): the
/// main graph is at depth 0, a body of one of its nodes at depth 1. Walks
/// over nested graphs recurse once per level; documented in
/// docs/user-guide.md ("Limits").
constexpr int kMaxGraphDepth = 64;

/// The nesting depth of `g` (0 for a top-level graph, training graphs too).
int graphDepth(const Graph &g);

/// The error for a graph named `graphName` at `depth` > kMaxGraphDepth;
/// `nodePath` lists the nodes that hold the nested graphs, outermost first,
/// each as describeNode() gives it (the middle of a long path is elided).
llvm::Error graphDepthError(llvm::StringRef graphName, int depth,
                            llvm::ArrayRef<std::string> nodePath);

/// graphDepthError for `g` when it nests deeper than kMaxGraphDepth.
llvm::Error checkGraphDepth(const Graph &g);

} // namespace mpc

#endif // MPC_IR_LIMITS_H
