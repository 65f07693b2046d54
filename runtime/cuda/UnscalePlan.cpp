//===- UnscalePlan.cpp - Chunk table of the multi-tensor unscale ----------===//
//
// See UnscalePlan.h.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/UnscalePlan.h"
#include "mpc/Runtime/Cuda/CudaOps.h"
#include "mpc/Runtime/Cuda/LaunchGeometry.h"
#include <algorithm>
#include <limits>

using namespace mpc::cuda;

bool mpc::cuda::planUnscale(const std::vector<int64_t> &sizes,
                            const std::vector<int32_t> &types, unsigned smCount,
                            UnscalePlan &out, int64_t chunkElements) {
  out = UnscalePlan();
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  if (sizes.size() != types.size() || int64_t(sizes.size()) > kMax32 || chunkElements <= 0 ||
      chunkElements % kUnscaleAlign != 0 || chunkElements > kMax32)
    return false;
  std::vector<UnscaleChunk> chunks;
  for (size_t t = 0; t < sizes.size(); ++t) {
    if (sizes[t] < 0 || (types[t] != kOnnxF32 && types[t] != kOnnxF16 && types[t] != kOnnxBF16))
      return false;
    for (int64_t begin = 0; begin < sizes[t]; begin += chunkElements) {
      if (int64_t(chunks.size()) >= kMax32)
        return false;
      UnscaleChunk c;
      c.begin = begin;
      c.length = int32_t(std::min(chunkElements, sizes[t] - begin));
      c.tensor = int32_t(t);
      c.type = types[t];
      chunks.push_back(c);
    }
  }
  int64_t cap = int64_t(smCount ? smCount : 1) * kBlocksPerSM;
  out.blocks = unsigned(std::min<int64_t>(int64_t(chunks.size()), cap));
  out.threads = kElementwiseBlock;
  out.chunks = std::move(chunks);
  return true;
}
