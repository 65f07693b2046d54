//===- OpRegistry.h - What mpc knows about an op, backend-neutral -*- C++ -*-===//
//
// One registry row per op (domain, type) and opset range: its shape
// function, the parser of its attributes into a plain parameter struct, the
// in-place policy the memory planner follows, whether its output shapes
// depend on input values, and the class its FLOP/byte cost is counted by.
// Backends hold only kernels (run functions, supported dtypes): the CPU
// kernel table (CpuBackend.h) is keyed by the same (domain, type, opset), and
// a row here may have no CPU kernel (an op only a device backend runs).
// docs/op-registry.md describes the design and how to add an op.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPREGISTRY_H
#define MPC_RUNTIME_OPREGISTRY_H

#include "mpc/IR/DType.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

class Node;

/// Static type and shape of a value during planning.
struct ShapedType {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
};

/// Input to a shape function: the node, its input types (Undefined for an
/// absent optional input) and, where known at plan time, input values
/// (initializers and host-folded shape computations), else null.
struct ShapeQuery {
  const Node &node;
  llvm::ArrayRef<ShapedType> inputs;
  llvm::ArrayRef<const HostTensor *> values;
  /// The inputs are static estimates (ShapeEstimator), not the shapes of a
  /// run: symbolic dims stand for guessed sizes, so two dims that must agree
  /// may not. Broadcasting then takes the larger of two disagreeing dims
  /// instead of refusing the node (a causal mask sliced to the sequence
  /// length, clamped at its buffer's size, next to a stand-in length), and a
  /// Reshape whose element counts disagree keeps its target's rank and
  /// explicit sizes (its -1 unknown).
  bool estimate = false;
};

/// A shape function's error for an operand whose value decides the output
/// shapes (Reduce's axes, TopK's K, Unsqueeze's axes, Slice's bounds) and is
/// not known while planning: a graph input, or computed from data. It is an
/// InputError (the same one line); the executor, when it can, runs such a
/// graph in dynamic mode instead, shaping each node as it reaches it with
/// its operands' values (Executor::plan).
class UnknownOperandError : public llvm::ErrorInfo<UnknownOperandError, InputError> {
public:
  static char ID;
  using llvm::ErrorInfo<UnknownOperandError, InputError>::ErrorInfo;
};

/// Computes output types; an Error names the node and what is wrong.
using ShapeFn = llvm::Error (*)(const ShapeQuery &q, std::vector<ShapedType> &outputs);

/// The operand a node's output may overwrite (the memory planner's in-place
/// choice): candidates are tried in order, and the first whose last use is
/// this node and whose dtype and shape fit takes the output.
enum class InPlace : uint8_t {
  None,
  Operands,      ///< element-wise: input 0, then 1, with the output's dtype and shape
  WhereBranches, ///< Where: the else operand, then the then operand (the condition is bool)
  Data,          ///< a reshape-like copy: input 0, same dtype and element count
};

/// How an op's arithmetic and memory traffic are estimated (the report's
/// cost model). Bytes are the operands read plus the results written in
/// every class; the classes differ in FLOPs.
enum class CostClass : uint8_t {
  Data,        ///< data movement, shape, indexing, selection: 0 FLOPs
  Elementwise, ///< 1 FLOP per output element
  Reduction,   ///< 1 FLOP per input element
  Window,      ///< pooling: 1 FLOP per output element and window element
  Gemm,        ///< GEMM-like: 2*M*N*K of the op's GEMM view (Tensor Core work)
};

/// Where a row, kernel, list entry or rule is defined in the source tree.
struct SourceLocation {
  const char *file = nullptr; ///< __FILE__ as the compiler saw it
  unsigned line = 0;
  /// "runtime/ops/OnnxOps.cpp:12": the file relative to the source tree.
  std::string text() const;
};
#define MPC_SOURCE_LOCATION ::mpc::SourceLocation{__FILE__, unsigned(__LINE__)}
/// Written on the line above a function's definition (a shape function, an
/// attribute parser): defines `Fn##Where`, declared beside the function in
/// its list (ShapeFunctions.h, runtime/ops/Parsers.h), as the location of the
/// definition's first line.
#define MPC_DEFINED_BELOW(Fn)                                                  \
  const ::mpc::SourceLocation Fn##Where{__FILE__, unsigned(__LINE__) + 1};

