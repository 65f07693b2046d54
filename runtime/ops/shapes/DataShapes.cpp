//===- DataShapes.cpp - Registry shape functions ----------------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): shape and data-
// movement ops, fills, layout and N-ary ops.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeHelpers.h"
#include "../ShapeFunctions.h"
#include "../NodeGeometry.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/NmsSelect.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace mpc;
using namespace mpc::shapes;

static llvm::Error checkDropoutInference(const ShapeQuery &q) {
  const Node &n = q.node;
  bool training = false;
  double ratio = 0.5;
  if (n.opsetVersion() < 7) {
    training = n.intAttr("is_test", 0) == 0;
    ratio = n.floatAttr("ratio", 0.5f);
  } else if (n.opsetVersion() < 12) {
    ratio = n.floatAttr("ratio", 0.5f);
  } else {
    if (q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined) {
      if (!q.values[2])
        return unknownOperand(n, "training_mode");
      if (q.values[2]->numElements() != 1)
        return nodeError(n, "training_mode is " + formatShape(q.inputs[2].shape) +
                                "; it must be a scalar");
      training = q.values[2]->getAsDouble(0) != 0;
    }
    if (q.inputs.size() > 1 && q.inputs[1].dtype != DType::Undefined) {
      // Read in inference mode too, to refuse a ratio outside [0, 1).
      if (!q.values[1])
        return unknownOperand(n, "ratio", training ? " in training mode" : "");
      if (q.values[1]->numElements() != 1)
        return nodeError(n, "ratio is " + formatShape(q.inputs[1].shape) +
                                "; it must be a scalar");
      ratio = q.values[1]->getAsDouble(0);
    }
  }
  // ONNX: ratio in [0, 1) (onnxruntime refuses others even in inference mode,
  // where the ratio changes nothing).
  if (!(ratio >= 0 && ratio < 1)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", ratio);
    return nodeError(n, std::string("ratio ") + text + " is outside [0, 1)");
  }
  if (training && ratio != 0)
    return nodeError(n, "training mode with ratio " + std::to_string(ratio) +
                            " draws a random mask; mpc runs Dropout in inference mode "
                            "only (or with ratio 0)");
  return llvm::Error::success();
}

static llvm::Expected<std::vector<int64_t>> splitSizes(const ShapeQuery &q, int64_t dim) {
  const Node &n = q.node;
  unsigned outs = n.numOutputs();
  std::vector<int64_t> sizes;
  if (q.inputs.size() > 1 && q.inputs[1].dtype != DType::Undefined) {
    auto s = knownInts(q, 1, "split");
    if (!s)
      return s.takeError();
    sizes = *s;
  } else if (n.opsetVersion() < 13) {
    sizes = intsAttr(n, "split");
  }
  if (sizes.empty()) {
    // From opset 18 the count is said, by the sizes or by num_outputs.
    if (n.opsetVersion() >= 18 && !n.attr("num_outputs"))
      return nodeError(n, "neither a 'split' input nor a 'num_outputs' attribute says how to "
                          "split (one of them is required from opset 18)");
    int64_t parts = n.attr("num_outputs") ? n.intAttr("num_outputs", outs) : outs;
    if (parts <= 0)
      return nodeError(n, "no outputs to split into");
    // Uneven chunks (the last one smaller) came with opset 18; before it an
    // axis that does not divide is an invalid model (onnxruntime refuses it).
    if (n.opsetVersion() < 18 && dim % parts != 0)
      return nodeError(n, "the axis (" + std::to_string(dim) + ") does not split evenly into " +
                              std::to_string(parts) +
                              " outputs; uneven chunks need opset 18 or a 'split' input");
    int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::max<int64_t>(std::min(chunk, dim - i * chunk), 0));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return nodeError(n, "negative split size");
    total += s;
  }
  if (total != dim || sizes.size() != outs)
    return nodeError(n, "split sizes do not add up to the axis (" + std::to_string(dim) +
                            ") or do not match the number of outputs");
  return sizes;
}

