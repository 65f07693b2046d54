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
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_UNSCALEPLAN_H
#define MPC_RUNTIME_CUDA_UNSCALEPLAN_H

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

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_UNSCALEPLAN_H
