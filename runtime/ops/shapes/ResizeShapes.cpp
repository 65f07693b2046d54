//===- ResizeShapes.cpp - Registry shape functions --------------------------===//
//
// Registry shape function (runtime/ops/ShapeFunctions.h) of Resize, and the
// output-size rules (NodeGeometry.h) its kernels share (the attributes are
// parsed by resizeParamsOf, OpParams.cpp):
// the output shape depends on the scales/sizes values, so the row is
// dynamic-shape and a kernel plans the same resize again while running.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../NodeGeometry.h"
#include "../ShapeFunctions.h"
#include "../ShapeHelpers.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <cstdio>

using namespace mpc;
using namespace mpc::shapes;
using namespace mpc::shapes::resizing;

llvm::Expected<ResizePlan> shapes::resizing::planResize(const Node &n, const ResizeParams &a,
                                               llvm::ArrayRef<int64_t> x,
                                               const ResizeOperands &ops) {
  size_t rank = x.size();
  std::vector<int64_t> axes = a.axes;
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i)
      axes.push_back(i);
  std::vector<bool> seen(rank, false);
  for (int64_t &ax : axes) {
    if (!normalizeAxis(ax, rank) || seen[ax])
      return nodeError(n, "axes are out of range or repeated for " + formatShape(x));
    seen[ax] = true;
  }
  size_t count = axes.size();
  if (ops.scales.empty() == ops.sizes.empty())
    return nodeError(n, "needs exactly one of scales and sizes");
  size_t given = ops.scales.empty() ? ops.sizes.size() : ops.scales.size();
  if (given != count)
    return nodeError(n, (ops.scales.empty() ? "sizes" : "scales") + llvm::Twine(" has ") +
                            llvm::Twine(given) + " values for " + llvm::Twine(count) +
                            " axes");
  ResizePlan p;
  p.outShape.assign(x.begin(), x.end());
  p.scales.assign(rank, 1.0);
  p.roiStart.assign(rank, 0.0);
  p.roiEnd.assign(rank, 1.0);
  if (a.coord == Coord::TfCropAndResize) {
    if (ops.roi.size() != 2 * count)
      return nodeError(n, "tf_crop_and_resize needs a roi of " + llvm::Twine(2 * count) +
                              " values");
    // A NaN or infinite roi makes every sample's coordinate NaN (the result
    // is the extrapolation value, or whatever a kernel makes of it).
    for (size_t i = 0; i < ops.roi.size(); ++i)
      if (!std::isfinite(ops.roi[i]))
        return nodeError(n, "roi value " + llvm::Twine(i) + " is " +
                                (std::isnan(ops.roi[i]) ? "NaN" : "infinite") +
                                "; tf_crop_and_resize needs finite coordinates");
    for (size_t i = 0; i < count; ++i) {
      p.roiStart[axes[i]] = ops.roi[i];
      p.roiEnd[axes[i]] = ops.roi[count + i];
    }
  }
  if (!ops.scales.empty()) {
    for (size_t i = 0; i < count; ++i) {
      double s = ops.scales[i];
      if (!(s > 0))
        return nodeError(n, "scales must be positive");
      p.scales[axes[i]] = s;
      // An infinite or huge scale gives a size past int64 (converting it was
      // undefined behaviour); the allocation check refuses large ones.
      double size = std::floor(s * double(x[axes[i]]));
      if (!(size < 0x1p62))
        return nodeError(n, "scale " + llvm::formatv("{0}", s) + " makes axis " +
                                llvm::Twine(axes[i]) + " too long");
      p.outShape[axes[i]] = int64_t(size);
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      if (ops.sizes[i] < 0)
        return nodeError(n, "negative value in sizes");
      if (x[axes[i]] == 0)
        return nodeError(n, "cannot resize an empty axis to a size");
      p.scales[axes[i]] = double(ops.sizes[i]) / double(x[axes[i]]);
      p.outShape[axes[i]] = ops.sizes[i];
    }
    if (a.policy != AspectPolicy::Stretch) {
      double s = p.scales[axes[0]];
      for (int64_t ax : axes)
        s = a.policy == AspectPolicy::NotLarger ? std::min(s, p.scales[ax])
                                                : std::max(s, p.scales[ax]);
      for (int64_t ax : axes) {
        p.scales[ax] = s;
        p.outShape[ax] = int64_t(s * double(x[ax]) + 0.5); // round half up
      }
    }
  }
  for (size_t d = 0; d < rank; ++d)
    if (x[d] == 0 && p.outShape[d] > 0)
      return nodeError(n, "cannot resize an empty axis");
  return p;
}