MPC_DEFINED_BELOW(shapes::shapeReshape)
llvm::Error shapes::shapeReshape(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto target = knownInts(q, 1, "the target shape");
  if (!target)
    return target.takeError();
  const auto &x = q.inputs[0].shape;
  bool allowZero = q.node.intAttr("allowzero", 0) != 0;
  std::vector<int64_t> shape = *target;
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (i >= x.size())
        return nodeError(q.node, "0 in the target shape has no input dimension");
      shape[i] = x[i];
    }
    if (shape[i] == -1) {
      if (inferred >= 0)
        return nodeError(q.node, "more than one -1 in the target shape");
      inferred = i;
    } else if (shape[i] < 0) {
      return nodeError(q.node, "negative dimension in the target shape");
    } else {
      known = mulSat(known, shape[i]);
    }
  }
  int64_t total = numel(x);
  if (inferred >= 0)
    shape[inferred] = known ? total / known : 0;
  if (numel(shape) != total) {
    if (!q.estimate)
      return nodeError(q.node, "cannot reshape " + formatShape(x) + " to " +
                                   formatShape(*target));
    // Stand-in sizes need not multiply out (a length the exporter baked in
    // next to a symbolic one): keep the target's rank and explicit sizes.
    if (inferred >= 0)
      shape[inferred] = -1;
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeFlatten)
llvm::Error shapes::shapeFlatten(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", 1);
  if (axis < 0 && q.node.opsetVersion() < 11)
    return nodeError(q.node, "axis " + std::to_string(axis) +
                                 " is negative; Flatten takes a negative axis from opset 11");
  if (axis != int64_t(x.size()) && !normalizeAxis(axis, x.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(x));
  // Both products are taken (not the inner one as numel / outer): an empty
  // outer product would turn [0, 3] into [0, 0].
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int64_t &part = i < axis ? outer : inner;
    part = mulSat(part, x[i]);
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, {outer, inner}});
  return llvm::Error::success();
}

/// Squeeze's and Unsqueeze's axes: the attribute (opset < 13) or input 1.
static llvm::Expected<std::vector<int64_t>> squeezeAxes(const ShapeQuery &q) {
  if (q.inputs.size() > 1 && q.inputs[1].dtype != DType::Undefined)
    return knownInts(q, 1, "axes",
                     q.node.opType == "Unsqueeze" ? ListForm::VectorOrScalar : ListForm::Vector);
  return intsAttr(q.node, "axes", {});
}

MPC_DEFINED_BELOW(shapes::shapeSqueeze)
llvm::Error shapes::shapeSqueeze(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  auto axesOrError = squeezeAxes(q);
  if (!axesOrError)
    return axesOrError.takeError();
  std::vector<int64_t> axes = std::move(*axesOrError);
  std::vector<bool> drop(x.size(), false);
  if (axes.empty())
    for (size_t i = 0; i < x.size(); ++i)
      drop[i] = x[i] == 1;
  for (int64_t a : axes) {
    if (!normalizeAxis(a, x.size()) || x[a] != 1)
      return nodeError(q.node, "cannot squeeze axis " + std::to_string(a) + " of " +
                                   formatShape(x));
    drop[a] = true;
  }
  std::vector<int64_t> shape;
  for (size_t i = 0; i < x.size(); ++i)
    if (!drop[i])
      shape.push_back(x[i]);
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeUnsqueeze)
llvm::Error shapes::shapeUnsqueeze(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  auto axesOrError = squeezeAxes(q);
  if (!axesOrError)
    return axesOrError.takeError();
  std::vector<int64_t> axes = std::move(*axesOrError);
  int64_t rank = x.size() + axes.size();
  std::vector<int64_t> shape(rank, -1);
  for (int64_t a : axes) {
    if (!normalizeAxis(a, rank) || shape[a] == 1)
      return nodeError(q.node, "bad unsqueeze axis for " + formatShape(x));
    shape[a] = 1;
  }
  size_t j = 0;
  for (int64_t &d : shape)
    if (d == -1)
      d = x[j++];
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeTranspose)
llvm::Error shapes::shapeTranspose(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  std::vector<int64_t> perm = transposePerm(q.node, x.size());
  std::vector<bool> seen(x.size(), false);
  if (perm.size() != x.size())
    return nodeError(q.node, "perm does not match rank of " + formatShape(x));
  std::vector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(x.size()) || seen[p])
      return nodeError(q.node, "perm is not a permutation");
    seen[p] = true;
    shape.push_back(x[p]);
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeShape)
llvm::Error shapes::shapeShape(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t s, e;
  shapeOpRange(q.node, q.inputs[0].shape.size(), s, e);
  out.assign(1, ShapedType{DType::I64, {e - s}});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeSize)
