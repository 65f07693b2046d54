//===- DataKernels.cpp - CPU glue for shape and data-movement ops -----------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze, Identity (copies), Transpose, Shape,
// Size, Gather, Concat, Slice, Expand and Constant. These move bytes and do no
// arithmetic, so they work on every dtype by element size.
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include <cstring>

using namespace mpc;
using namespace mpc::cpuk;

static size_t elemSize(const TensorRef &t) { return runtimeElementSize(t.dtype); }

llvm::Error cpuk::nodeError(const Node &n, const llvm::Twine &msg) {
  return inputError("{0}: {1}", describeNode(n), msg.str());
}

std::vector<int64_t> cpuk::intsAttr(const Node &n, llvm::StringRef name,
                                    std::vector<int64_t> dflt) {
  const Attribute *a = n.attr(name);
  return a ? a->ints : dflt;
}

bool cpuk::normalizeAxis(int64_t &axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return false;
  if (axis < 0)
    axis += rank;
  return true;
}

llvm::Expected<std::vector<int64_t>> cpuk::knownInts(const ShapeQuery &q, unsigned i,
                                                     llvm::StringRef what) {
  if (i >= q.values.size() || !q.values[i])
    return nodeError(q.node, what + " must be known before running (an initializer "
                                    "or computed from shapes)");
  const HostTensor &t = *q.values[i];
  std::vector<int64_t> v(t.numElements());
  // Integers exactly: through double, INT64_MAX (Slice's "to the end") overflows.
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = t.getAsInt64(j);
  return v;
}

std::vector<int64_t> cpuk::readInts(const TensorRef &t) {
  std::vector<int64_t> v(t.numElements());
  for (size_t j = 0; j < v.size(); ++j)
    v[j] = t.dtype == DType::I32 ? t.as<int32_t>()[j] : t.as<int64_t>()[j];
  return v;
}

llvm::Error cpuk::runCopy(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  if (x.data != y.data)
    std::memcpy(y.data, x.data, x.numElements() * elemSize(x));
  return llvm::Error::success();
}

llvm::Error cpuk::shapeReshape(const ShapeQuery &q, std::vector<ShapedType> &out) {
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
      known *= shape[i];
    }
  }
  int64_t total = kernels::numElements(x);
  if (inferred >= 0)
    shape[inferred] = known ? total / known : 0;
  if (kernels::numElements(shape) != total)
    return nodeError(q.node, "cannot reshape " + formatShape(x) + " to " +
                                 formatShape(*target));
  out.assign(1, ShapedType{q.inputs[0].dtype, shape});
  return llvm::Error::success();
}

llvm::Error cpuk::shapeFlatten(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  int64_t axis = q.node.intAttr("axis", 1);
  if (axis != int64_t(x.size()) && !normalizeAxis(axis, x.size()))
    return nodeError(q.node, "axis out of range for " + formatShape(x));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x[i];
  out.assign(1, ShapedType{q.inputs[0].dtype,
                           {outer, kernels::numElements(x) / std::max<int64_t>(outer, 1)}});
  return llvm::Error::success();
}

