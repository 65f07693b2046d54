//===- NodeGeometry.h - A node's geometry, shape rules and kernels -*- C++ -*-===//
//
// What a shape function works out about a node that its kernels need again:
// the window geometry of Conv, ConvTranspose, pooling and their gradients, a
// loss's reduction, the ports and sizes of the recurrent gradients, the
// GRU/RNN activations, Pad's mode and amounts, the Attention, RotaryEmbedding
// and FusedMatMul layouts, Resize's attributes and plan. Each is resolved from
// the attributes and the input shapes, with the error a mismatch gives naming
// the node. The registry's shape functions
// (runtime/ops/shapes) and the backends' run functions both call these, so
// an output shape and the loops that fill it come from one definition.
// Private to runtime/ops and the backends.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPS_NODEGEOMETRY_H
#define MPC_RUNTIME_OPS_NODEGEOMETRY_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/OpGeometry.h"
#include "mpc/Runtime/Kernels/ImageBodies.h"
#include "mpc/Runtime/Kernels/RecurrentBodies.h"
#include "mpc/Runtime/Kernels/RotaryBodies.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <utility>
#include <vector>

namespace mpc {
namespace shapes {

/// The auto_pad of parsed window attributes.
AutoPad autoPadOf(const WindowParams &p);
/// Conv's geometry from its attributes and the X and W shapes.
llvm::Expected<ConvGeometry> convGeometry(const Node &n, const WindowParams &p,
                                          llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> w);
/// MaxPool/AveragePool/LpPool's geometry from its attributes and X's shape.
llvm::Expected<PoolGeometry> poolGeometry(const Node &n, const WindowParams &p,
                                          llvm::ArrayRef<int64_t> x);

/// ConvTranspose's geometry: pads resolved from pads, output_shape or
/// auto_pad as the operator spec says; `out` is the spatial output size.
struct DeconvGeometry {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  std::vector<int64_t> in, kernel, strides, dilations, padsBegin, outPad, out;
};
llvm::Expected<DeconvGeometry> deconvGeometry(const Node &n, const WindowParams &p,
                                              llvm::ArrayRef<int64_t> x,
                                              llvm::ArrayRef<int64_t> w);

/// ConvGrad: the forward Conv's geometry, and dY must have its output shape.
llvm::Expected<ConvGeometry> convGradGeometry(const Node &n, const WindowParams &p,
                                              llvm::ArrayRef<int64_t> dy,
                                              llvm::ArrayRef<int64_t> x,
                                              llvm::ArrayRef<int64_t> w);
/// MaxPoolGrad/AveragePoolGrad: the forward pool's geometry on X, and dY must
/// have its output shape.
llvm::Expected<PoolGeometry> poolGradGeometry(const Node &n, const WindowParams &p,
                                              llvm::ArrayRef<int64_t> dy,
                                              llvm::ArrayRef<int64_t> x);

/// A loss's reduction attribute ("none", "sum", "mean"), or an error naming
/// the node for any other value.
llvm::Expected<LossReduction> lossReductionOf(const Node &n, llvm::StringRef reduction);

// LSTMGrad ports: inputs dY, dY_h, dY_c, X, W, R, B, sequence_lens, initial_h,
// initial_c; outputs dX, dW, dR, dB, dinitial_h, dinitial_c.
enum LstmGradPort : unsigned { kDY, kDYh, kDYc, kX, kW, kR, kB, kLens, kH0, kC0 };
// GRUGrad ports: inputs dY, dY_h, X, W, R, B, sequence_lens, initial_h;
// outputs dX, dW, dR, dB, dinitial_h.
enum GruGradPort : unsigned { kGDY, kGDYh, kGX, kGW, kGR, kGB, kGLens, kGH0 };

/// Where a recurrent gradient op keeps its forward inputs, and its gate count.
struct RecurrentGradPorts {
  unsigned dY, x, w, r, b, lens;
  std::vector<unsigned> states; ///< output-state gradients and initial states
  const char *statesWhat;       ///< their names, for messages
  int64_t gates;
};
/// LSTMGrad's and GRUGrad's ports (4 and 3 gate blocks).
extern const RecurrentGradPorts kLstmPorts, kGruPorts;

/// The attributes GRUGrad implements: GRU's defaults but direction,
/// hidden_size and linear_before_reset.
llvm::Error checkGruGradAttrs(const Node &n);
/// The forward recurrence's sizes, after checking the attributes the op
/// implements (`checkAttrs`) and every present input's dtype and shape.
llvm::Expected<LstmShape> recurrentGradShape(const ShapeQuery &q, const RecurrentGradPorts &p,
                                             llvm::Error (*checkAttrs)(const Node &));

/// A recurrent cell's activation function (GRU, RNN) and its alpha/beta:
/// the kernels' own types (RecurrentBodies.h), so a parsed list reaches the
/// CPU loops and the CUDA launchers unchanged.
using ActKind = kernels::RecurrentActKind;
using Activation = kernels::RecurrentActivation;

/// The activations of every direction (perDir each, forward first). A list
/// with only perDir names serves both directions; activation_alpha/beta are
/// consumed in order by the activations that take them.
llvm::Expected<std::vector<Activation>>
parseActivations(const Node &n, const RecurrentParams &p, llvm::ArrayRef<const char *> defaults,
                 int64_t dirs);
/// The default activations of GRU (f, g) and RNN (f).
extern const char *const kGruActs[2];
extern const char *const kRnnActs[1];

/// Pad's mode.
enum class PadMode { Constant, Reflect, Edge, Wrap };
/// The mode named `m`, or an error naming the node.
llvm::Expected<PadMode> padMode(const Node &n, llvm::StringRef m);
/// Per-axis begin/end pads (negative crops), from attributes (opset < 11) or
/// the pads and axes inputs.
llvm::Error padAmounts(const Node &n, llvm::ArrayRef<int64_t> x, std::vector<int64_t> pads,
                       std::vector<int64_t> axes, std::vector<int64_t> &begin,
                       std::vector<int64_t> &end);

/// The layout of one Attention call. `total` is past + kvSeq.
struct AttnLayout {
  int64_t batch = 0, qHeads = 0, kvHeads = 0, qSeq = 0, kvSeq = 0, past = 0, total = 0;
  int64_t headSize = 0, vHeadSize = 0;
  bool threeD = false, hasPast = false;
  /// attn_mask's shape padded on the left to rank 4 (empty when absent).
  std::vector<int64_t> mask;
};

/// Attention's input ports.
enum AttentionPort : unsigned { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonpad };
/// Attention's layout from its parsed attributes and input types, or an
/// error naming the node for inputs that do not fit together.
llvm::Expected<AttnLayout> attnLayout(const Node &n, const AttentionParams &p,
                                      llvm::ArrayRef<ShapedType> ins);

/// The layout of one RotaryEmbedding call.
struct Rotary {
  int64_t batch = 0, seq = 0, heads = 0, headSize = 0, dim = 0;
  bool fourD = false, interleaved = false, hasPositions = false;
};
/// RotaryEmbedding's layout from its parsed attributes and the input and
/// cache shapes (cache [max_position, dim/2] when `hasPositions`).
llvm::Expected<Rotary> rotaryLayout(const Node &n, const RotaryParams &p,
                                    llvm::ArrayRef<int64_t> x,
                                    llvm::ArrayRef<int64_t> cache, bool hasPositions);
/// The shared bodies' view of a layout (Kernels/RotaryBodies.h: the CPU
/// kernel and the CUDA launcher).
inline kernels::RotaryShape rotaryShapeOf(const Rotary &r) {
  kernels::RotaryShape s;
  s.batch = r.batch;
  s.seq = r.seq;
  s.heads = r.heads;
  s.headSize = r.headSize;
  s.dim = r.dim;
  s.fourD = r.fourD;
  s.interleaved = r.interleaved;
  return s;
}

/// Resize's operands and plan (shapes/ResizeShapes.cpp); its attributes
/// are ResizeParams (OpParams.h).
namespace resizing {
using mpc::resizing::AspectPolicy;
using mpc::resizing::Coord;
using mpc::resizing::Mode;
using mpc::resizing::Nearest;

/// The output shape and, per dimension of X, the scale and crop box.
struct ResizePlan {
  std::vector<int64_t> outShape;
  std::vector<double> scales, roiStart, roiEnd;
};

/// The operand values a plan needs (an empty vector is an absent operand).
struct ResizeOperands {
  std::vector<double> roi, scales;
  std::vector<int64_t> sizes;
};

/// The output shape, scales and crop box of X `x` resized by `ops`, or an
/// error naming the node.
llvm::Expected<ResizePlan> planResize(const Node &n, const ResizeParams &a,
                                      llvm::ArrayRef<int64_t> x, const ResizeOperands &ops);
/// Input indices of the operands: opset 10 has (X, scales), 11+ (X, roi,
/// scales, sizes). Upsample-9 and 10 are Resize-10 (X, scales); Upsample-7
/// has no operand but X (scales is an attribute, see attributeScales).
void operandIndices(const Node &n, int &roi, int &scales, int &sizes);
/// Upsample-7's scales attribute (nothing for any other node).
std::vector<double> attributeScales(const Node &n);
/// Axis `d` of X `x` resized by plan `p` in the form of the shared bodies
/// (ImageBodies.h) that the CPU and CUDA kernels run.
kernels::ResizeAxis resizeAxisOf(const ResizeParams &a, const ResizePlan &p,
                                 llvm::ArrayRef<int64_t> x, size_t d);
} // namespace resizing

/// One FusedMatMul operand as the MatMul engine reads it.
struct FusedOperand {
  /// The shape of op(X) as a plain MatMul operand (for matmulShape).
  llvm::SmallVector<int64_t, 6> shape;
  /// Batch dimensions (a prefix of shape, or empty).
  llvm::SmallVector<int64_t, 4> batch;
  int64_t batchStride = 0, ld = 0;
  bool trans = false;
};
/// Both operands of a FusedMatMul with parameters `p` (its transA, transB,
/// transBatchA and transBatchB) for A and B shapes `a` and `b`.
std::pair<FusedOperand, FusedOperand> fusedOperands(const FusedMatMulParams &p,
                                                    llvm::ArrayRef<int64_t> a,
                                                    llvm::ArrayRef<int64_t> b);

} // namespace shapes
} // namespace mpc

#endif // MPC_RUNTIME_OPS_NODEGEOMETRY_H