llvm::Error shapes::shapeSize(const ShapeQuery &q, std::vector<ShapedType> &out) {
  out.assign(1, ShapedType{DType::I64, {}});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeGather)
llvm::Error shapes::shapeGather(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape, &ind = q.inputs[1].shape;
  int64_t axis = q.node.intAttr("axis", 0);
  if (!normalizeAxis(axis, x.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(x));
  if (q.inputs[1].dtype != DType::I64 && q.inputs[1].dtype != DType::I32)
    return nodeError(q.node, "indices must be int32 or int64");
  std::vector<int64_t> shape(x.begin(), x.begin() + axis);
  shape.insert(shape.end(), ind.begin(), ind.end());
  shape.insert(shape.end(), x.begin() + axis + 1, x.end());
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeConcat)
llvm::Error shapes::shapeConcat(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> shape = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", 0);
  if (!normalizeAxis(axis, shape.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(shape));
  for (size_t i = 1; i < q.inputs.size(); ++i) {
    const auto &s = q.inputs[i].shape;
    if (s.size() != shape.size() || q.inputs[i].dtype != q.inputs[0].dtype)
      return nodeError(q.node, "input " + std::to_string(i) + " does not match input 0");
    for (size_t d = 0; d < s.size(); ++d)
      if (int64_t(d) != axis && s[d] != shape[d])
        return nodeError(q.node, "input " + formatShape(s) + " does not match " +
                                     formatShape(q.inputs[0].shape));
    shape[axis] += s[axis];
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeSlice)
llvm::Error shapes::shapeSlice(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> v[4];
  for (unsigned i = 1; i < 5; ++i) {
    if (i >= q.inputs.size() || q.inputs[i].dtype == DType::Undefined)
      continue;
    static const char *const names[] = {"starts", "ends", "axes", "steps"};
    auto k = knownInts(q, i, names[i - 1]);
    if (!k)
      return k.takeError();
    v[i - 1] = *k;
  }
  auto p = sliceParams(q.node, q.inputs[0].shape, v[0], v[1], v[2], v[3]);
  if (!p)
    return p.takeError();
  out.assign(1, ShapedType{q.inputs[0].dtype, p->outShape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeExpand)
llvm::Error shapes::shapeExpand(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto s = knownInts(q, 1, "the target shape");
  if (!s)
    return s.takeError();
  llvm::SmallVector<int64_t, 6> b;
  if (!broadcastShapes(q.inputs[0].shape, *s, b, q.estimate))
    return nodeError(q.node, "cannot expand " + formatShape(q.inputs[0].shape) + " to " +
                                 formatShape(*s));
  out.assign(1, ShapedType{q.inputs[0].dtype, {b.begin(), b.end()}});
  return llvm::Error::success();
}

/// NonZero's output shape depends on the data: the executor runs graphs
/// with it in dynamic mode and passes the input's host copy.
MPC_DEFINED_BELOW(shapes::shapeNonZero)
llvm::Error shapes::shapeNonZero(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const HostTensor *x = q.values.empty() ? nullptr : q.values[0];
  if (!x)
    return nodeError(q.node, "the input must be known on the host");
  int64_t count = 0;
  for (int64_t i = 0; i < x->numElements(); ++i)
    count += x->getAsDouble(i) != 0;
  out.assign(1, ShapedType{DType::I64, {int64_t(x->shape.size()), count}});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeNonMaxSuppression)
llvm::Error shapes::shapeNonMaxSuppression(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const Node &n = q.node;
  if (q.inputs.size() < 2 || q.inputs[0].dtype == DType::Undefined ||
      q.inputs[1].dtype == DType::Undefined)
    return nodeError(n, "needs boxes and scores");
  const auto &boxes = q.inputs[0].shape, &scores = q.inputs[1].shape;
  if (q.inputs[0].dtype != DType::F32 || q.inputs[1].dtype != DType::F32)
    return nodeError(n, "boxes and scores must be f32");
  if (boxes.size() != 3 || boxes[2] != 4)
    return nodeError(n, "boxes must be [batches, boxes, 4], not " + formatShape(boxes));
  if (scores.size() != 3 || scores[0] != boxes[0] || scores[2] != boxes[1])
    return nodeError(n, "scores must be [batches, classes, boxes] = [" +
                            llvm::Twine(boxes[0]) + ", classes, " + llvm::Twine(boxes[1]) +
                            "], not " + formatShape(scores));
  auto value = [&](size_t i) -> const HostTensor * {
    return i < q.values.size() && i < q.inputs.size() && q.inputs[i].dtype != DType::Undefined
               ? q.values[i]
               : nullptr;
  };
  for (size_t i = 2; i < 5 && i < q.inputs.size(); ++i)
    if (q.inputs[i].dtype != DType::Undefined &&
        q.inputs[i].dtype != (i == 2 ? DType::I64 : DType::F32))
      return nodeError(n, "input " + llvm::Twine(i) + " must be " +
                              (i == 2 ? "i64" : "f32") + ", not " +
                              dtypeName(q.inputs[i].dtype));
  const HostTensor *b = value(0), *s = value(1), *m = value(2), *iou = value(3),
                   *st = value(4);
  if (!b || !s)
    return nodeError(n, "boxes and scores must be known on the host");
  if ((q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined && !m) ||
      (q.inputs.size() > 3 && q.inputs[3].dtype != DType::Undefined && !iou) ||
      (q.inputs.size() > 4 && q.inputs[4].dtype != DType::Undefined && !st))
    return nodeError(n, "the thresholds must be known on the host");
  kernels::NmsOptions o;
  if (const char *bad = kernels::nmsReadOptions(
          m ? m->data<int64_t>() : nullptr, m ? m->numElements() : 0,
          iou ? iou->data<float>() : nullptr, iou ? iou->numElements() : 0,
          st ? st->data<float>() : nullptr, st ? st->numElements() : 0,
          n.intAttr("center_point_box", 0), o))
    return nodeError(n, bad);
  std::vector<int64_t> triples;
  int64_t count = kernels::nmsSelect(b->data<float>(), s->data<float>(), boxes[0], scores[1],
                                     boxes[1], o, triples);
  out.assign(1, ShapedType{DType::I64, {count, 3}});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeDropout)
llvm::Error shapes::shapeDropout(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkDropoutInference(q))
    return e;
  out.assign(1, q.inputs[0]);
  if (q.node.numOutputs() > 1) {
    // Dropout-7 to 9 typed the mask like the data; 10+ made it bool.
    DType maskType = q.node.opsetVersion() >= 10 ? DType::Bool : q.inputs[0].dtype;
    out.push_back(ShapedType{maskType, q.inputs[0].shape});
  }
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeVariadicBroadcast)
llvm::Error shapes::shapeVariadicBroadcast(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (q.inputs.empty())
    return nodeError(q.node, "needs at least one input");
  llvm::SmallVector<int64_t, 6> shape(q.inputs[0].shape.begin(), q.inputs[0].shape.end());
  for (size_t i = 1; i < q.inputs.size(); ++i) {
    llvm::SmallVector<int64_t, 6> next;
    if (q.inputs[i].dtype != q.inputs[0].dtype)
      return nodeError(q.node, "inputs have different dtypes");
    if (!broadcastShapes(shape, q.inputs[i].shape, next, q.estimate))
      return nodeError(q.node, "input " + formatShape(q.inputs[i].shape) +
                                   " does not broadcast with " + formatShape(shape));
    shape = next;
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, {shape.begin(), shape.end()}});
  return llvm::Error::success();
}

/// The operands of QuantizeLinear and DequantizeLinear (x, scale and the
/// optional zero point) checked: per tensor (a scale of one element), per
/// axis (a 1-D scale as long as x's `axis`) or blocked (opset 21's
/// block_size: x's shape with `axis` divided by the block size, rounded
/// up); the zero point has the scale's shape.
static llvm::Error checkQuantOperands(const ShapeQuery &q) {
  const Node &n = q.node;
  if (q.inputs.size() < 2 || q.inputs[1].dtype == DType::Undefined)
    return nodeError(n, "needs x and a scale");
  const auto &x = q.inputs[0].shape, &s = q.inputs[1].shape;
  int64_t count = numel(s), block = n.intAttr("block_size", 0);
  if (block < 0)
    return nodeError(n, "block_size " + llvm::Twine(block) + " is negative");
  if (block > 0) {
    int64_t axis = n.intAttr("axis", 1);
    if (!normalizeAxis(axis, int64_t(x.size())))
      return nodeError(n, "axis " + llvm::Twine(n.intAttr("axis", 1)) + " is out of range for " +
                              formatShape(x));
    std::vector<int64_t> want(x.begin(), x.end());
    want[size_t(axis)] = (want[size_t(axis)] + block - 1) / block;
    if (std::vector<int64_t>(s.begin(), s.end()) != want)
      return nodeError(n, "the scale is " + formatShape(s) + "; blocks of " + llvm::Twine(block) +
                              " along axis " + llvm::Twine(axis) + " of " + formatShape(x) +
                              " need " + formatShape(want));
  } else if (count != 1) {
    int64_t axis = n.intAttr("axis", 1);
    if (!normalizeAxis(axis, int64_t(x.size())))
      return nodeError(n, "axis " + llvm::Twine(n.intAttr("axis", 1)) + " is out of range for " +
                              formatShape(x));
    if (s.size() != 1 || s[0] != x[size_t(axis)])
      return nodeError(n, "the scale is " + formatShape(s) + "; per-axis quantization along "
                              "axis " + llvm::Twine(axis) + " of " + formatShape(x) +
                              " needs [" + llvm::Twine(x[size_t(axis)]) + "]");
  }
  // The zero point has the scale's shape (one element of any rank below 2
  // for a scale of one element), as onnxruntime requires.
  if (q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined) {
    const auto &z = q.inputs[2].shape;
    bool ok = count == 1 && block == 0 ? numel(z) == 1 && z.size() <= 1
                                       : std::vector<int64_t>(z.begin(), z.end()) ==
                                             std::vector<int64_t>(s.begin(), s.end());
    if (!ok)
      return nodeError(n, "the zero point is " + formatShape(z) +
                              "; it must have the scale's shape " + formatShape(s));
  }
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeQuantizeLinear)
llvm::Error shapes::shapeQuantizeLinear(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkQuantOperands(q))
    return e;
  const Node &n = q.node;
  bool hasZero = q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined;
  DType y = hasZero ? q.inputs[2].dtype : DType(n.intAttr("output_dtype", int64_t(DType::U8)));
  if (y == DType::Undefined)
    y = DType::U8;
  if (hasZero && n.attr("output_dtype") && DType(n.intAttr("output_dtype", 0)) != y &&
      n.intAttr("output_dtype", 0) != 0)
    return nodeError(n, "output_dtype differs from the zero point's type " + dtypeName(y));
  if (y != DType::U8 && y != DType::I8 && y != DType::U16 && y != DType::I16)
    return nodeError(n, "quantizing to " + dtypeName(y) +
                            " is not supported (u8, i8, u16 and i16 are)");
  if (q.inputs[0].dtype != DType::F32 && q.inputs[0].dtype != DType::F16 &&
      q.inputs[0].dtype != DType::BF16)
    return nodeError(n, "x must be f32, f16 or bf16, not " + dtypeName(q.inputs[0].dtype));
  out.assign(1, ShapedType{y, q.inputs[0].shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeDequantizeLinear)
llvm::Error shapes::shapeDequantizeLinear(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (auto e = checkQuantOperands(q))
    return e;
  const Node &n = q.node;
  DType x = q.inputs[0].dtype, s = q.inputs[1].dtype;
  if (x != DType::U8 && x != DType::I8 && x != DType::U16 && x != DType::I16 && x != DType::I32)
    return nodeError(n, "dequantizing " + dtypeName(x) +
                            " is not supported (u8, i8, u16, i16 and i32 are)");
  if (s != DType::F32 && s != DType::F16 && s != DType::BF16)
    return nodeError(n, "the scale must be f32, f16 or bf16, not " + dtypeName(s));
  if (q.inputs.size() > 2 && q.inputs[2].dtype != DType::Undefined && q.inputs[2].dtype != x)
    return nodeError(n, "the zero point is " + dtypeName(q.inputs[2].dtype) + "; x is " +
                            dtypeName(x));
  out.assign(1, ShapedType{s, q.inputs[0].shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeRoiAlign)
llvm::Error shapes::shapeRoiAlign(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const Node &n = q.node;
  auto p = roiAlignParamsOf(n);
  if (!p)
    return p.takeError();
  if (q.inputs.size() < 3)
    return nodeError(n, "needs X, rois and batch_indices");
  const auto &x = q.inputs[0].shape, &rois = q.inputs[1].shape, &idx = q.inputs[2].shape;
  if (x.size() != 4)
    return nodeError(n, "X must be [N, C, H, W], not " + formatShape(x));
  if (rois.size() != 2 || rois[1] != 4)
    return nodeError(n, "rois must be [num_rois, 4], not " + formatShape(rois));
  if (idx.size() != 1 || idx[0] != rois[0])
    return nodeError(n, "batch_indices must be [" + llvm::Twine(rois[0]) + "] (one per roi), not " +
                            formatShape(idx));
  if (q.inputs[1].dtype != q.inputs[0].dtype)
    return nodeError(n, "rois must be " + dtypeName(q.inputs[0].dtype) + " like X, not " +
                            dtypeName(q.inputs[1].dtype));
  if (q.inputs[2].dtype != DType::I64)
    return nodeError(n, "batch_indices must be i64, not " + dtypeName(q.inputs[2].dtype));
  out.assign(1, ShapedType{q.inputs[0].dtype, {rois[0], x[1], p->outH, p->outW}});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeLRN)
llvm::Error shapes::shapeLRN(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (q.inputs[0].shape.size() < 3)
    return nodeError(q.node, "input " + formatShape(q.inputs[0].shape) +
                                 " must be [N,C,D1,...]");
  auto p = lrnParamsOf(q.node); // checks size
  if (!p)
    return p.takeError();
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeSplit)
llvm::Error shapes::shapeSplit(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", 0);
  if (!normalizeAxis(axis, x.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(x));
  auto sizes = splitSizes(q, x[axis]);
  if (!sizes)
    return sizes.takeError();
  out.clear();
  for (int64_t s : *sizes) {
    std::vector<int64_t> shape = x;
    shape[axis] = s;
    out.push_back(ShapedType{q.inputs[0].dtype, shape});
  }
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeTile)
llvm::Error shapes::shapeTile(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  auto r = knownInts(q, 1, "repeats");
  if (!r)
    return r.takeError();
  if (r->size() != x.size())
    return nodeError(q.node, "repeats has " + std::to_string(r->size()) +
                                 " values for input " + formatShape(x));
  std::vector<int64_t> shape = x;
  for (size_t d = 0; d < x.size(); ++d) {
    if ((*r)[d] < 0)
      return nodeError(q.node, "negative repeat");
    shape[d] = mulSat(shape[d], (*r)[d]);
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

static llvm::Error shapeBlocks(const ShapeQuery &q, std::vector<ShapedType> &out,
                               bool toSpace) {
  const auto &x = q.inputs[0].shape;
  int64_t b = q.node.intAttr("blocksize", 0);
  if (x.size() != 4 || b <= 0)
    return nodeError(q.node, "needs a 4-d input and a positive blocksize");
  std::vector<int64_t> shape = x;
  if (toSpace) {
    if (x[1] % (b * b))
      return nodeError(q.node, "channels not divisible by blocksize^2");
    shape = {x[0], x[1] / (b * b), x[2] * b, x[3] * b};
  } else {
    if (x[2] % b || x[3] % b)
      return nodeError(q.node, "spatial dims not divisible by blocksize");
    shape = {x[0], x[1] * b * b, x[2] / b, x[3] / b};
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeDepthToSpace)
llvm::Error shapes::shapeDepthToSpace(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeBlocks(q, out, true);
}

MPC_DEFINED_BELOW(shapes::shapeSpaceToDepth)
llvm::Error shapes::shapeSpaceToDepth(const ShapeQuery &q, std::vector<ShapedType> &out) {
  return shapeBlocks(q, out, false);
}

MPC_DEFINED_BELOW(shapes::shapeTrilu)
llvm::Error shapes::shapeTrilu(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (q.inputs[0].shape.size() < 2)
    return nodeError(q.node, "input must have rank >= 2");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeRangeOp)
llvm::Error shapes::shapeRangeOp(const ShapeQuery &q, std::vector<ShapedType> &out) {
  for (unsigned i = 0; i < 3; ++i)
    if (i >= q.values.size() || !q.values[i])
      return unknownOperand(q.node, "start, limit and delta");
  // Scalars (a one-element tensor is taken too); an empty one was read past
  // its end (a crash).
  static const char *const kNames[] = {"start", "limit", "delta"};
  for (unsigned i = 0; i < 3; ++i)
    if (numel(q.inputs[i].shape) != 1)
      return nodeError(q.node, llvm::Twine(kNames[i]) + " is " +
                                   formatShape(q.inputs[i].shape) + "; it must be a scalar");
  int64_t n;
  if (isFloatingPoint(q.inputs[0].dtype)) {
    double start = q.values[0]->getAsDouble(0), limit = q.values[1]->getAsDouble(0),
           delta = q.values[2]->getAsDouble(0);
    if (delta == 0)
      return nodeError(q.node, "delta is 0");
    // A NaN or infinite bound has no element count (NaN's count was 0).
    double count = std::ceil((limit - start) / delta);
    if (!std::isfinite(count)) {
      char text[96];
      std::snprintf(text, sizeof text, "start %g, limit %g and delta %g", start, limit, delta);
      return nodeError(q.node, std::string(text) + " give no finite element count");
    }
    n = std::max<int64_t>(saturatingInt64(count), 0);
  } else {
    // Integer bounds are read exactly: INT64_MAX does not survive a double.
    int64_t delta = q.values[2]->getAsInt64(0);
    if (delta == 0)
      return nodeError(q.node, "delta is 0");
    n = integerRangeCount(q.values[0]->getAsInt64(0), q.values[1]->getAsInt64(0), delta);
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, {n}});
  return llvm::Error::success();
}

/// The value of a Constant node's attribute as a host tensor.
llvm::Expected<HostTensor> shapes::constantValue(const Node &n) {
  if (const Attribute *a = n.attr("value"))
    return hostTensorFromIR(a->tensors.at(0));
  if (const Attribute *a = n.attr("value_float")) {
    HostTensor t(DType::F32, {});
    *t.data<float>() = a->f;
    return t;
  }
  if (const Attribute *a = n.attr("value_int")) {
    HostTensor t(DType::I64, {});
    *t.data<int64_t>() = a->i;
    return t;
  }
  if (const Attribute *a = n.attr("value_floats")) {
    HostTensor t(DType::F32, {int64_t(a->floats.size())});
    std::copy(a->floats.begin(), a->floats.end(), t.data<float>());
    return t;
  }
  if (const Attribute *a = n.attr("value_ints")) {
    HostTensor t(DType::I64, {int64_t(a->ints.size())});
    std::copy(a->ints.begin(), a->ints.end(), t.data<int64_t>());
    return t;
  }
  return nodeError(n, "unsupported Constant attribute");
}

MPC_DEFINED_BELOW(shapes::shapeConstant)
llvm::Error shapes::shapeConstant(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto t = constantValue(q.node);
  if (!t)
    return t.takeError();
  out.assign(1, ShapedType{t->dtype, t->shape});
  return llvm::Error::success();
}

llvm::Expected<HostTensor> shapes::fillValue(const Node &n) {
  if (const Attribute *a = n.attr("value")) {
    auto t = hostTensorFromIR(a->tensors.at(0));
    if (!t)
      return t.takeError();
    if (t->numElements() != 1)
      return nodeError(n, "value must hold exactly one element");
    return t;
  }
  HostTensor t(DType::F32, {1});
  *t.data<float>() = 0.0f;
  return t;
}

MPC_DEFINED_BELOW(shapes::shapeConstantOfShape)
llvm::Error shapes::shapeConstantOfShape(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto shape = knownInts(q, 0, "the shape");
  if (!shape)
    return shape.takeError();
  for (int64_t d : *shape)
    if (d < 0)
      return nodeError(q.node, "negative dimension in " + formatShape(*shape));
  auto v = fillValue(q.node);
  if (!v)
    return v.takeError();
  out.assign(1, ShapedType{v->dtype, *shape});
  return llvm::Error::success();
}

llvm::Error shapes::padAmounts(const Node &n, llvm::ArrayRef<int64_t> x, std::vector<int64_t> pads,
                               std::vector<int64_t> axes, std::vector<int64_t> &begin,
                               std::vector<int64_t> &end) {
  size_t rank = x.size();
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (pads.size() != 2 * axes.size())
    return nodeError(n, "pads has " + std::to_string(pads.size()) + " values for " +
                            std::to_string(axes.size()) + " axes");
  begin.assign(rank, 0);
  end.assign(rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!normalizeAxis(a, rank))
      return nodeError(n, "pad axis out of range");
    // A repeated axis (ONNX: undefined) took its last pads.
    if (seen[size_t(a)])
      return nodeError(n, "axes " + formatShape(axes) + " name axis " + std::to_string(a) +
                              " twice");
    seen[size_t(a)] = true;
    begin[a] = pads[i];
    end[a] = pads[i + axes.size()];
  }
  return llvm::Error::success();
}

llvm::Expected<PadMode> shapes::padMode(const Node &n, llvm::StringRef m) {
  if (m == "constant")
    return PadMode::Constant;
  if (m == "reflect")
    return PadMode::Reflect;
  if (m == "edge")
    return PadMode::Edge;
  if (m == "wrap")
    return PadMode::Wrap;
  return nodeError(n, "unknown mode " + quoteName(m));
}

static llvm::Expected<PadMode> padModeAttr(const Node &n) {
  return padMode(n, n.stringAttr("mode", "constant"));
}

MPC_DEFINED_BELOW(shapes::shapePad)
llvm::Error shapes::shapePad(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  std::vector<int64_t> pads, axes, begin, end;
  if (q.node.opsetVersion() < 11) {
    pads = intsAttr(q.node, "pads", intsAttr(q.node, "paddings"));
  } else {
    auto p = knownInts(q, 1, "pads", ListForm::VectorOrRow);
    if (!p)
      return p.takeError();
    pads = *p;
    if (q.inputs.size() > 3 && q.inputs[3].dtype != DType::Undefined) {
      auto a = knownInts(q, 3, "axes");
      if (!a)
        return a.takeError();
      axes = *a;
    }
  }
  auto mode = padModeAttr(q.node);
  if (!mode)
    return mode.takeError();
  if (auto e = padAmounts(q.node, x, pads, axes, begin, end))
    return e;
  std::vector<int64_t> shape(x.begin(), x.end());
  for (size_t d = 0; d < x.size(); ++d) {
    shape[d] += begin[d] + end[d];
    if (shape[d] < 0)
      return nodeError(q.node, "pads crop more than " + formatShape(x));
    if (*mode != PadMode::Constant && shape[d] > 0 && x[d] == 0)
      return nodeError(q.node, "cannot pad an empty axis in this mode");
    // Negative pads crop first: an axis cropped to nothing has no values to
    // repeat, reflect or wrap (its padding read the cropped values;
    // onnxruntime refuses it even when nothing is added).
    int64_t kept = x[d] + std::min<int64_t>(begin[d], 0) + std::min<int64_t>(end[d], 0);
    if (*mode != PadMode::Constant && x[d] > 0 && kept <= 0)
      return nodeError(q.node, "the negative pads crop axis " + llvm::Twine(d) + " of " +
                                   formatShape(x) + " to nothing; " +
                                   q.node.stringAttr("mode", "constant") +
                                   " padding needs values to pad from");
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}