llvm::Error cpuk::shapeSqueeze(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  std::vector<int64_t> axes = intsAttr(q.node, "axes", {});
  if (q.inputs.size() > 1 && q.inputs[1].dtype != DType::Undefined) {
    auto a = knownInts(q, 1, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  }
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

llvm::Error cpuk::shapeUnsqueeze(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const auto &x = q.inputs[0].shape;
  std::vector<int64_t> axes = intsAttr(q.node, "axes", {});
  if (q.inputs.size() > 1 && q.inputs[1].dtype != DType::Undefined) {
    auto a = knownInts(q, 1, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  }
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

static std::vector<int64_t> transposePerm(const TransposeParams &p, size_t rank) {
  std::vector<int64_t> perm = p.perm.values;
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i)
      perm.push_back(rank - 1 - i);
  return perm;
}

static std::vector<int64_t> transposePerm(const Node &n, size_t rank) {
  auto p = parseTranspose(n);
  return transposePerm(static_cast<const TransposeParams &>(*p), rank);
}

llvm::Error cpuk::shapeTranspose(const ShapeQuery &q, std::vector<ShapedType> &out) {
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

/// Strided copy: the output walks its dims in order, reading the input at
/// the permuted strides; the innermost run is copied with memcpy when the
/// last axis stays last.
llvm::Error cpuk::runTranspose(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  size_t rank = x.shape.size(), es = elemSize(x);
  std::vector<int64_t> perm = transposePerm(paramsOf<TransposeParams>(c), rank);
  std::vector<int64_t> inStride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    inStride[i - 1] = inStride[i] * x.shape[i];
  int64_t n = y.numElements();
  if (n == 0)
    return llvm::Error::success();
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return llvm::Error::success();
  }
  bool lastStays = perm[rank - 1] == int64_t(rank - 1);
  int64_t run = lastStays ? y.shape[rank - 1] : 1;
  size_t outerRank = lastStays ? rank - 1 : rank;
  std::vector<int64_t> idx(outerRank, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < n; o += run) {
    if (run > 1)
      std::memcpy(dst + o * es, src + off * es, run * es);
    else
      std::memcpy(dst + o * es, src + off * es, es);
    for (size_t d = outerRank; d-- > 0;) {
      off += inStride[perm[d]];
      if (++idx[d] < y.shape[d])
        break;
      off -= inStride[perm[d]] * y.shape[d];
      idx[d] = 0;
    }
  }
  return llvm::Error::success();
}

/// Shape's start/end attributes (opset 15) clamp the returned range.
static void shapeRange(const Node &n, int64_t rank, int64_t &start, int64_t &end) {
  start = n.intAttr("start", 0);
  end = n.intAttr("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::min(std::max<int64_t>(start, 0), rank);
  end = std::min(std::max<int64_t>(end, start), rank);
}

llvm::Error cpuk::shapeShape(const ShapeQuery &q, std::vector<ShapedType> &out) {
  int64_t s, e;
  shapeRange(q.node, q.inputs[0].shape.size(), s, e);
  out.assign(1, ShapedType{DType::I64, {e - s}});
  return llvm::Error::success();
}

llvm::Error cpuk::runShape(const KernelCall &c) {
  int64_t s, e;
  shapeRange(*c.node, c.inputs[0].shape.size(), s, e);
  for (int64_t i = s; i < e; ++i)
    c.outputs[0].as<int64_t>()[i - s] = c.inputs[0].shape[i];
  return llvm::Error::success();
}

llvm::Error cpuk::shapeSize(const ShapeQuery &q, std::vector<ShapedType> &out) {
  out.assign(1, ShapedType{DType::I64, {}});
  return llvm::Error::success();
}

llvm::Error cpuk::runSize(const KernelCall &c) {
  *c.outputs[0].as<int64_t>() = c.inputs[0].numElements();
  return llvm::Error::success();
}

llvm::Error cpuk::shapeGather(const ShapeQuery &q, std::vector<ShapedType> &out) {
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

bool cpuk::normalizeIndices(const KernelCall &c, std::vector<int64_t> &idx, int64_t dim,
                            int32_t operand) {
  for (int64_t &i : idx) {
    if (i < -dim || i >= dim) {
      recordKernelError(c, KernelErrorCode::IndexOutOfRange, operand, i);
      return false;
    }
    if (i < 0)
      i += dim;
  }
  return true;
}

llvm::Error cpuk::runGather(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, x.shape.size());
  std::vector<int64_t> idx = readInts(c.inputs[1]);
  int64_t outer = 1, inner = elemSize(x), dim = x.shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[i];
  for (size_t i = axis + 1; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(c.outputs[0].data);
  if (!normalizeIndices(c, idx, dim, /*operand=*/0))
    return llvm::Error::success();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j)
      std::memcpy(dst + (o * idx.size() + j) * inner, src + (o * dim + idx[j]) * inner,
                  inner);
  return llvm::Error::success();
}

llvm::Error cpuk::shapeConcat(const ShapeQuery &q, std::vector<ShapedType> &out) {
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

llvm::Error cpuk::runConcat(const KernelCall &c) {
  const TensorRef &y = c.outputs[0];
  int64_t axis = paramsOf<AxisParams>(c).axis;
  normalizeAxis(axis, y.shape.size());
  int64_t outer = 1, es = elemSize(y);
  for (int64_t i = 0; i < axis; ++i)
    outer *= y.shape[i];
  int64_t outRow = y.numElements() / std::max<int64_t>(outer, 1) * es, pos = 0;
  char *dst = static_cast<char *>(y.data);
  for (const TensorRef &x : c.inputs) {
    int64_t row = x.numElements() / std::max<int64_t>(outer, 1) * es;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outRow + pos, static_cast<const char *>(x.data) + o * row, row);
    pos += row;
  }
  return llvm::Error::success();
}

/// The value of a Constant node's attribute as a host tensor.
static llvm::Expected<HostTensor> constantValue(const Node &n) {
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

llvm::Error cpuk::shapeConstant(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto t = constantValue(q.node);
  if (!t)
    return t.takeError();
  out.assign(1, ShapedType{t->dtype, t->shape});
  return llvm::Error::success();
}

llvm::Error cpuk::runConstant(const KernelCall &c) {
  auto t = constantValue(*c.node);
  if (!t)
    return t.takeError();
  std::memcpy(c.outputs[0].data, t->bytes.data(), t->bytes.size());
  return llvm::Error::success();
}

llvm::Expected<SliceParams> cpuk::sliceParams(const Node &n, llvm::ArrayRef<int64_t> x,
                                             std::vector<int64_t> starts,
                                             std::vector<int64_t> ends,
                                             std::vector<int64_t> axes,
                                             std::vector<int64_t> steps) {
  size_t rank = x.size();
  SliceParams p;
  p.starts.assign(rank, 0);
  p.steps.assign(rank, 1);
  p.outShape.assign(x.begin(), x.end());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return nodeError(n, "starts, ends, axes and steps have different lengths");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], dim, st = steps[i];
    if (!normalizeAxis(a, rank) || st == 0)
      return nodeError(n, "bad slice axis or step");
    dim = x[a];
    SliceAxis r = resolveSliceAxis(dim, starts[i], ends[i], st);
    p.outShape[a] = r.count;
    p.starts[a] = r.start;
    p.steps[a] = st;
  }
  return p;
}

void cpuk::forEachSliced(const SliceParams &p, llvm::ArrayRef<int64_t> x,
                         llvm::function_ref<void(int64_t, int64_t)> fn) {
  size_t rank = x.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    stride[i - 1] = stride[i] * x[i];
  int64_t n = 1;
  for (int64_t d : p.outShape)
    n *= d;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (p.starts[d] + idx[d] * p.steps[d]) * stride[d];
    fn(o, off);
    for (size_t d = rank; d-- > 0;)
      if (++idx[d] < p.outShape[d])
        break;
      else
        idx[d] = 0;
  }
}

llvm::Error cpuk::shapeSlice(const ShapeQuery &q, std::vector<ShapedType> &out) {
  std::vector<int64_t> v[4];
  for (unsigned i = 1; i < 5; ++i) {
    if (i >= q.inputs.size() || q.inputs[i].dtype == DType::Undefined)
      continue;
    auto k = knownInts(q, i, "slice bounds");
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

llvm::Error cpuk::runSlice(const KernelCall &c) {
  std::vector<int64_t> v[4];
  for (unsigned i = 1; i < 5; ++i)
    if (c.hasInput(i))
      v[i - 1] = readInts(c.inputs[i]);
  const TensorRef &x = c.inputs[0];
  auto p = sliceParams(*c.node, x.shape, v[0], v[1], v[2], v[3]);
  if (!p)
    return p.takeError();
  size_t es = elemSize(x);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(c.outputs[0].data);
  forEachSliced(*p, x.shape, [&](int64_t o, int64_t off) {
    std::memcpy(dst + o * es, src + off * es, es);
  });
  return llvm::Error::success();
}

llvm::Error cpuk::shapeExpand(const ShapeQuery &q, std::vector<ShapedType> &out) {
  auto s = knownInts(q, 1, "the target shape");
  if (!s)
    return s.takeError();
  llvm::SmallVector<int64_t, 6> b;
  if (!kernels::broadcastShapes(q.inputs[0].shape, *s, b))
    return nodeError(q.node, "cannot expand " + formatShape(q.inputs[0].shape) + " to " +
                                 formatShape(*s));
  out.assign(1, ShapedType{q.inputs[0].dtype, {b.begin(), b.end()}});
  return llvm::Error::success();
}

llvm::Error cpuk::runExpand(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  size_t rank = y.shape.size(), es = elemSize(x), xr = x.shape.size();
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t i = 0; i < xr; ++i) {
    size_t d = xr - 1 - i;
    stride[rank - 1 - i] = x.shape[d] == 1 ? 0 : s;
    s *= x.shape[d];
  }
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0, n = y.numElements();
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(y.data);
  for (int64_t o = 0; o < n; ++o) {
    std::memcpy(dst + o * es, src + off * es, es);
    for (size_t d = rank; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < y.shape[d])
        break;
      off -= stride[d] * y.shape[d];
      idx[d] = 0;
    }
  }
  return llvm::Error::success();
}

/// NonZero's output shape depends on the data: the executor runs graphs
/// with it in dynamic mode and passes the input's host copy.
llvm::Error cpuk::shapeNonZero(const ShapeQuery &q, std::vector<ShapedType> &out) {
  const HostTensor *x = q.values.empty() ? nullptr : q.values[0];
  if (!x)
    return nodeError(q.node, "the input must be known on the host");
  int64_t count = 0;
  for (int64_t i = 0; i < x->numElements(); ++i)
    count += x->getAsDouble(i) != 0;
  out.assign(1, ShapedType{DType::I64, {int64_t(x->shape.size()), count}});
  return llvm::Error::success();
}

llvm::Error cpuk::runNonZero(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  int64_t rank = x.shape.size(), n = x.numElements(), count = c.outputs[0].shape[1];
  int64_t *out = c.outputs[0].as<int64_t>();
  std::vector<int64_t> idx(rank, 0);
  int64_t k = 0;
  dispatchAll(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *p = x.as<T>();
    for (int64_t e = 0; e < n; ++e) {
      if (!(kernels::castValue<double>(p[e]) == 0)) {
        for (int64_t d = 0; d < rank; ++d)
          out[d * count + k] = idx[d];
        ++k;
      }
      for (int64_t d = rank; d-- > 0;)
        if (++idx[d] < x.shape[d])
          break;
        else
          idx[d] = 0;
    }
  });
  return llvm::Error::success();
}