/// `file` (an absolute __FILE__ of this build) relative to the source tree.
std::string sourceRelativePath(const char *file);

/// A node's attributes parsed once, when the node is prepared; kernels read
/// the op's derived struct (OpParams.h) instead of the attribute list.
struct OpParams {
  virtual ~OpParams();
};

/// A parser's result: the parameter struct, or an error naming the node, the
/// op and the attribute whose value is invalid (attributeError, OpParams.h).
using ParsedParams = llvm::Expected<std::unique_ptr<OpParams>>;

/// Parses a node's attributes into its op's parameter struct, checking every
/// value that can be checked without shapes (Executor::create reports a
/// failure before anything runs).
using ParseFn = ParsedParams (*)(const Node &n);

/// One registry row.
struct OpDef {
  const char *opType;
  const char *domain; ///< "" for the default domain
  int64_t minOpset, maxOpset;
  /// Output types from input types (and known values). Null for the ops the
  /// executor runs itself on the host (control flow, sequences, optionals).
  ShapeFn shape;
  CostClass cost;
  /// Which operand, if any, the output may share a buffer with.
  InPlace inPlace = InPlace::None;
  /// Output shapes may depend on input values known only while running
  /// (NonZero, Resize): the graph is shaped as it runs (dynamic mode).
  bool valueDependentShape = false;
  /// Attribute parser (null: the op has no parameter struct yet).
  ParseFn parse = nullptr;
  SourceLocation where;
  /// The shape function's and the parser's names (for `mpc ops --op`).
  const char *shapeName = nullptr;
  const char *parseName = nullptr;
  /// Where the shape function and the parser are defined (file null when
  /// the row has none, or the function is missing from its list).
  SourceLocation shapeWhere, parseWhere;

  /// True for the ops the executor runs itself (no backend kernel).
  bool runByExecutor() const { return shape == nullptr; }
};

/// The opset range upper bound of rows valid for every later opset.
constexpr int64_t kMaxOpsetVersion = 1000;

/// Every row, in registration order.
llvm::ArrayRef<OpDef> opRegistry();

/// The row for an op type/domain ("" or "ai.onnx": default) at `opset`, or null.
const OpDef *findOp(llvm::StringRef opType, llvm::StringRef domain, int64_t opset);
/// The row for a node at its model's opset, or null.
const OpDef *findOp(const Node &n);

/// The operands node `n` may write its output `output` over, element by
/// element (each element of the output written only after the kernel read
/// that element of every operand, on every backend): operands 0 and 1 of an
/// element-wise row (InPlace::Operands; single output), Where's two
/// branches, and a fused optimizer step's param and states (output 0 over
/// param, state output k over state input k; per group in the multi-tensor
/// form; the 16-bit weight copy over none). An operand qualifies only where
/// its dtype and shape are the output's (the caller checks). Used for
/// in-place state updates (Executor::bindOutputOver).
llvm::SmallVector<unsigned, 2> inPlaceOperands(const Node &n, unsigned output);

/// Rows keyed by op type, domain and opset range (registry rows, a
/// backend's kernel rows), indexed by op type once for lookups by node.
template <typename Row> class OpRowIndex {
public:
  explicit OpRowIndex(llvm::ArrayRef<Row> rows) {
    for (const Row &r : rows)
      byType[r.opType].push_back(&r);
  }
  /// The row for an op type/domain ("" or "ai.onnx": default) at `opset`.
  const Row *find(llvm::StringRef opType, llvm::StringRef domain, int64_t opset) const {
    auto it = byType.find(opType);
    if (it == byType.end())
      return nullptr;
    llvm::StringRef dom = domain == "ai.onnx" ? "" : domain;
    for (const Row *r : it->second)
      if (dom == r->domain && opset >= r->minOpset && opset <= r->maxOpset)
        return r;
    return nullptr;
  }

private:
  llvm::StringMap<llvm::SmallVector<const Row *, 2>> byType;
};

/// "data", "elementwise", "reduction", "window", "gemm".
llvm::StringRef costClassName(CostClass c);
/// "none", "operands", "where-branches", "data".
llvm::StringRef inPlaceName(InPlace p);

} // namespace mpc

#endif // MPC_RUNTIME_OPREGISTRY_H
