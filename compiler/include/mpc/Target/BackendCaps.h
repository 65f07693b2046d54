//===- BackendCaps.h - What a backend can run in low precision --*- C++ -*-===//
//
// The capability object the AMP painting consults (after XLA's FloatSupport):
// whether the target backend has a kernel for an op in a 16-bit type. The
// runtime derives its implementation from its kernel tables; the compiler
// never hard-codes backend knowledge.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TARGET_BACKENDCAPS_H
#define MPC_TARGET_BACKENDCAPS_H

#include "mpc/IR/DType.h"
#include "llvm/ADT/StringRef.h"
#include <string>

namespace mpc {

class Node;

class BackendCaps {
public:
  virtual ~BackendCaps();
  /// A short name for reports ("cpu", "cuda-sm90", "any").
  virtual std::string name() const = 0;
  /// Can the backend run `n` with its low-precision slots in `t`?
  virtual bool supportsLowPrecision(const Node &n, DType t) const = 0;
  /// Preferred multiple of GEMM/conv dimensions for full speed (1: none).
  virtual unsigned preferredDimMultiple() const { return 1; }
};

/// Capabilities that accept every op: the schema is the only constraint. Used
/// when rewriting for a backend mpc does not model (a model handed to
/// another runtime) and in tests.
class SchemaOnlyCaps final : public BackendCaps {
public:
  std::string name() const override { return "any"; }
  bool supportsLowPrecision(const Node &, DType) const override { return true; }
};

} // namespace mpc

#endif // MPC_TARGET_BACKENDCAPS_H
