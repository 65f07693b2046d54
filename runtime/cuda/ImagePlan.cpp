//===- ImagePlan.cpp - Launch plans of the image launchers ------------------===//
//
// See ImagePlan.h. Host code, no CUDA header (mpc_cuda_plan).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Cuda/ImagePlan.h"

#include <algorithm>

using namespace mpc;
using namespace mpc::cuda;

bool cuda::planPadMap(const std::vector<int64_t> &in, const std::vector<int64_t> &begin,
                      const std::vector<int64_t> &end, int32_t mode, PadMap &out) {
  size_t rank = in.size();
  if (mode == kernels::kPadConstant || rank > size_t(kMaxPadRank) || begin.size() != rank ||
      end.size() != rank)
    return false;
  out = PadMap();
  out.rank = int32_t(rank);
  out.mode = mode;
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    int64_t o = in[d] + begin[d] + end[d];
    int64_t lo, kept, shift;
    kernels::padKeptAxis(in[d], begin[d], end[d], &lo, &kept, &shift);
    if (o < 0 || (kept <= 0 && o > 0))
      return false;
    out.outDims[d] = o;
    out.inDims[d] = kept;
    out.inStrides[d] = stride;
    out.begin[d] = shift;
    out.base += lo * stride;
    stride *= in[d];
  }
  return true;
}

ResizePasses cuda::planResizePasses(const std::vector<int64_t> &shape,
                                    const std::vector<kernels::ResizeAxis> &axes) {
  ResizePasses r;
  std::vector<int64_t> cur = shape;
  for (size_t d = 0; d < cur.size() && d < axes.size(); ++d) {
    if (kernels::resizeIdentity(axes[d]))
      continue;
    ResizePass p;
    p.axis = axes[d];
    for (size_t e = 0; e < d; ++e)
      p.outer *= cur[e];
    for (size_t e = d + 1; e < cur.size(); ++e)
      p.inner *= cur[e];
    cur[d] = axes[d].outLen;
    r.passes.push_back(p);
  }
  for (size_t i = 0; i + 1 < r.passes.size(); ++i)
    r.bufferElements = std::max(r.bufferElements, r.passes[i].outElements());
  return r;
}
