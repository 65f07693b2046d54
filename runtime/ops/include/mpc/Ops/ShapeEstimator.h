//===- ShapeEstimator.h - Static shape estimates -----------------*- C++ -*-===//
//
// A static shape estimator over the op registry: every node is shaped by its
// registry row's shape function (runtime/ops/shapes, the one the executor's
// planner runs), fed with estimated input shapes (symbolic dims taken as 1 or
// a given value) and with the small integer tensors the estimator folds
// itself (Shape -> Gather -> Concat -> Reshape). `mpc rewrite --report`
// counts FLOPs and bytes with it; `mpc train-graph` keeps ranks and
// dimensions with it where ONNX's shape inference loses them. Estimates only:
// what is not known stays unknown, and nothing here is used to rewrite a model.
// Lives in runtime/ops (library mpc_ops) next to the registry it drives.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_OPS_SHAPEESTIMATOR_H
#define MPC_OPS_SHAPEESTIMATOR_H

#include "mpc/IR/Graph.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Optional.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

/// A static shape estimate. `dims` entries are -1 where a size is unknown;
/// nothing is known (not even the rank) when `rankKnown` is false.
struct ShapeInfo {
  bool rankKnown = false;
  std::vector<int64_t> dims;

  static ShapeInfo of(std::vector<int64_t> d) { return ShapeInfo{true, std::move(d)}; }
  unsigned rank() const { return static_cast<unsigned>(dims.size()); }
  bool isFullyKnown() const;
  /// Product of the dims; -1 unless every dim is known.
  int64_t numElements() const;
};

/// The shape of op(X) for an operand of com.microsoft::FusedMatMul:
/// transBatch moves axis 0 behind the batch axes (rank >= 3), trans swaps the
/// last two axes; a vector (or unknown rank) is returned as it is.
ShapeInfo fusedMatMulOperand(const ShapeInfo &x, bool trans, bool transBatch);

/// The elements of a small constant tensor: integer tensors exactly as int64
/// (INT64_MAX does not survive a double), floating-point ones as doubles.
struct ConstValues {
  bool floating = false;
  std::vector<int64_t> ints; ///< when !floating
  std::vector<double> reals; ///< when floating
  size_t size() const { return floating ? reals.size() : ints.size(); }
  double real(size_t i) const { return floating ? reals[i] : static_cast<double>(ints[i]); }
  int64_t integer(size_t i) const { return floating ? saturatingInt64(reals[i]) : ints[i]; }
  std::vector<int64_t> asInts() const;
  std::vector<double> asReals() const;
};

/// Shapes of every value of a model's main graph and of the graphs nested in
/// it (If/Loop/Scan bodies), plus the contents of small integer tensors that
/// shape computations produce (Shape -> Gather -> Concat -> Reshape).
class ShapeEstimator {
public:
  /// Estimates all shapes. Symbolic dimensions ("batch") are taken as 1, or
  /// as `symbolValue(name)` when given, and recorded in assumedSymbols(), so
  /// that ratios stay meaningful.
  explicit ShapeEstimator(const Model &m,
                          llvm::function_ref<int64_t(llvm::StringRef)> symbolValue = nullptr);

  /// The estimate for `v` (unknown for values the estimator never saw).
  const ShapeInfo &shape(const Value *v) const;
  /// The element type of `v`: the registry's for a node output it shaped,
  /// else the initializer's or the declared one (Undefined when unknown).
  DType dtypeOf(const Value *v) const;
  /// The elements of a small constant tensor (initializer, Constant, or a
  /// folded shape computation), null when not known.
  const ConstValues *constValues(const Value *v) const;
  /// Symbolic dimension names that were taken as 1, sorted.
  const std::vector<std::string> &assumedSymbols() const { return symbols; }
  /// True when the shape of `v` was computed from a symbolic dimension taken
  /// as 1 (a dynamic batch), so its sizes are not the ones at run time.
  bool dependsOnSymbols(const Value *v) const { return symbolic.count(v) != 0; }

private:
  llvm::DenseMap<const Value *, ShapeInfo> shapes;
  llvm::DenseMap<const Value *, ConstValues> consts;
  llvm::DenseMap<const Value *, DType> dtypes;
  llvm::DenseSet<const Value *> symbolic;
  std::vector<std::string> symbols;
  ShapeInfo unknown;
  llvm::function_ref<int64_t(llvm::StringRef)> symbolValue; // during construction only

  void visitGraph(const Graph &g);
  void visitNode(const Node &n);
  /// The declared shape; sets `usedSymbols` when a symbolic dim was taken as
  /// 1 (or its symbolValue).
  ShapeInfo fromDeclaredType(const Type &t, bool &usedSymbols);
};

/// Visits `g` and every graph nested in its nodes' attributes, outer first
/// (a const forEachGraph).
void forEachGraphConst(const Graph &g, llvm::function_ref<void(const Graph &)> fn);

/// The size of every index letter of an Einsum node (and its broadcast
/// ellipsis dimensions), for FLOP counts; false when a shape is unknown.
bool einsumIndexSizes(const Node &n, const ShapeEstimator &s, std::vector<int64_t> &sizes);

} // namespace mpc

#endif // MPC_OPS_SHAPEESTIMATOR_H
