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

std::vector<LaunchSlice> mpc::cuda::sliceLaunches(const UnscalePlan &plan, int32_t tensors,
                                                  int32_t perTensor, int32_t maxPointers) {
  if (perTensor < 1 || perTensor > maxPointers || tensors < 0)
    return {};
  const int32_t perLaunch = maxPointers / perTensor;
  std::vector<LaunchSlice> out;
  size_t c = 0;
  for (int32_t first = 0; first < tensors; first += perLaunch) {
    LaunchSlice s;
    s.firstTensor = first;
    s.tensors = std::min(perLaunch, tensors - first);
    s.firstChunk = int32_t(c);
    int32_t previous = first;
    while (c < plan.chunks.size() && plan.chunks[c].tensor < first + s.tensors) {
      if (plan.chunks[c].tensor < previous)
        return {}; // outside the run, or out of order
      previous = plan.chunks[c].tensor;
      ++c;
    }
    s.chunks = int32_t(c) - s.firstChunk;
    if (s.chunks > 0)
      out.push_back(s);
  }
  if (c != plan.chunks.size())
    return {}; // a chunk of a tensor at or beyond `tensors`
  return out;
}

LaunchPointers mpc::cuda::launchPointers(const std::vector<void *> &table,
                                         const LaunchSlice &slice, int32_t perTensor) {
  LaunchPointers p = {};
  size_t begin = size_t(slice.firstTensor) * size_t(perTensor);
  size_t count = size_t(slice.tensors) * size_t(perTensor);
  for (size_t i = 0; i < count && i < size_t(kLaunchPointers) && begin + i < table.size(); ++i)
    p.p[i] = table[begin + i];
  return p;
}
