//===- ShapeHelpers.h - Helpers of the registry's shape functions -*- C++ -*-===//
//
// Attribute and axis helpers the shape functions (runtime/ops/shapes) use,
// and the pieces of shape logic that a backend's run functions repeat on the
// same node (Slice bounds, Transpose's permutation, Shape's range). Backend
// neutral: nothing here touches a device or a kernel. Private to runtime/ops
// and the backends.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPS_SHAPEHELPERS_H
#define MPC_RUNTIME_OPS_SHAPEHELPERS_H

#include "mpc/Runtime/OpRegistry.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mpc {
namespace shapes {

/// "node 'x' (Op): <msg>" as an InputError.
llvm::Error nodeError(const Node &n, const llvm::Twine &msg);
/// "node 'x' (Op): <what> must be known before running<more>" as an
/// UnknownOperandError: an operand that decides the output shapes is not
/// known while planning.
llvm::Error unknownOperand(const Node &n, const llvm::Twine &what,
                           llvm::StringRef more = "");
/// The ints of an attribute, or `dflt`.
std::vector<int64_t> intsAttr(const Node &n, llvm::StringRef name,
                              std::vector<int64_t> dflt = {});
/// Normalizes a possibly negative axis against `rank`; false when out of range.
bool normalizeAxis(int64_t &axis, int64_t rank);
/// The tensor shapes a list operand (axes, a target shape, pads) may have.
/// ONNX makes each a 1-D tensor; onnxruntime and ONNX's shape inference also
/// take a scalar for Unsqueeze's axes and a [1, n] row for Pad's pads. Any:
/// mpc's own training ops, whose operands its passes make.
enum class ListForm : uint8_t { Vector, VectorOrScalar, VectorOrRow, Any };
/// Integer values of a known input (i32/i64), or an error naming the node:
/// an UnknownOperandError while the value is not known, a plain one for a
/// tensor of another shape than `form` allows.
llvm::Expected<std::vector<int64_t>> knownInts(const ShapeQuery &q, unsigned i,
                                               llvm::StringRef what,
                                               ListForm form = ListForm::Vector);
/// The numpy broadcast of two shapes, or false when a pair of dimensions is
/// neither equal nor 1. A 0-sized dimension broadcasts with 1 to 0. With
/// `estimate` (ShapeQuery::estimate), a disagreeing pair takes the larger.
bool broadcastShapes(llvm::ArrayRef<int64_t> aShape, llvm::ArrayRef<int64_t> bShape,
                     llvm::SmallVectorImpl<int64_t> &outShape, bool estimate = false);
/// f32, f16, bf16 or f64: the floating-point types the kernels compute in.
bool isFloatType(DType t);
/// BiasGrad's output type for a dY of type `dy`: dY's, or float32 where its
/// `to` attribute asks for it and dY is float16 or bfloat16 (a widening Cast
/// folded into the reduction); any other `to` is an error naming the node.
llvm::Expected<DType> biasGradOutputType(const Node &n, DType dy);
/// Errors unless input `i` is a float tensor (f32, f16, bf16, f64).
llvm::Error requireFloat(const ShapeQuery &q, unsigned i, llvm::StringRef what);
/// Errors unless inputs `a` and `b` have one shape.
llvm::Error requireSameShape(const ShapeQuery &q, unsigned a, unsigned b);
/// Product of the dims (1 for a scalar), saturating at INT64_MAX.
int64_t numel(llvm::ArrayRef<int64_t> shape);
/// a * b for sizes (a, b >= 0), saturating at INT64_MAX: a size that large
/// fails every allocation check instead of wrapping to a small one.
int64_t mulSat(int64_t a, int64_t b);
/// [outer, axisDim, inner] element counts around `axis` of `shape`.
void splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis, int64_t &outer, int64_t &axisDim,
             int64_t &inner);

