//===- Diagnostics.cpp - Errors about the input model ----------------------===//
#include "mpc/Support/Diagnostics.h"
#include "mpc/IR/Graph.h"

using namespace mpc;

char InputError::ID;

std::string mpc::describeNode(const Node &n) {
  std::string where = n.name.empty()
                          ? llvm::formatv("node #{0}", n.order()).str()
                          : llvm::formatv("node '{0}'", n.name).str();
  return llvm::formatv("{0} ({1})", where, n.qualifiedOpType()).str();
}