static bool isUpsample7(const Node &n) {
  return n.opType == "Upsample" && n.domain.empty() && n.opsetVersion() < 9;
}

std::vector<double> shapes::resizing::attributeScales(const Node &n) {
  std::vector<double> out;
  if (const Attribute *a = isUpsample7(n) ? n.attr("scales") : nullptr)
    out.assign(a->floats.begin(), a->floats.end());
  return out;
}

void shapes::resizing::operandIndices(const Node &n, int &roi, int &scales, int &sizes) {
  if (isUpsample7(n)) {
    roi = scales = sizes = -1;
  } else if (n.opsetVersion() < 11) {
    roi = sizes = -1;
    scales = 1;
  } else {
    roi = 1;
    scales = 2;
    sizes = 3;
  }
}

MPC_DEFINED_BELOW(shapes::shapeResize)
llvm::Error shapes::shapeResize(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto a = resizeParamsOf(q.node);
  if (!a)
    return a.takeError();
  int idx[3];
  operandIndices(q.node, idx[0], idx[1], idx[2]);
  ResizeOperands ops;
  for (int op = 0; op < 3; ++op) {
    int i = idx[op];
    if (i < 0 || size_t(i) >= q.inputs.size() || q.inputs[i].dtype == DType::Undefined ||
        numel(q.inputs[i].shape) == 0)
      continue;
    if (op == 0 && a->coord != Coord::TfCropAndResize)
      continue; // roi only matters for tf_crop_and_resize
    const char *what = op == 0 ? "roi" : op == 1 ? "scales" : "sizes";
    // A [1, 2] sizes was read as its two values (onnxruntime refuses it).
    if (q.inputs[i].shape.size() != 1)
      return nodeError(q.node, llvm::Twine(what) + " is " + formatShape(q.inputs[i].shape) +
                                   "; it must be a 1-D tensor");
    const HostTensor *t = q.values[i];
    if (!t)
      return unknownOperand(q.node, what);
    for (int64_t e = 0; e < t->numElements(); ++e) {
      if (op == 0)
        ops.roi.push_back(t->getAsDouble(e));
      else if (op == 1)
        ops.scales.push_back(t->getAsDouble(e));
      else
        ops.sizes.push_back(t->getAsInt64(e));
    }
  }
  if (isUpsample7(q.node))
    ops.scales = attributeScales(q.node);
  if (q.node.opType == "Upsample")
    for (double s : ops.scales)
      if (!(s >= 1)) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", s);
        return nodeError(q.node, "scales must be 1 or more (Upsample enlarges), not " +
                                     llvm::Twine(text));
      }
  auto p = planResize(q.node, *a, q.inputs[0].shape, ops);
  if (!p)
    return p.takeError();
  out.assign(1, ShapedType{q.inputs[0].dtype, p->outShape});
  return llvm::Error::success();
}

// The shared bodies' codes are the attribute enums' values.
static_assert(int(Mode::Cubic) == kernels::kResizeCubic &&
                  int(Mode::Linear) == kernels::kResizeLinear &&
                  int(Coord::TfCropAndResize) == kernels::kCoordTfCropAndResize &&
                  int(Coord::AlignCorners) == kernels::kCoordAlignCorners &&
                  int(Nearest::Simple) == kernels::kNearestSimple &&
                  int(Nearest::Ceil) == kernels::kNearestCeil,
              "ImageBodies.h's Resize codes follow mpc::resizing");

kernels::ResizeAxis shapes::resizing::resizeAxisOf(const ResizeParams &a, const ResizePlan &p,
                                                   llvm::ArrayRef<int64_t> x, size_t d) {
  return kernels::makeResizeAxis(int32_t(a.mode), int32_t(a.coord), int32_t(a.nearest),
                                 a.excludeOutside, a.antialias, a.cubicA, p.scales[d],
                                 p.roiStart[d], p.roiEnd[d], x[d], p.outShape[d]);
}