/// Slice parameters resolved against the input shape: per axis the first
/// index read, the step and the output extent (axes not sliced: 0, 1, dim).
struct SliceParams {
  std::vector<int64_t> starts, steps, outShape;
};
/// Resolves Slice's starts/ends/axes/steps (empty axes/steps: defaults)
/// against shape `x` as the Slice kernel does (shared with SliceGrad).
llvm::Expected<SliceParams> sliceParams(const Node &n, llvm::ArrayRef<int64_t> x,
                                        std::vector<int64_t> starts, std::vector<int64_t> ends,
                                        std::vector<int64_t> axes, std::vector<int64_t> steps);
/// Transpose's permutation (`perm`, or the axes reversed) for `rank`.
std::vector<int64_t> transposePerm(const Node &n, size_t rank);
/// The [start, end) dims Shape reports (opset 15 start/end) of a `rank` input.
void shapeOpRange(const Node &n, int64_t rank, int64_t &start, int64_t &end);
/// A parsed Einsum equation: the labels of each operand and of the output
/// ('...' becomes right-aligned labels '0'..'9'), and the size of every label.
struct EinsumPlan {
  std::vector<std::string> operands;
  std::string output;
  std::map<char, int64_t> sizes;
};
/// Parses node `n`'s equation (EinsumParams::equation: spaces removed)
/// against its input shapes.
llvm::Expected<EinsumPlan> einsumPlan(const Node &n, llvm::StringRef equation,
                                      llvm::ArrayRef<std::vector<int64_t>> shapes);

/// 2 for a bidirectional LSTM/GRU/RNN, else 1.
int64_t numDirections(const Node &n);
/// Refuses the LSTM attributes mpc does not implement (layout 1, clip,
/// input_forget, activations other than the defaults).
llvm::Error checkLstmAttrs(const Node &n);
/// RMSNormalization's first normalized axis (X's dims from it on).
llvm::Expected<int64_t> rmsAxis(const Node &n, llvm::ArrayRef<int64_t> x);
/// MatMul's output shape (numpy matmul: 1-D operands promoted and dropped,
/// batch dims broadcast), or false when the operands do not multiply.
bool matmulShape(llvm::ArrayRef<int64_t> aShape, llvm::ArrayRef<int64_t> bShape,
                 llvm::SmallVectorImpl<int64_t> &outShape);
/// A reduction's output shape over `axes` (empty: all), or false for an axis
/// out of range or repeated.
bool reduceOutputShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> axes,
                       bool keepDims, llvm::SmallVectorImpl<int64_t> &outShape);
/// A reduction's sorted, normalized axes: the attribute, or the values of
/// input 1 (`axesValue`, which must be known when `hasAxesInput`); all axes
/// when empty unless noop_with_empty_axes.
llvm::Expected<std::vector<int64_t>> reduceAxes(const Node &n, size_t rank,
                                                const HostTensor *axesValue, bool hasAxesInput);
/// The same from already-parsed attributes (`attrAxes`, `noopWithEmptyAxes`:
/// the kernel's ReduceParams); `n` names the node in errors. The one place the
/// rule lives: the shape function and the CPU kernel both call it.
llvm::Expected<std::vector<int64_t>> reduceAxes(const Node &n, std::vector<int64_t> attrAxes,
                                                bool noopWithEmptyAxes, size_t rank,
                                                const HostTensor *axesValue, bool hasAxesInput);
/// The tensor of a Constant node's value attribute (value, value_float(s),
/// value_int(s)).
llvm::Expected<HostTensor> constantValue(const Node &n);
/// ConstantOfShape's fill element (the value attribute, else f32 0).
llvm::Expected<HostTensor> fillValue(const Node &n);
/// BatchNormalization in training mode (opset 14+, training_mode = 1).
bool isTrainingBatchNorm(const Node &n);

} // namespace shapes
} // namespace mpc

#endif // MPC_RUNTIME_OPS_SHAPEHELPERS_H
