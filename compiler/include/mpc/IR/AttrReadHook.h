//===- AttrReadHook.h - Observe attribute reads (debug) ---------*- C++ -*-===//
//
// A hook Node::attr calls on every attribute lookup when set (null by
// default: one predictable branch). The runtime's launch check uses it to
// find kernels that read attributes while launching instead of from their
// parsed parameter struct (docs/op-registry.md).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_IR_ATTRREADHOOK_H
#define MPC_IR_ATTRREADHOOK_H

#include "llvm/ADT/StringRef.h"
#include <atomic>

namespace mpc {

class Node;

using AttrReadHook = void (*)(const Node &node, llvm::StringRef attrName);

/// Called by Node::attr (and so by intAttr, floatAttr, stringAttr) when set.
extern std::atomic<AttrReadHook> gAttrReadHook;

} // namespace mpc

#endif // MPC_IR_ATTRREADHOOK_H
