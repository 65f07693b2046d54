//===- Diagnostics.cpp - Errors about the input model ----------------------===//
#include "mpc/Support/Diagnostics.h"
#include "mpc/IR/Graph.h"

using namespace mpc;

char InputError::ID;

std::string mpc::describeNode(const Node &n) {
  return describeNode(n.name, n.order(), n.qualifiedOpType());
}

std::string mpc::describeNode(llvm::StringRef name, uint64_t order,
                              llvm::StringRef qualifiedOpType) {
  std::string where = name.empty() ? llvm::formatv("node #{0}", order).str()
                                   : llvm::formatv("node '{0}'", name).str();
  return llvm::formatv("{0} ({1})", where, qualifiedOpType).str();
}
