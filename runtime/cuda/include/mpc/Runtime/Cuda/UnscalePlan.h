//===- UnscalePlan.h - Chunk table of the multi-tensor unscale --*- C++ -*-===//
//
// ai.mpc.training MultiTensorUnscale on CUDA (UnscaleOps.cpp) is one launch
// over every gradient: block b takes chunks b, b + gridDim, ... of a table
// made here at prepare time and uploaded once. A chunk is a run of at most
// `chunkElements` elements of one gradient, so a block never straddles two
// tensors (one dtype, one pointer, one flag per chunk) and many small
// gradients share one launch. Chunks follow the gradients' order, and each
// gradient's chunks its elements' order; a chunk starts at a multiple of
// `chunkElements` (a multiple of kUnscaleAlign), so its first element is
// 16-byte aligned when the tensor is. An empty gradient has no chunk (its
// flag stays 0). Pure functions of the shapes (no CUDA header), tested in
// tests/cuda_host.
//
// The tensors' device pointers travel by value, as a kernel parameter
// (LaunchPointers), never through a device table: a CUDA graph captures a
// kernel's parameters, so a replay reads the pointers of its own capture,
// while a table uploaded from host memory would be read by the replay from
// wherever that host memory is then (a training step's state buffers
// alternate between two sets of addresses, each with its own graph).
// CUDA 12.1 and later take up to 32,764 bytes of parameters on Volta and
// newer; a node with more tensors than one launch's LaunchPointers holds is
// several launches (sliceLaunches), each over its tensors' chunks.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_UNSCALEPLAN_H
#define MPC_RUNTIME_CUDA_UNSCALEPLAN_H

#include "mpc/Runtime/Kernels/HostDevice.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// One entry of the device table: elements [begin, begin + length) of
/// gradient `tensor` (its index among the node's gradients), of ONNX type
/// `type` (f32, f16 or bf16). 24 bytes, no padding, as the device reads it.
struct UnscaleChunk {
  int64_t begin = 0;
  int32_t length = 0;
  int32_t tensor = 0;
  int32_t type = 0;
  int32_t pad = 0;
};
static_assert(sizeof(UnscaleChunk) == 24, "the device reads 24-byte entries");

/// Chunk starts are multiples of this many elements (16 bytes of f16/bf16).
constexpr int64_t kUnscaleAlign = 8;
/// Elements per chunk by default: 16 per thread of a 256-thread block.
constexpr int64_t kUnscaleChunkElements = 4096;

struct UnscalePlan {
  std::vector<UnscaleChunk> chunks;
  /// Blocks of the launch: min(chunks, smCount * kBlocksPerSM), at least 1
  /// when there is a chunk, 0 when there is none.
  unsigned blocks = 0;
  unsigned threads = 256;
};

/// The chunk table of gradients of `sizes` elements and ONNX types `types`
/// (the same length). False (and `out` empty) when a size is negative, a
/// type is not f32/f16/bf16, `chunkElements` is not a positive multiple of
/// kUnscaleAlign below 2^31, there are more than 2^31 - 1 gradients, or the
/// table would exceed 2^31 - 1 chunks.
bool planUnscale(const std::vector<int64_t> &sizes, const std::vector<int32_t> &types,
                 unsigned smCount, UnscalePlan &out,
                 int64_t chunkElements = kUnscaleChunkElements);

/// Device pointers one launch takes by value: 24 KiB of the 32,764 bytes
/// of kernel parameters, the rest left for the launch's other arguments.
constexpr int32_t kLaunchPointers = 3072;
struct LaunchPointers {
  void *p[kLaunchPointers];
};
static_assert(sizeof(LaunchPointers) <= 24 * 1024, "kernel parameters are at most 32,764 bytes");

/// Pointers per tensor of MultiTensorUnscale's launch: the gradient, then
/// its fp32 output (null: none).
constexpr int32_t kUnscaleSlots = 2;

/// One launch of a multi-tensor node: tensors [firstTensor, firstTensor +
/// tensors) and their chunks [firstChunk, firstChunk + chunks) of the plan.
struct LaunchSlice {
  int32_t firstTensor = 0;
  int32_t tensors = 0;
  int32_t firstChunk = 0;
  int32_t chunks = 0;
};

/// The launches over `plan`'s chunks of `tensors` tensors that take
/// `perTensor` pointers each: runs of consecutive tensors, at most
/// `maxPointers / perTensor` to a run, in order; a run with no chunk (only
/// empty tensors) is left out. Empty when perTensor is not in
/// [1, maxPointers] or a chunk names a tensor outside [0, tensors) or out
/// of order.
std::vector<LaunchSlice> sliceLaunches(const UnscalePlan &plan, int32_t tensors,
                                       int32_t perTensor,
                                       int32_t maxPointers = kLaunchPointers);

/// The parameter of `slice`'s launch: entries [firstTensor * perTensor,
/// (firstTensor + tensors) * perTensor) of `table` (perTensor pointers per
/// tensor, in the tensors' order), the rest null.
LaunchPointers launchPointers(const std::vector<void *> &table, const LaunchSlice &slice,
                              int32_t perTensor);

/// The pointers of chunk `ch`'s tensor in its launch's parameter.
MPC_HD inline void *const *chunkPointers(const LaunchPointers &p, const UnscaleChunk &ch,
                                         int32_t firstTensor, int32_t perTensor) {
  return &p.p[(ch.tensor - firstTensor) * perTensor];
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_UNSCALEPLAN_H
