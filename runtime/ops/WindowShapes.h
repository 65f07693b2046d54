//===- WindowShapes.h - Window geometry of Conv and pooling nodes -*- C++ -*-===//
//
// The geometry of a Conv, ConvTranspose, pooling node or of their gradients
// (ai.mpc.training ConvGrad, MaxPoolGrad, AveragePoolGrad), resolved from the
// parsed attributes (WindowParams) and the input shapes, with the error a
// mismatch gives naming the node. The registry's shape functions
// (shapes/WindowShapes.cpp) and the backends' run functions both call these,
// so an output shape and the loops that fill it come from one definition.
// Private to runtime/ops and the backends.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_OPS_WINDOWSHAPES_H
#define MPC_RUNTIME_OPS_WINDOWSHAPES_H

#include "mpc/IR/Graph.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/WindowGeometry.h"
#include "llvm/Support/Error.h"
#include <cstdint>
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

} // namespace shapes
} // namespace mpc

#endif // MPC_RUNTIME_OPS_WINDOWSHAPES_H
