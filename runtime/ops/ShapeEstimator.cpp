//===- ShapeEstimator.cpp - Static shape estimates over the op registry ----===//
//
// Forward propagation of shapes in node order. Every node is shaped by its
// registry row's shape function (runtime/ops/shapes), the same one the
// executor's planner runs: the estimator only builds the ShapeQuery from its
// estimates (symbolic dims taken as 1 or a given value) and from the small
// constant tensors it folds itself (Shape -> Gather -> Concat -> Reshape).
// A node whose row has no shape function, or whose inputs are not all known
// (rank and every dim), or whose shape function refuses the estimates, gets
// unknown outputs; the declared type of a value (value_info) fills in
// whatever the estimates miss.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/ShapeEstimator.h"
#include "mpc/Ops/IndexMath.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Runtime/OpRegistry.h"
#include "ShapeHelpers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include <algorithm>
#include <cmath>

using namespace mpc;

/// Constant tensors larger than this are not tracked (shape tensors are tiny).
static constexpr int64_t kMaxConstElements = 4096;

bool ShapeInfo::isFullyKnown() const {
  return rankKnown && llvm::all_of(dims, [](int64_t d) { return d >= 0; });
}

int64_t ShapeInfo::numElements() const {
  if (!isFullyKnown())
    return -1;
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

void mpc::forEachGraphConst(const Graph &g, llvm::function_ref<void(const Graph &)> fn) {
  fn(g);
  for (const Node &n : g.nodes())
    for (const Attribute &a : n.attrs)
      for (const auto &sub : a.graphs)
        forEachGraphConst(*sub, fn);
}

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

using ShapeRefs = llvm::ArrayRef<const ShapeInfo *>;
using ConstRefs = llvm::ArrayRef<const ConstValues *>;

static ShapeInfo unknownShape() { return ShapeInfo(); }

std::vector<int64_t> ConstValues::asInts() const {
  if (!floating)
    return ints;
  std::vector<int64_t> out;
  out.reserve(reals.size());
  for (double d : reals)
    out.push_back(saturatingInt64(d));
  return out;
}

std::vector<double> ConstValues::asReals() const {
  if (floating)
    return reals;
  return std::vector<double>(ints.begin(), ints.end());
}

ShapeInfo mpc::fusedMatMulOperand(const ShapeInfo &x, bool trans, bool transBatch) {
  unsigned r = x.rank();
  if (!x.rankKnown || r < 2)
    return x;
  transBatch &= r >= 3;
  ShapeInfo s = ShapeInfo::of({});
  for (unsigned i = transBatch ? 1 : 0; i < (transBatch ? r - 1 : r - 2); ++i)
    s.dims.push_back(x.dims[i]);
  int64_t rows = x.dims[transBatch ? 0 : r - 2], cols = x.dims[r - 1];
  s.dims.push_back(trans ? cols : rows);
  s.dims.push_back(trans ? rows : cols);
  return s;
}

//===----------------------------------------------------------------------===//
// Shapes from the registry's shape functions
//===----------------------------------------------------------------------===//

/// A folded constant as the host tensor a shape function reads: int64
/// (exact) or float64 elements, which shape functions read with
/// getAsInt64/getAsDouble whatever the input's dtype.
static HostTensor hostTensorOf(const ConstValues &c, const ShapeInfo &shape) {
  HostTensor t(c.floating ? DType::F64 : DType::I64, shape.dims);
  if (c.floating)
    std::copy(c.reals.begin(), c.reals.end(), t.data<double>());
  else
    std::copy(c.ints.begin(), c.ints.end(), t.data<int64_t>());
  return t;
}

/// The output shapes and dtypes of `n` from its registry row, or false when
/// they cannot be estimated.
static bool inferFromRegistry(const Node &n, ShapeRefs in, ConstRefs cv,
                              llvm::ArrayRef<DType> dtypes, std::vector<ShapedType> &outs) {
  const OpDef *row = findOp(n);
  if (!row || !row->shape)
    return false;
  std::vector<ShapedType> inputs(n.numInputs());
  std::vector<HostTensor> storage(n.numInputs());
  std::vector<const HostTensor *> values(n.numInputs(), nullptr);
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    if (!n.input(i))
      continue; // an absent optional input: Undefined
    if (!in[i] || !in[i]->isFullyKnown() || dtypes[i] == DType::Undefined)
      return false;
    inputs[i] = ShapedType{dtypes[i], in[i]->dims};
    if (cv[i] && static_cast<int64_t>(cv[i]->size()) == in[i]->numElements()) {
      storage[i] = hostTensorOf(*cv[i], *in[i]);
      values[i] = &storage[i];
    }
  }
  ShapeQuery q{n, inputs, values, /*estimate=*/true};
  if (llvm::Error e = row->shape(q, outs)) {
    llvm::consumeError(std::move(e)); // estimates only: an unknown, not an error
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Constant folding of small integer tensors
//===----------------------------------------------------------------------===//

static bool tensorValues(const Tensor &t, ConstValues &out) {
  switch (t.dtype) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
  case DType::I8:
  case DType::U8:
  case DType::Bool:
  case DType::I16:
  case DType::U16:
  case DType::I32:
  case DType::U32:
  case DType::I64:
  case DType::U64:
    break;
  default:
    return false; // no scalar reading for this type
  }
  if (t.isExternal())
    return false;
  int64_t n = t.numElements();
  if (n < 0 || n > kMaxConstElements || t.bytes().size() < t.byteSize())
    return false;
  out = ConstValues();
  out.floating = isFloatingPoint(t.dtype);
  for (int64_t i = 0; i < n; ++i)
    if (out.floating)
      out.reals.push_back(t.getAsDouble(i));
    else
      out.ints.push_back(t.getAsInt64(i)); // exact: no trip through a double
  return true;
}

/// Appends element `i` of `a` to `out` (of the same kind).
static void appendElement(ConstValues &out, const ConstValues &a, size_t i) {
  if (a.floating)
    out.reals.push_back(a.reals[i]);
  else
    out.ints.push_back(a.ints[i]);
}

/// Integer l op r, false on overflow (or division by zero).
static bool foldIntegerArith(llvm::StringRef op, int64_t l, int64_t r, int64_t &out) {
  if (op == "Add")
    return !__builtin_add_overflow(l, r, &out);
  if (op == "Sub")
    return !__builtin_sub_overflow(l, r, &out);
  if (op == "Mul")
    return !__builtin_mul_overflow(l, r, &out);
  if (r == 0 || (l == INT64_MIN && r == -1))
    return false;
  if (op == "Mod") { // fmod = 0: the remainder takes the divisor's sign
    out = l % r;
    if (out != 0 && ((out < 0) != (r < 0)))
      out += r;
    return true;
  }
  out = l / r; // ONNX integer Div truncates toward zero
  return true;
}

/// Folds the ops of shape computations when their inputs are constants.
static bool foldNode(const Node &n, ShapeRefs in, ConstRefs cv, ConstValues &out) {
  llvm::StringRef op = n.opType;
  out = ConstValues();
  auto c = [&](unsigned i) -> const ConstValues * { return i < cv.size() ? cv[i] : nullptr; };
  if (op == "Constant") {
    if (const Attribute *a = n.attr("value"); a && !a->tensors.empty())
      return tensorValues(a->tensors[0], out);
    out.floating = n.attr("value_floats") || n.attr("value_float");
    if (const Attribute *a = n.attr("value_ints"))
      out.ints = a->ints;
    else if (const Attribute *a = n.attr("value_floats"))
      out.reals.assign(a->floats.begin(), a->floats.end());
    else if (const Attribute *a = n.attr("value_int"))
      out.ints = {a->i};
    else if (const Attribute *a = n.attr("value_float"))
      out.reals = {a->f};
    else
      return false;
    return true;
  }
  if (op == "Shape") {
    const ShapeInfo *x = in.empty() ? nullptr : in[0];
    if (!x || !x->rankKnown)
      return false;
    int64_t start, end;
    shapes::shapeOpRange(n, x->rank(), start, end);
    for (int64_t i = start; i < end; ++i) {
      if (x->dims[i] < 0)
        return false;
      out.ints.push_back(x->dims[i]);
    }
    return true;
  }
  if (op == "Size") {
    int64_t ne = in.empty() || !in[0] ? -1 : in[0]->numElements();
    if (ne < 0)
      return false;
    out.ints = {ne};
    return true;
  }
  if (!c(0))
    return false;
  const ConstValues &a = *c(0);
  if (op == "Identity" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Flatten") {
    out = a;
    return true;
  }
  if (op == "Cast") {
    DType to = static_cast<DType>(n.intAttr("to", 0));
    out.floating = isFloatingPoint(to);
    if (out.floating)
      out.reals = a.asReals();
    else
      out.ints = a.asInts();
    return true;
  }
  if (op == "Concat") {
    out.floating = a.floating;
    for (unsigned i = 0; i < n.numInputs(); ++i) {
      if (!c(i) || c(i)->floating != a.floating)
        return false;
      out.ints.insert(out.ints.end(), c(i)->ints.begin(), c(i)->ints.end());
      out.reals.insert(out.reals.end(), c(i)->reals.begin(), c(i)->reals.end());
    }
    return out.size() <= static_cast<size_t>(kMaxConstElements);
  }
  if (op == "Gather") {
    // 1-D (or scalar) data along axis 0, the shape-computation case.
    const ShapeInfo *x = in.empty() ? nullptr : in[0];
    if (!c(1) || !x || x->rank() > 1)
      return false;
    out.floating = a.floating;
    for (size_t k = 0; k < c(1)->size(); ++k) {
      int64_t idx = c(1)->integer(k), size = static_cast<int64_t>(a.size());
      idx = idx < 0 ? idx + size : idx;
      if (idx < 0 || idx >= size)
        return false;
      appendElement(out, a, static_cast<size_t>(idx));
    }
    return true;
  }
  if (op == "Slice") {
    const ShapeInfo *x = in.empty() ? nullptr : in[0];
    if (!x || x->rank() != 1 || !c(1) || !c(2) || c(1)->size() != 1 || c(2)->size() != 1)
      return false;
    int64_t step = c(4) && c(4)->size() == 1 ? c(4)->integer(0) : 1;
    if (step == 0)
      return false;
    SliceAxis r =
        resolveSliceAxis(static_cast<int64_t>(a.size()), c(1)->integer(0), c(2)->integer(0), step);
    out.floating = a.floating;
    for (int64_t k = 0; k < r.count; ++k)
      appendElement(out, a, static_cast<size_t>(r.start + k * step));
    return true;
  }
  // PyTorch's expand(n, -1, -1) builds its target shape with ConstantOfShape,
  // Mul, Equal and Where ("-1 keeps the input's size").
  if (op == "ConstantOfShape") {
    ConstValues fill;
    fill.floating = true;
    fill.reals = {0.0};
    if (const Attribute *v = n.attr("value"); v && !v->tensors.empty())
      if (!tensorValues(v->tensors[0], fill) || fill.size() != 1)
        return false;
    int64_t count = 1;
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t d = a.integer(i);
      if (d < 0 || d > kMaxConstElements || (count *= d) > kMaxConstElements)
        return false;
    }
    for (int64_t i = 0; i < count; ++i)
      appendElement(out, fill, 0);
    out.floating = fill.floating;
    return true;
  }
  if (op == "Equal" || op == "Where") {
    unsigned num = op == "Where" ? 3 : 2;
    size_t len = 1;
    for (unsigned i = 0; i < num; ++i) {
      if (!c(i))
        return false;
      len = std::max(len, c(i)->size());
    }
    for (unsigned i = 0; i < num; ++i)
      if (c(i)->size() != 1 && c(i)->size() != len)
        return false;
    auto at = [&](unsigned i, size_t k) { return c(i)->size() == 1 ? 0 : k; };
    if (op == "Equal") {
      for (size_t k = 0; k < len; ++k)
        out.ints.push_back(a.real(at(0, k)) == c(1)->real(at(1, k)));
      return true;
    }
    if (c(1)->floating != c(2)->floating)
      return false;
    out.floating = c(1)->floating;
    for (size_t k = 0; k < len; ++k)
      appendElement(out, a.integer(at(0, k)) ? *c(1) : *c(2), a.integer(at(0, k)) ? at(1, k)
                                                                                 : at(2, k));
    return true;
  }
  // Integer Mod too: exporters split a dimension with Div and Mod
  // (PyTorch's unflatten of packed q/k/v).
  bool intMod = op == "Mod" && n.intAttr("fmod", 0) == 0;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || intMod) {
    if (!c(1) || (intMod && (a.floating || c(1)->floating)))
      return false;
    const ConstValues &b = *c(1);
    if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
      return false;
    size_t len = std::max(a.size(), b.size());
    out.floating = a.floating || b.floating;
    for (size_t i = 0; i < len; ++i) {
      size_t ia = a.size() == 1 ? 0 : i, ib = b.size() == 1 ? 0 : i;
      if (!out.floating) {
        int64_t v;
        if (!foldIntegerArith(op, a.ints[ia], b.ints[ib], v))
          return false;
        out.ints.push_back(v);
        continue;
      }
      double l = a.real(ia), r = b.real(ib);
      if (op == "Add")
        out.reals.push_back(l + r);
      else if (op == "Sub")
        out.reals.push_back(l - r);
      else if (op == "Mul")
        out.reals.push_back(l * r);
      else if (r == 0)
        return false;
      else
        out.reals.push_back(l / r);
    }
    return true;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// ShapeEstimator
//===----------------------------------------------------------------------===//

ShapeEstimator::ShapeEstimator(const Model &m,
                               llvm::function_ref<int64_t(llvm::StringRef)> symbolValue)
    : symbolValue(symbolValue) {
  if (m.graph)
    visitGraph(*m.graph);
  this->symbolValue = nullptr;
  llvm::sort(symbols);
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
}

ShapeInfo ShapeEstimator::fromDeclaredType(const Type &t, bool &usedSymbols) {
  if (!t.isTensor() || !t.hasShape)
    return unknownShape();
  ShapeInfo s = ShapeInfo::of({});
  for (const Dim &d : t.dims) {
    if (d.isKnown()) {
      s.dims.push_back(d.value);
    } else if (d.isSymbolic()) {
      symbols.push_back(d.param);
      s.dims.push_back(symbolValue ? symbolValue(d.param.str()) : 1);
      usedSymbols = true;
    } else {
      s.dims.push_back(-1);
    }
  }
  return s;
}

const ShapeInfo &ShapeEstimator::shape(const Value *v) const {
  auto it = shapes.find(v);
  return it == shapes.end() ? unknown : it->second;
}

DType ShapeEstimator::dtypeOf(const Value *v) const {
  auto it = dtypes.find(v);
  if (it != dtypes.end())
    return it->second;
  return v->type.isTensor() ? v->type.tensorElemType() : DType::Undefined;
}

const ConstValues *ShapeEstimator::constValues(const Value *v) const {
  auto it = consts.find(v);
  return it == consts.end() ? nullptr : &it->second;
}

void ShapeEstimator::visitGraph(const Graph &g) {
  for (const Value *v : g.inputs()) {
    bool usedSymbols = false;
    shapes[v] = fromDeclaredType(v->type, usedSymbols);
    if (usedSymbols)
      symbolic.insert(v);
  }
  for (const Value *v : g.initializers()) {
    const Tensor *t = v->initializer();
    if (!t)
      continue;
    shapes[v] = ShapeInfo::of(t->dims);
    dtypes[v] = t->dtype;
    ConstValues vals;
    if (!isFloatingPoint(t->dtype) || t->numElements() <= 64)
      if (tensorValues(*t, vals))
        consts[v] = std::move(vals);
  }
  for (const Node &n : g.nodes())
    visitNode(n);
  for (const Node &n : g.nodes())
    for (const Attribute &a : n.attrs)
      for (const auto &sub : a.graphs)
        visitGraph(*sub);
}

void ShapeEstimator::visitNode(const Node &n) {
  llvm::SmallVector<const ShapeInfo *, 4> in;
  llvm::SmallVector<const ConstValues *, 4> cv;
  bool fromSymbols =
      llvm::any_of(n.inputs(), [&](const Value *v) { return v && symbolic.count(v); });
  llvm::SmallVector<DType, 4> inTypes;
  for (const Value *v : n.inputs()) {
    const ShapeInfo *s = v ? &shape(v) : nullptr;
    in.push_back(s && s->rankKnown ? s : nullptr);
    cv.push_back(v ? constValues(v) : nullptr);
    inTypes.push_back(v ? dtypeOf(v) : DType::Undefined);
  }
  std::vector<ShapedType> outs;
  if (!inferFromRegistry(n, in, cv, inTypes, outs))
    outs.clear();
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    const Value *v = n.output(i);
    if (!v)
      continue;
    ShapeInfo s = unknownShape();
    if (i < outs.size()) {
      s = ShapeInfo::of(std::move(outs[i].shape));
      dtypes[v] = outs[i].dtype;
    }
    // The declared type fills in what the rules do not know.
    bool declaredSymbols = false;
    ShapeInfo declared = fromDeclaredType(v->type, declaredSymbols);
    bool usedDeclared = false;
    if (!s.rankKnown) {
      s = declared;
      usedDeclared = true;
    } else if (declared.rankKnown && declared.rank() == s.rank()) {
      for (unsigned j = 0; j < s.rank(); ++j)
        if (s.dims[j] < 0) {
          s.dims[j] = declared.dims[j];
          usedDeclared = true;
        }
    }
    if (fromSymbols || (usedDeclared && declaredSymbols))
      symbolic.insert(v);
    shapes[v] = std::move(s);
  }
  if (n.numOutputs() == 1 && n.output(0)) {
    ConstValues vals;
    if (foldNode(n, in, cv, vals))
      consts[n.output(0)] = std::move(vals);
  }
}

bool mpc::einsumIndexSizes(const Node &n, const ShapeEstimator &s, std::vector<int64_t> &sizes) {
  std::vector<std::vector<int64_t>> in;
  for (const Value *v : n.inputs()) {
    if (!v || !s.shape(v).isFullyKnown())
      return false;
    in.push_back(s.shape(v).dims);
  }
  auto plan = shapes::einsumPlan(n, einsumParamsOf(n).equation, in);
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return false;
  }
  sizes.clear();
  for (const auto &label : plan->sizes)
    sizes.push_back(label.second);
  return true;
}
