//===- NmsSelect.h - NonMaxSuppression's selection --------------*- C++ -*-===//
//
// ONNX NonMaxSuppression, once for the shape function (runtime/ops: the
// number of boxes selected is the output's length, known only from the
// values) and the CPU kernel (runtime/cpu/DataKernels.cpp, which writes the
// triples); host code (runtime/kernels holds device-safe bodies only). Per batch entry and class: the boxes whose score is above
// score_threshold (all of them without one) in order of falling score, the
// lower box index first among equal scores, are taken greedily; a box is
// dropped when its intersection over union with a box already taken in that
// class is above iou_threshold, and the class stops at
// max_output_boxes_per_class boxes. The arithmetic is the boxes' own (f32),
// in the order onnxruntime and onnx.reference use, so that a box at the
// threshold falls the same way: with center_point_box = 1 a box is
// (x_center, y_center, width, height) and its edges are centre -/+ half the
// size; with 0 it is two opposite corners (y1, x1, y2, x2) in either order.
// A box of no area overlaps nothing. A NaN score ranks below every number
// (and is never above a threshold).
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_NMSSELECT_H
#define MPC_RUNTIME_NMSSELECT_H

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace mpc {
namespace kernels {

struct NmsOptions {
  int64_t maxPerClass = 0;
  float iouThreshold = 0;
  bool hasScoreThreshold = false;
  float scoreThreshold = 0;
  bool centerPointBox = false;
};

/// Reads the optional scalar inputs (null, or `n` elements: none means the
/// input is absent, one is its value) and center_point_box into `o`; null,
/// or what is wrong (as onnxruntime refuses it).
inline const char *nmsReadOptions(const int64_t *maxOut, int64_t maxOutN, const float *iou,
                                  int64_t iouN, const float *score, int64_t scoreN,
                                  int64_t centerPointBox, NmsOptions &o) {
  if (centerPointBox != 0 && centerPointBox != 1)
    return "center_point_box must be 0 or 1";
  if ((maxOut && maxOutN > 1) || (iou && iouN > 1) || (score && scoreN > 1))
    return "max_output_boxes_per_class, iou_threshold and score_threshold hold one value each";
  o = NmsOptions();
  o.centerPointBox = centerPointBox == 1;
  if (maxOut && maxOutN == 1)
    o.maxPerClass = std::max<int64_t>(maxOut[0], 0);
  if (iou && iouN == 1) {
    o.iouThreshold = iou[0];
    if (!(o.iouThreshold >= 0 && o.iouThreshold <= 1))
      return "iou_threshold must be within [0, 1]";
  }
  if (score && scoreN == 1) {
    o.hasScoreThreshold = true;
    o.scoreThreshold = score[0];
  }
  return nullptr;
}

/// The extent of a box along one axis: [lo, hi].
struct NmsSpan {
  float lo, hi;
};

/// Box `b` (4 values) as spans along x and y.
inline void nmsSpans(const float *b, bool center, NmsSpan &x, NmsSpan &y) {
  if (center) {
    float hw = b[2] / 2, hh = b[3] / 2;
    x = {b[0] - hw, b[0] + hw};
    y = {b[1] - hh, b[1] + hh};
    return;
  }
  x = {std::min(b[1], b[3]), std::max(b[1], b[3])};
  y = {std::min(b[0], b[2]), std::max(b[0], b[2])};
}

/// True when box a suppresses box b (or b a: the test is symmetric).
inline bool nmsOverlaps(const float *a, const float *b, bool center, float iouThreshold) {
  NmsSpan ax, ay, bx, by;
  nmsSpans(a, center, ax, ay);
  nmsSpans(b, center, bx, by);
  float x0 = std::max(ax.lo, bx.lo), x1 = std::min(ax.hi, bx.hi);
  if (!(x1 > x0))
    return false;
  float y0 = std::max(ay.lo, by.lo), y1 = std::min(ay.hi, by.hi);
  if (!(y1 > y0))
    return false;
  float inter = (x1 - x0) * (y1 - y0);
  if (!(inter > 0))
    return false;
  float areaA = (ax.hi - ax.lo) * (ay.hi - ay.lo);
  float areaB = (bx.hi - bx.lo) * (by.hi - by.lo);
  float uni = areaA + areaB - inter;
  if (!(areaA > 0) || !(areaB > 0) || !(uni > 0))
    return false;
  return inter / uni > iouThreshold;
}

/// Runs the selection over boxes [batches, count, 4] and scores
/// [batches, classes, count]; appends (batch, class, box) triples to `out`
/// (batch-major, then class, then the order of selection). Returns the
/// number of triples appended.
inline int64_t nmsSelect(const float *boxes, const float *scores, int64_t batches,
                         int64_t classes, int64_t count, const NmsOptions &o,
                         std::vector<int64_t> &out) {
  int64_t added = 0;
  if (o.maxPerClass <= 0)
    return 0;
  std::vector<int64_t> order, taken;
  for (int64_t b = 0; b < batches; ++b) {
    const float *bb = boxes + b * count * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float *sc = scores + (b * classes + c) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i)
        if (o.hasScoreThreshold ? sc[i] > o.scoreThreshold : true)
          order.push_back(i);
      // Falling score, NaN last; the stable sort keeps equal scores in
      // index order.
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
        float si = sc[i], sj = sc[j];
        if (si != si || sj != sj)
          return sj != sj && si == si;
        return si > sj;
      });
      taken.clear();
      for (int64_t i : order) {
        if (int64_t(taken.size()) >= o.maxPerClass)
          break;
        bool keep = true;
        for (int64_t t : taken)
          if (nmsOverlaps(bb + t * 4, bb + i * 4, o.centerPointBox, o.iouThreshold)) {
            keep = false;
            break;
          }
        if (!keep)
          continue;
        taken.push_back(i);
        out.insert(out.end(), {b, c, i});
        ++added;
      }
    }
  }
  return added;
}

} // namespace kernels
} // namespace mpc

#endif // MPC_RUNTIME_NMSSELECT_H
