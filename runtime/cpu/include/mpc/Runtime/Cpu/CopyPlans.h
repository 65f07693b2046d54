//===- CopyPlans.h - Strided-copy plans of the data-movement ops -*- C++ -*-===//
//
// Builds, once per shape, the CopyPlan (mpc/Runtime/Kernels/CopyPlan.h) of
// each data-movement op, with dimensions of size 1 dropped and adjacent
// dimensions merged wherever both sides stay linear, so most copies become
// one or two dimensions with a unit inner stride. The CPU kernels and the
// CUDA launchers run the same plans (copyByPlan here, a grid-stride kernel
// there). A builder returns false when the collapsed plan has more than
// kMaxCopyRank dimensions (the op then runs elsewhere or is refused).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_COPYPLANS_H
#define MPC_RUNTIME_CPU_COPYPLANS_H

#include "mpc/Runtime/Kernels/CopyPlan.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpc {
namespace kernels {

/// Row-major element strides of a dense shape.
std::vector<int64_t> denseStrides(llvm::ArrayRef<int64_t> shape);

/// The plan over `dims` with these strides and bases, collapsed. False when
/// it still has more than kMaxCopyRank dimensions.
bool makeCopyPlan(llvm::ArrayRef<int64_t> dims, llvm::ArrayRef<int64_t> srcStrides,
                  llvm::ArrayRef<int64_t> dstStrides, int64_t srcBase, int64_t dstBase,
                  CopyPlan &out);

/// Source and destination exchanged (Split from Concat's plan, SliceGrad's
/// scatter from Slice's gather).
void swapCopySides(CopyPlan &p);

/// Transpose: dense `in` to dense output dims in[perm[k]] (perm a
/// permutation of 0..rank-1).
bool transposePlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> perm, CopyPlan &out);

/// Slice: output element (i_k) reads in at starts[k] + i_k * steps[k] (steps
/// may be negative); the output is dense of `outShape`.
bool slicePlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> starts,
               llvm::ArrayRef<int64_t> steps, llvm::ArrayRef<int64_t> outShape, CopyPlan &out);

/// Expand (and every numpy broadcast of one operand): dense `in` read with
/// stride 0 along its size-1 (and missing leading) axes into dense `outShape`.
bool expandPlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> outShape, CopyPlan &out);

/// Concat: dense `part` written into dense `whole` at `offset` along `axis`
/// (the other axes equal). Split is the same plan with sides swapped.
bool concatPlan(llvm::ArrayRef<int64_t> part, llvm::ArrayRef<int64_t> whole, int64_t axis,
                int64_t offset, CopyPlan &out);

/// Tile: output element (j_k) reads in at (j_k mod in[k]); `outShape` is a
/// whole multiple of `in` per axis. Each axis becomes a repeat and a
/// position dimension.
bool tilePlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> outShape, CopyPlan &out);

/// Constant Pad's copied part: output element (j_k) reads in at
/// j_k - begin[k] where that lies inside `in` (negative pads crop). The rest
/// of the output is the pad value, written separately.
bool padInteriorPlan(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> outShape,
                     llvm::ArrayRef<int64_t> begin, CopyPlan &out);

/// Where: condition `c`, values `x` and `y` broadcast to `outShape`.
bool selectPlan(llvm::ArrayRef<int64_t> c, llvm::ArrayRef<int64_t> x,
                llvm::ArrayRef<int64_t> y, llvm::ArrayRef<int64_t> outShape, SelectPlan &out);

/// Sum, Mean: the operands' shapes broadcast to `outShape`; false for more
/// than kMaxNaryInputs operands or too many dimensions.
bool naryPlan(llvm::ArrayRef<std::vector<int64_t>> shapes, llvm::ArrayRef<int64_t> outShape,
              NaryPlan &out);

/// Sum, Mean of any number of operands: consecutive runs of at most
/// kMaxNaryInputs of them, each with its plan against `outShape`
/// (naryContinue adds one run to the sum of those before it); false where
/// naryPlan is for a run, or for no operand.
bool naryRuns(llvm::ArrayRef<std::vector<int64_t>> shapes, llvm::ArrayRef<int64_t> outShape,
              std::vector<NaryPlan> &out);

/// Gather of `count` indices along `axis` (non-negative) of `data`.
GatherPlan gatherPlan(llvm::ArrayRef<int64_t> data, int64_t axis, int64_t count);

/// Runs a plan on the host for elements of `elementBytes` bytes: one
/// copyOffsets per innermost row, the row itself a strided loop (a memcpy
/// when both sides are unit-stride).
void copyByPlan(const CopyPlan &p, const void *src, void *dst, size_t elementBytes);

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_CPU_COPYPLANS_H
