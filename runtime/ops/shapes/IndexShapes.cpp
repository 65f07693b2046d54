//===- IndexShapes.cpp - Registry shape functions ---------------------------===//
//
// Registry shape functions (runtime/ops/ShapeFunctions.h): indexing, selection
// and the other index-computing ops.
// Backend-neutral: types and shapes from the input types and known values.
//
//===----------------------------------------------------------------------===//
#include "../ShapeHelpers.h"
#include "../ShapeFunctions.h"
#include "mpc/IR/Graph.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>
#include <cctype>
#include <cmath>

using namespace mpc;
using namespace mpc::shapes;

MPC_DEFINED_BELOW(shapes::shapeArgReduce)
llvm::Error shapes::shapeArgReduce(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> shape = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", 0);
  if (!normalizeAxis(axis, shape.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(shape));
  if (shape[axis] == 0)
    return nodeError(q.node, "cannot reduce an empty axis");
  if (q.node.intAttr("keepdims", 1))
    shape[axis] = 1;
  else
    shape.erase(shape.begin() + axis);
  out.assign(1, ShapedType{DType::I64, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeTopK)
llvm::Error shapes::shapeTopK(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> shape = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", -1), kk;
  if (!normalizeAxis(axis, shape.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(shape));
  if (q.node.opsetVersion() < 10) {
    kk = q.node.intAttr("k", 0);
  } else {
    auto v = knownInts(q, 1, "K");
    if (!v)
      return v.takeError();
    if (v->size() != 1)
      return nodeError(q.node, "K must hold one value");
    kk = (*v)[0];
  }
  if (kk < 0 || kk > shape[axis])
    return nodeError(q.node, "K=" + std::to_string(kk) + " out of range for " +
                                 formatShape(shape));
  shape[axis] = kk;
  out = {ShapedType{q.inputs[0].dtype, shape}, ShapedType{DType::I64, shape}};
  return llvm::Error::success();
}

/// GatherElements' and ScatterElements' indices against their data: the
/// same rank (1 or more), a valid axis, and along every other axis no more
/// entries than the data has (out[i][j] = data[indices[i][j]][j] reads
/// column j of the data: a wider indices tensor reads past it). The axis's
/// own extent is free. Estimates skip the extents (their sizes are guesses).
static llvm::Error checkElementIndices(const ShapeQuery &q, int64_t &axis) {
  const auto &x = q.inputs[0].shape, &ind = q.inputs[1].shape;
  axis = q.node.intAttr("axis", 0);
  if (x.empty() || x.size() != ind.size() || !normalizeAxis(axis, x.size()))
    return nodeError(q.node, "indices " + formatShape(ind) + " and data " + formatShape(x) +
                                 " need the same rank (1 or more) and a valid axis");
  if (q.estimate)
    return llvm::Error::success();
  for (size_t d = 0; d < x.size(); ++d)
    if (int64_t(d) != axis && ind[d] > x[d])
      return nodeError(q.node, "indices " + formatShape(ind) + " are longer than data " +
                                   formatShape(x) + " along axis " + std::to_string(d) +
                                   ", which is not the indexed axis " + std::to_string(axis));
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeGatherElements)
llvm::Error shapes::shapeGatherElements(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t axis;
  if (auto e = checkElementIndices(q, axis))
    return e;
  out.assign(1, ShapedType{q.inputs[0].dtype, q.inputs[1].shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeScatterElements)
llvm::Error shapes::shapeScatterElements(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t axis;
  if (auto e = checkElementIndices(q, axis))
    return e;
  const auto &ind = q.inputs[1].shape, &upd = q.inputs[2].shape;
  if (!q.estimate && upd != ind)
    return nodeError(q.node, "updates " + formatShape(upd) + " must have the shape of indices " +
                                 formatShape(ind));
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeScatterND)
llvm::Error shapes::shapeScatterND(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape, &ind = q.inputs[1].shape, &upd = q.inputs[2].shape;
  if (x.empty() || ind.empty() || ind.back() < 0 || ind.back() > int64_t(x.size()))
    return nodeError(q.node, "indices " + formatShape(ind) + " cannot index data " +
                                 formatShape(x) + " (both need rank 1 or more, and the "
                                 "indices' last dimension at most the data's rank)");
  // One update per index tuple: the tuples' shape, then what a tuple leaves
  // of the data.
  std::vector<int64_t> want(ind.begin(), ind.end() - 1);
  want.insert(want.end(), x.begin() + ind.back(), x.end());
  if (!q.estimate && upd != want)
    return nodeError(q.node, "updates " + formatShape(upd) + " must be " + formatShape(want) +
                                 " (indices " + formatShape(ind) + " into data " +
                                 formatShape(x) + ")");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeGatherND)
llvm::Error shapes::shapeGatherND(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape, &ind = q.inputs[1].shape;
  int64_t b = q.node.intAttr("batch_dims", 0);
  if (ind.empty() || b < 0 || b >= int64_t(std::min(x.size(), ind.size())))
    return nodeError(q.node, "bad batch_dims or indices rank");
  // The leading batch_dims axes are shared: the same sizes in both (a
  // smaller indices batch ran, where onnxruntime and the spec refuse it).
  if (!std::equal(x.begin(), x.begin() + b, ind.begin()))
    return nodeError(q.node, "indices " + formatShape(ind) + " and data " + formatShape(x) +
                                 " differ on the first " + std::to_string(b) +
                                 " (batch_dims) axes");
  int64_t last = ind.back();
  if (last > int64_t(x.size()) - b)
    return nodeError(q.node, "indices " + formatShape(ind) + " index too many axes of " +
                                 formatShape(x));
  std::vector<int64_t> shape(ind.begin(), ind.end() - 1);
  shape.insert(shape.end(), x.begin() + b + last, x.end());
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeOneHot)
llvm::Error shapes::shapeOneHot(const ShapeQuery &q, std::vector<ShapedType> &out) {
  if (q.values.size() < 2 || !q.values[1])
    return unknownOperand(q.node, "depth");
  if (q.values[1]->numElements() != 1)
    return nodeError(q.node, "depth is " + formatShape(q.inputs[1].shape) +
                                 "; it must be a scalar");
  int64_t depth = q.values[1]->getAsInt64(0);
  if (depth <= 0)
    return nodeError(q.node, "depth must be positive");
  if (q.inputs.size() < 3 || q.inputs[2].shape != std::vector<int64_t>{2})
    return nodeError(q.node, "values is " +
                                 formatShape(q.inputs.size() < 3 ? std::vector<int64_t>{}
                                                                  : q.inputs[2].shape) +
                                 "; it must be [2] (the off value, then the on value)");
  std::vector<int64_t> shape = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", -1);
  if (!normalizeAxis(axis, shape.size() + 1))
    return nodeError(q.node, "axis out of range");
  shape.insert(shape.begin() + axis, depth);
  out.assign(1, ShapedType{q.inputs[2].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeCompress)
llvm::Error shapes::shapeCompress(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const HostTensor *cond = q.values.size() > 1 ? q.values[1] : nullptr;
  if (!cond)
    return nodeError(q.node, "the condition must be known on the host");
  const auto &x = q.inputs[0].shape;
  int64_t kept = 0;
  auto params = parseCompress(q.node);
  if (!params)
    return params.takeError();
  const auto &p = static_cast<const AxisParams &>(**params);
  bool hasAxis = p.flagA;
  int64_t axis = p.axis;
  int64_t dim = numel(x);
  if (hasAxis) {
    if (!normalizeAxis(axis, x.size()))
      return nodeError(q.node, "axis out of range for " + formatShape(x));
    dim = x[axis];
  }
  for (int64_t i = 0; i < std::min<int64_t>(cond->numElements(), dim); ++i)
    kept += cond->getAsDouble(i) != 0;
  std::vector<int64_t> shape = {kept};
  if (hasAxis) {
    shape = x;
    shape[axis] = kept;
  }
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeReverseSequence)
llvm::Error shapes::shapeReverseSequence(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  auto p = reverseSequenceParamsOf(q.node);
  if (!p)
    return p.takeError();
  int64_t b = p->batchAxis;
  if (x.size() < 2)
    return nodeError(q.node, "batch_axis and time_axis must be 0 and 1");
  if (q.inputs[1].shape != std::vector<int64_t>{x[b]})
    return nodeError(q.node, "sequence_lens must have one value per batch entry");
  out.assign(1, q.inputs[0]);
  return llvm::Error::success();
}

MPC_DEFINED_BELOW(shapes::shapeEyeLike)
llvm::Error shapes::shapeEyeLike(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const ShapedType &x = q.inputs[0];
  if (x.shape.size() != 2)
    return nodeError(q.node, "input must be 2-D, got " + formatShape(x.shape));
  int64_t to = q.node.intAttr("dtype", int64_t(x.dtype));
  if (!isKnownDType(to) || runtimeElementSize(DType(to)) == 0)
    return nodeError(q.node, "cannot make element type " + std::to_string(to));
  out.assign(1, ShapedType{DType(to), x.shape});
  return llvm::Error::success();
}

llvm::Expected<EinsumPlan> shapes::einsumPlan(const Node &n, llvm::StringRef equation,
                                             llvm::ArrayRef<std::vector<int64_t>> shapes) {
  std::string eq = equation.str();
  EinsumPlan p;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    p.operands.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (p.operands.size() != shapes.size())
    return nodeError(n, "equation has " + std::to_string(p.operands.size()) +
                            " operands for " + std::to_string(shapes.size()) + " inputs");
  // '...' becomes right-aligned labels '0'..'9' (the broadcast dims must be
  // equal: size-1 broadcasting inside '...' is not supported).
  size_t maxEllipsis = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string &labels = p.operands[i];
    size_t at = labels.find("...");
    if (at == std::string::npos)
      continue;
    size_t dims = shapes[i].size() + 3 - labels.size();
    if (shapes[i].size() + 3 < labels.size() || dims > 10)
      return nodeError(n, "operand " + quoteName(labels) + " does not match its input");
    maxEllipsis = std::max(maxEllipsis, dims);
    std::string repl;
    for (size_t d = 0; d < dims; ++d)
      repl += char('0' + (10 - dims + d));
    labels.replace(at, 3, repl);
  }
  std::string ellipsisLabels;
  for (size_t d = 0; d < maxEllipsis; ++d)
    ellipsisLabels += char('0' + (10 - maxEllipsis + d));
  std::map<char, int> count;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string &labels = p.operands[i];
    if (labels.size() != shapes[i].size())
      return nodeError(n, "operand " + quoteName(labels) + " does not match input " +
                              formatShape(shapes[i]));
    for (size_t d = 0; d < labels.size(); ++d) {
      char l = labels[d];
      if (!std::isalnum(static_cast<unsigned char>(l)))
        return nodeError(n, "bad label in equation " + quoteName(eq));
      auto it = p.sizes.find(l);
      if (it != p.sizes.end() && it->second != shapes[i][d])
        return nodeError(n, std::string("label '") + l + "' has different sizes");
      p.sizes[l] = shapes[i][d];
      ++count[l];
    }
  }
  if (arrow != std::string::npos) {
    p.output = eq.substr(arrow + 2);
    size_t at = p.output.find("...");
    if (at != std::string::npos)
      p.output.replace(at, 3, ellipsisLabels);
    for (char l : p.output)
      if (!p.sizes.count(l))
        return nodeError(n, std::string("output label '") + l + "' is not an input label");
  } else {
    // Implicit output: the '...' dims, then the labels used once, in
    // alphabetical order.
    p.output = ellipsisLabels;
    for (auto &kv : count)
      if (kv.second == 1 && !std::isdigit(static_cast<unsigned char>(kv.first)))
        p.output += kv.first;
  }
  return p;
}

MPC_DEFINED_BELOW(shapes::shapeEinsum)
llvm::Error shapes::shapeEinsum(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<std::vector<int64_t>> shapes;
  for (const ShapedType &t : q.inputs)
    shapes.push_back(t.shape);
  auto p = einsumPlan(q.node, einsumParamsOf(q.node).equation, shapes);
  if (!p)
    return p.takeError();
  std::vector<int64_t> shape;
  for (char l : p->output)
    shape.push_back(p->sizes[l]);
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}
