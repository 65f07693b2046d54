//===- Profile.h - Node time by op type for --profile ---------*- C++ -*-===//
//
// `mpc run --profile` and `mpc run --train --profile` list where node time
// goes by op type: the node count and mean time per run (or step) of each
// op type (domain-qualified outside the default domain), longest first. On a
// GPU a node's time is its kernels plus one stream synchronization, so the
// list shows what a training step spends its time on before any fusion.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_MPC_PROFILE_H
#define MPC_TOOLS_MPC_PROFILE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mpc {
class Node;

/// One op type's share of node time.
struct OpTypeTime {
  std::string op; ///< "MatMul", "ai.mpc.training::AdamStep"
  size_t nodes = 0;
  double seconds = 0; ///< summed over the nodes
};

/// The node time of `nodes` (seconds[i] is nodes[i]'s) summed by op type,
/// longest first, ties by name: deterministic in form.
std::vector<OpTypeTime> timeByOpType(llvm::ArrayRef<const Node *> nodes,
                                     llvm::ArrayRef<double> seconds);

/// Prints "profile: node time by op type per <unit> (<what>): T ms in N
/// node(s)" and the `top` longest op types, each "  ms  share%  Op xcount",
/// times divided by `runs`.
void printTimeByOpType(llvm::raw_ostream &os, llvm::ArrayRef<const Node *> nodes,
                       llvm::ArrayRef<double> seconds, unsigned runs, llvm::StringRef unit,
                       llvm::StringRef what, size_t top = 15);

} // namespace mpc

#endif // MPC_TOOLS_MPC_PROFILE_H
