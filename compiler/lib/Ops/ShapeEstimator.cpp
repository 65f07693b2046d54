//===- ShapeEstimator.cpp - Static shape estimates -------------------------===//
//
// Forward propagation of shapes in node order, one rule per op family, and
// constant folding of the small integer tensors that exporters use to compute
// shapes. A rule that lacks an input shape leaves its outputs unknown; the
// declared type of a value (value_info) fills in whatever the rules miss.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/ShapeEstimator.h"
#include "mpc/Ops/IndexMath.h"
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

/// Normalizes a possibly negative axis; -1 when out of range.
static int64_t normAxis(int64_t axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

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

static std::vector<int64_t> toInts(const ConstValues &v) { return v.asInts(); }

/// An ints attribute, or the constant contents of input `idx` (for ops that
/// moved an attribute to an input in a later opset).
static bool intsFromAttrOrInput(const Node &n, llvm::StringRef attrName, unsigned idx, ConstRefs cv,
                                std::vector<int64_t> &out) {
  if (const Attribute *a = n.attr(attrName)) {
    out = a->ints;
    return true;
  }
  if (idx < cv.size() && cv[idx]) {
    out = toInts(*cv[idx]);
    return true;
  }
  return false;
}

static bool hasInput(const Node &n, unsigned i) { return i < n.numInputs() && n.input(i); }

/// An ints attribute of `size` entries, or `size` copies of `dflt`.
static std::vector<int64_t> sizedInts(const Node &n, llvm::StringRef name, size_t size,
                                      int64_t dflt) {
  const Attribute *a = n.attr(name);
  return a && a->ints.size() == size ? a->ints : std::vector<int64_t>(size, dflt);
}

/// The [start, end) range of Shape (opset 15 attributes) over a rank.
static std::pair<int64_t, int64_t> shapeRange(const Node &n, int64_t rank) {
  int64_t s = n.intAttr("start", 0), e = n.intAttr("end", rank);
  s = std::clamp<int64_t>(s < 0 ? s + rank : s, 0, rank);
  e = std::clamp<int64_t>(e < 0 ? e + rank : e, 0, rank);
  return {s, std::max(s, e)};
}

/// Numpy-style broadcasting of all `ins`.
static ShapeInfo broadcast(ShapeRefs ins) {
  unsigned rank = 0;
  for (const ShapeInfo *s : ins) {
    if (!s || !s->rankKnown)
      return unknownShape();
    rank = std::max(rank, s->rank());
  }
  std::vector<int64_t> dims(rank, 1);
  for (unsigned i = 0; i < rank; ++i) {
    bool anyUnknown = false;
    int64_t big = 1;
    for (const ShapeInfo *s : ins) {
      if (i >= s->rank())
        continue;
      int64_t d = s->dims[s->rank() - 1 - i];
      if (d < 0)
        anyUnknown = true;
      else if (d != 1)
        big = d;
    }
    dims[rank - 1 - i] = big != 1 ? big : anyUnknown ? -1 : 1;
  }
  return ShapeInfo::of(std::move(dims));
}

//===----------------------------------------------------------------------===//
// Op families
//===----------------------------------------------------------------------===//

/// Ops whose first output has the shape of their first input.
static bool isSameShapeOp(llvm::StringRef op) {
  return llvm::StringSwitch<bool>(op)
      .Cases("Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization", true)
      .Cases("Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum", true)
      .Cases("Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu", "GroupNormalization", true)
      .Cases("HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization", true)
      .Cases("IsInf", "IsNaN", "LRN", "LayerNormalization", "LeakyRelu", "Log", true)
      .Cases("LogSoftmax", "LpNormalization", "MeanVarianceNormalization", "Mish", "Neg", true)
      .Cases("Not", "Reciprocal", "Relu", "ReverseSequence", "Round", "Selu", "Shrink", true)
      .Cases("Sigmoid", "Sign", "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", true)
      .Cases("Tan", "Tanh", "ThresholdedRelu", "Trilu", "SimplifiedLayerNormalization", true)
      .Cases("FastGelu", "QuickGelu", "BiasGelu", "SkipLayerNormalization", true)
      .Default(false);
}

/// Element-wise ops with numpy broadcasting over all inputs.
static bool isBroadcastOp(llvm::StringRef op) {
  return llvm::StringSwitch<bool>(op)
      .Cases("Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "PRelu", true)
      .Cases("And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater", true)
      .Cases("GreaterOrEqual", "Where", "Max", "Min", "Sum", "Mean", "BitwiseAnd", true)
      .Cases("BitwiseOr", "BitwiseXor", true)
      .Default(false);
}

static bool isReduceOp(llvm::StringRef op) { return op.startswith("Reduce"); }

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

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

static ShapeInfo matMulShape(const ShapeInfo *a, const ShapeInfo *b) {
  if (!a || !b || !a->rankKnown || !b->rankKnown || a->rank() == 0 || b->rank() == 0)
    return unknownShape();
  ShapeInfo a2 = *a, b2 = *b;
  bool dropM = a2.rank() == 1, dropN = b2.rank() == 1;
  if (dropM)
    a2.dims.insert(a2.dims.begin(), 1);
  if (dropN)
    b2.dims.push_back(1);
  ShapeInfo batchA = ShapeInfo::of({a2.dims.begin(), a2.dims.end() - 2});
  ShapeInfo batchB = ShapeInfo::of({b2.dims.begin(), b2.dims.end() - 2});
  ShapeInfo out = broadcast({&batchA, &batchB});
  if (!dropM)
    out.dims.push_back(a2.dims[a2.rank() - 2]);
  if (!dropN)
    out.dims.push_back(b2.dims.back());
  return out;
}

/// Spatial output sizes of Conv and the pools.
static ShapeInfo windowShape(const Node &n, const ShapeInfo &x, llvm::ArrayRef<int64_t> kernel,
                             int64_t outChannels, bool isPool) {
  unsigned spatial = x.rank() - 2;
  if (kernel.size() != spatial)
    return unknownShape();
  std::vector<int64_t> strides = sizedInts(n, "strides", spatial, 1),
                       dil = sizedInts(n, "dilations", spatial, 1),
                       pads = sizedInts(n, "pads", 2 * spatial, 0);
  llvm::StringRef autoPad = n.stringAttr("auto_pad", "NOTSET");
  bool ceilMode = isPool && n.intAttr("ceil_mode", 0) != 0;
  std::vector<int64_t> dims = {x.dims[0], outChannels};
  for (unsigned i = 0; i < spatial; ++i) {
    int64_t in = x.dims[i + 2];
    int64_t s = std::max<int64_t>(strides[i], 1);
    int64_t eff = dil[i] * (kernel[i] - 1) + 1;
    if (in < 0 || kernel[i] < 0) {
      dims.push_back(-1);
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      dims.push_back((in + s - 1) / s);
    } else if (autoPad == "VALID") {
      dims.push_back(in >= eff ? (in - eff) / s + 1 : 0);
    } else {
      int64_t span = in + pads[i] + pads[i + spatial] - eff;
      if (span < 0) {
        dims.push_back(0);
        continue;
      }
      int64_t out = (ceilMode ? (span + s - 1) / s : span / s) + 1;
      // ceil_mode: the last window must start inside the input or left pad.
      if (ceilMode && (out - 1) * s >= in + pads[i])
        --out;
      dims.push_back(out);
    }
  }
  return ShapeInfo::of(std::move(dims));
}

static std::vector<int64_t> kernelOf(const Node &n, const ShapeInfo *w) {
  if (const Attribute *a = n.attr("kernel_shape"))
    return a->ints;
  if (w && w->rankKnown && w->rank() > 2)
    return std::vector<int64_t>(w->dims.begin() + 2, w->dims.end());
  return {};
}

static ShapeInfo convShape(const Node &n, const ShapeInfo *x, const ShapeInfo *w) {
  if (!x || !w || !x->rankKnown || !w->rankKnown || x->rank() < 3 || w->rank() != x->rank())
    return unknownShape();
  return windowShape(n, *x, kernelOf(n, w), w->dims[0], /*isPool=*/false);
}

static ShapeInfo convTransposeShape(const Node &n, const ShapeInfo *x, const ShapeInfo *w) {
  if (!x || !w || !x->rankKnown || !w->rankKnown || x->rank() < 3 || w->rank() != x->rank())
    return unknownShape();
  unsigned spatial = x->rank() - 2;
  int64_t group = n.intAttr("group", 1);
  int64_t cout = w->dims[1] < 0 ? -1 : w->dims[1] * group;
  std::vector<int64_t> dims = {x->dims[0], cout};
  if (const Attribute *os = n.attr("output_shape"); os && os->ints.size() >= spatial) {
    dims.insert(dims.end(), os->ints.end() - spatial, os->ints.end());
    return ShapeInfo::of(std::move(dims));
  }
  std::vector<int64_t> kernel = kernelOf(n, w);
  if (kernel.size() != spatial)
    return unknownShape();
  std::vector<int64_t> strides = sizedInts(n, "strides", spatial, 1),
                       dil = sizedInts(n, "dilations", spatial, 1),
                       pads = sizedInts(n, "pads", 2 * spatial, 0),
                       outPad = sizedInts(n, "output_padding", spatial, 0);
  llvm::StringRef autoPad = n.stringAttr("auto_pad", "NOTSET");
  for (unsigned i = 0; i < spatial; ++i) {
    int64_t in = x->dims[i + 2];
    if (in < 0) {
      dims.push_back(-1);
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      dims.push_back(in * strides[i]);
    } else {
      int64_t eff = dil[i] * (kernel[i] - 1) + 1;
      int64_t p = autoPad == "VALID" ? 0 : pads[i] + pads[i + spatial];
      dims.push_back(strides[i] * (in - 1) + outPad[i] + eff - p);
    }
  }
  return ShapeInfo::of(std::move(dims));
}

static ShapeInfo reshapeShape(const Node &n, const ShapeInfo *x, const ConstValues *target) {
  if (!target)
    return unknownShape();
  std::vector<int64_t> dims = toInts(*target);
  bool allowZero = n.intAttr("allowzero", 0) != 0;
  int64_t known = 1, inferAt = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowZero)
      dims[i] = x && x->rankKnown && i < x->rank() ? x->dims[i] : -1;
    if (dims[i] == -1 && target->integer(i) == -1) {
      inferAt = static_cast<int64_t>(i);
      continue;
    }
    if (dims[i] < 0)
      known = -1;
    else if (known >= 0)
      known *= dims[i];
  }
  if (inferAt >= 0) {
    int64_t total = x ? x->numElements() : -1;
    dims[inferAt] = total >= 0 && known > 0 ? total / known : -1;
  }
  return ShapeInfo::of(std::move(dims));
}

static ShapeInfo reduceShape(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  if (!x || !x->rankKnown)
    return unknownShape();
  std::vector<int64_t> axes;
  bool haveAxes = intsFromAttrOrInput(n, "axes", 1, cv, axes);
  if (!haveAxes && hasInput(n, 1))
    return unknownShape();
  bool keep = n.intAttr("keepdims", 1) != 0;
  if (axes.empty() && n.intAttr("noop_with_empty_axes", 0) != 0)
    return *x;
  int64_t rank = x->rank();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    int64_t ax = normAxis(a, rank);
    if (ax < 0)
      return unknownShape();
    reduced[ax] = true;
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      dims.push_back(x->dims[i]);
    else if (keep)
      dims.push_back(1);
  }
  return ShapeInfo::of(std::move(dims));
}

static ShapeInfo sliceShape(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  if (!x || !x->rankKnown)
    return unknownShape();
  std::vector<int64_t> starts, ends, axes, steps;
  if (!intsFromAttrOrInput(n, "starts", 1, cv, starts) ||
      !intsFromAttrOrInput(n, "ends", 2, cv, ends) || starts.size() != ends.size())
    return unknownShape();
  if (!intsFromAttrOrInput(n, "axes", 3, cv, axes)) {
    if (hasInput(n, 3))
      return unknownShape();
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (!intsFromAttrOrInput(n, "steps", 4, cv, steps)) {
    if (hasInput(n, 4))
      return unknownShape();
    steps.assign(starts.size(), 1);
  }
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return unknownShape();
  ShapeInfo out = *x;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = normAxis(axes[i], x->rank());
    if (ax < 0 || steps[i] == 0)
      return unknownShape();
    int64_t d = x->dims[ax];
    if (d < 0) {
      out.dims[ax] = -1;
      continue;
    }
    out.dims[ax] = resolveSliceAxis(d, starts[i], ends[i], steps[i]).count;
  }
  return out;
}

static std::vector<ShapeInfo> splitShapes(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  std::vector<ShapeInfo> outs(n.numOutputs());
  if (!x || !x->rankKnown)
    return outs;
  int64_t ax = normAxis(n.intAttr("axis", 0), x->rank());
  if (ax < 0)
    return outs;
  std::vector<int64_t> sizes;
  if (!intsFromAttrOrInput(n, "split", 1, cv, sizes)) {
    if (hasInput(n, 1))
      return outs;
    int64_t d = x->dims[ax], parts = n.numOutputs();
    if (d < 0 || parts == 0)
      return outs;
    int64_t chunk = (d + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, d - i * chunk)));
  }
  for (unsigned i = 0; i < outs.size() && i < sizes.size(); ++i) {
    outs[i] = *x;
    outs[i].dims[ax] = sizes[i];
  }
  return outs;
}

static ShapeInfo einsumShape(const Node &n, ShapeRefs in,
                             llvm::SmallVectorImpl<std::pair<char, int64_t>> *letters) {
  std::string eq;
  for (char c : n.stringAttr("equation", ""))
    if (c != ' ')
      eq.push_back(c);
  llvm::StringRef e(eq);
  auto [lhs, rhs] = e.split("->");
  bool explicitOut = e.contains("->");
  llvm::SmallVector<llvm::StringRef, 4> terms;
  lhs.split(terms, ',');
  if (terms.size() != in.size())
    return unknownShape();
  int64_t size[128];
  std::fill(std::begin(size), std::end(size), -2); // -2: letter unseen
  unsigned count[128] = {};
  std::vector<const ShapeInfo *> ellipsis;
  std::vector<ShapeInfo> ellipsisStore(terms.size());
  for (size_t t = 0; t < terms.size(); ++t) {
    const ShapeInfo *s = in[t];
    if (!s || !s->rankKnown)
      return unknownShape();
    llvm::StringRef term = terms[t];
    bool hasEllipsis = term.contains("...");
    std::string plain = term.str();
    if (hasEllipsis)
      plain.erase(plain.find("..."), 3);
    int64_t ellRank = static_cast<int64_t>(s->rank()) - static_cast<int64_t>(plain.size());
    if (ellRank < 0 || (!hasEllipsis && ellRank != 0))
      return unknownShape();
    size_t dim = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.substr(i).startswith("...")) {
        ellipsisStore[t] = ShapeInfo::of({s->dims.begin() + dim, s->dims.begin() + dim + ellRank});
        ellipsis.push_back(&ellipsisStore[t]);
        dim += ellRank;
        i += 2;
        continue;
      }
      unsigned char c = static_cast<unsigned char>(term[i]);
      if (c >= 128)
        return unknownShape();
      int64_t d = s->dims[dim++];
      if (size[c] == -2 || size[c] == -1 || size[c] == 1)
        size[c] = d;
      ++count[c];
    }
  }
  ShapeInfo ell = ellipsis.empty() ? ShapeInfo::of({}) : broadcast(ellipsis);
  std::string outTerm;
  if (explicitOut) {
    outTerm = rhs.str();
  } else {
    if (!ellipsis.empty())
      outTerm = "...";
    for (unsigned c = 0; c < 128; ++c)
      if (count[c] == 1)
        outTerm.push_back(static_cast<char>(c));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < outTerm.size(); ++i) {
    if (llvm::StringRef(outTerm).substr(i).startswith("...")) {
      dims.insert(dims.end(), ell.dims.begin(), ell.dims.end());
      i += 2;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(outTerm[i]);
    if (c >= 128 || size[c] == -2)
      return unknownShape();
    dims.push_back(size[c]);
  }
  if (letters) {
    for (unsigned c = 0; c < 128; ++c)
      if (size[c] != -2)
        letters->push_back({static_cast<char>(c), size[c]});
    for (int64_t d : ell.dims)
      letters->push_back({'.', d});
  }
  return ShapeInfo::of(std::move(dims));
}

/// LSTM/GRU/RNN outputs: Y, Y_h (and Y_c for LSTM).
static std::vector<ShapeInfo> rnnShapes(const Node &n, const ShapeInfo *x, const ShapeInfo *w) {
  std::vector<ShapeInfo> outs(n.numOutputs());
  if (!x || !x->rankKnown || x->rank() != 3)
    return outs;
  bool batchFirst = n.intAttr("layout", 0) != 0;
  int64_t seq = x->dims[batchFirst ? 1 : 0], batch = x->dims[batchFirst ? 0 : 1];
  int64_t dirs = n.stringAttr("direction", "forward") == "bidirectional" ? 2 : 1;
  int64_t hidden = n.intAttr("hidden_size", -1);
  if (hidden < 0 && w && w->rankKnown && w->rank() == 3 && w->dims[1] >= 0) {
    int64_t gates = n.opType == "LSTM" ? 4 : n.opType == "GRU" ? 3 : 1;
    hidden = w->dims[1] / gates;
  }
  for (unsigned i = 0; i < outs.size(); ++i) {
    if (i == 0)
      outs[i] = batchFirst ? ShapeInfo::of({batch, seq, dirs, hidden})
                           : ShapeInfo::of({seq, dirs, batch, hidden});
    else
      outs[i] =
          batchFirst ? ShapeInfo::of({batch, dirs, hidden}) : ShapeInfo::of({dirs, batch, hidden});
  }
  return outs;
}

static ShapeInfo gatherShape(const Node &n, const ShapeInfo *data, const ShapeInfo *idx) {
  if (!data || !idx || !data->rankKnown || !idx->rankKnown)
    return unknownShape();
  int64_t ax = normAxis(n.intAttr("axis", 0), data->rank());
  if (ax < 0)
    return unknownShape();
  std::vector<int64_t> dims(data->dims.begin(), data->dims.begin() + ax);
  dims.insert(dims.end(), idx->dims.begin(), idx->dims.end());
  dims.insert(dims.end(), data->dims.begin() + ax + 1, data->dims.end());
  return ShapeInfo::of(std::move(dims));
}

static ShapeInfo squeezeShape(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  if (!x || !x->rankKnown)
    return unknownShape();
  std::vector<int64_t> axes;
  if (!intsFromAttrOrInput(n, "axes", 1, cv, axes) && hasInput(n, 1))
    return unknownShape();
  std::vector<bool> drop(x->rank(), false);
  if (axes.empty()) {
    for (unsigned i = 0; i < x->rank(); ++i) {
      if (x->dims[i] < 0)
        return unknownShape();
      drop[i] = x->dims[i] == 1;
    }
  }
  for (int64_t a : axes) {
    int64_t ax = normAxis(a, x->rank());
    if (ax < 0)
      return unknownShape();
    drop[ax] = true;
  }
  std::vector<int64_t> dims;
  for (unsigned i = 0; i < x->rank(); ++i)
    if (!drop[i])
      dims.push_back(x->dims[i]);
  return ShapeInfo::of(std::move(dims));
}

static ShapeInfo unsqueezeShape(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  std::vector<int64_t> axes;
  if (!x || !x->rankKnown || !intsFromAttrOrInput(n, "axes", 1, cv, axes))
    return unknownShape();
  int64_t rank = x->rank() + axes.size();
  std::vector<bool> added(rank, false);
  for (int64_t a : axes) {
    int64_t ax = normAxis(a, rank);
    if (ax < 0)
      return unknownShape();
    added[ax] = true;
  }
  std::vector<int64_t> dims;
  unsigned src = 0;
  for (int64_t i = 0; i < rank; ++i)
    dims.push_back(added[i] ? 1 : src < x->rank() ? x->dims[src++] : -1);
  return ShapeInfo::of(std::move(dims));
}

static ShapeInfo concatShape(const Node &n, ShapeRefs in) {
  if (in.empty() || !in[0] || !in[0]->rankKnown)
    return unknownShape();
  int64_t ax = normAxis(n.intAttr("axis", 0), in[0]->rank());
  if (ax < 0)
    return unknownShape();
  ShapeInfo out = *in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i] || !in[i]->rankKnown || in[i]->rank() != out.rank())
      return unknownShape();
    int64_t d = in[i]->dims[ax];
    out.dims[ax] = out.dims[ax] < 0 || d < 0 ? -1 : out.dims[ax] + d;
    for (unsigned j = 0; j < out.rank(); ++j)
      if (j != ax && out.dims[j] < 0)
        out.dims[j] = in[i]->dims[j];
  }
  return out;
}

static ShapeInfo padShape(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  std::vector<int64_t> pads;
  if (!x || !x->rankKnown || !intsFromAttrOrInput(n, "pads", 1, cv, pads))
    return unknownShape();
  std::vector<int64_t> axes;
  if (!intsFromAttrOrInput(n, "axes", 3, cv, axes)) {
    if (hasInput(n, 3))
      return unknownShape();
    for (unsigned i = 0; i < x->rank(); ++i)
      axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size())
    return unknownShape();
  ShapeInfo out = *x;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax = normAxis(axes[i], x->rank());
    if (ax < 0)
      return unknownShape();
    if (out.dims[ax] >= 0)
      out.dims[ax] += pads[i] + pads[i + axes.size()];
  }
  return out;
}

static ShapeInfo resizeShape(const Node &n, const ShapeInfo *x, ConstRefs cv) {
  if (!x || !x->rankKnown)
    return unknownShape();
  bool upsample = n.opType == "Upsample";
  unsigned sizesIdx = 3, scalesIdx = upsample ? 1 : 2;
  if (sizesIdx < cv.size() && cv[sizesIdx] && cv[sizesIdx]->size() == x->rank())
    return ShapeInfo::of(toInts(*cv[sizesIdx]));
  std::vector<double> scales;
  if (const Attribute *a = n.attr("scales"))
    scales.assign(a->floats.begin(), a->floats.end());
  else if (scalesIdx < cv.size() && cv[scalesIdx])
    scales = cv[scalesIdx]->asReals();
  if (scales.size() != x->rank())
    return unknownShape();
  ShapeInfo out = *x;
  for (unsigned i = 0; i < out.rank(); ++i)
    if (out.dims[i] >= 0)
      out.dims[i] = static_cast<int64_t>(std::floor(out.dims[i] * scales[i]));
  return out;
}

/// The output shapes of one node from its input shapes and constant inputs.
static std::vector<ShapeInfo> inferNode(const Node &n, ShapeRefs in, ConstRefs cv) {
  std::vector<ShapeInfo> outs(n.numOutputs());
  if (outs.empty() || (!n.domain.empty() && n.domain != "ai.onnx" && n.domain != "com.microsoft"))
    return outs;
  llvm::StringRef op = n.opType;
  const ShapeInfo *x = in.empty() ? nullptr : in[0];
  const ShapeInfo *y = in.size() > 1 ? in[1] : nullptr;
  const ConstValues *c1 = cv.size() > 1 ? cv[1] : nullptr;
  ShapeInfo &out = outs[0];

  if (isSameShapeOp(op)) {
    if (x)
      for (ShapeInfo &o : outs)
        o = *x;
    if (op == "LayerNormalization" && x && x->rankKnown && outs.size() > 1) {
      // Mean and InvStdDev keep the leading axes and reduce the rest to 1.
      int64_t ax = normAxis(n.intAttr("axis", -1), x->rank());
      for (unsigned i = 1; i < outs.size(); ++i) {
        outs[i] = *x;
        for (unsigned j = ax < 0 ? 0 : ax; j < x->rank(); ++j)
          outs[i].dims[j] = 1;
      }
    } else if (op == "BatchNormalization") {
      outs.resize(n.numOutputs());
      for (unsigned i = 1; i < outs.size(); ++i)
        outs[i] = i < in.size() && in[i] ? *in[i] : unknownShape();
    }
  } else if (isBroadcastOp(op)) {
    out = broadcast(in);
  } else if (op == "MatMul" || op == "MatMulInteger") {
    out = matMulShape(x, y);
  } else if (op == "FusedMatMul") {
    if (x && y) {
      ShapeInfo a = fusedMatMulOperand(*x, n.intAttr("transA", 0), n.intAttr("transBatchA", 0));
      ShapeInfo b = fusedMatMulOperand(*y, n.intAttr("transB", 0), n.intAttr("transBatchB", 0));
      out = matMulShape(&a, &b);
    }
  } else if (op == "Gemm") {
    if (x && y && x->rankKnown && y->rankKnown && x->rank() == 2 && y->rank() == 2) {
      bool ta = n.intAttr("transA", 0) != 0, tb = n.intAttr("transB", 0) != 0;
      out = ShapeInfo::of({x->dims[ta ? 1 : 0], y->dims[tb ? 0 : 1]});
    }
  } else if (op == "Conv") {
    out = convShape(n, x, y);
  } else if (op == "ConvTranspose") {
    out = convTransposeShape(n, x, y);
  } else if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    if (x && x->rankKnown && x->rank() >= 3)
      for (ShapeInfo &o : outs)
        o = windowShape(n, *x, kernelOf(n, nullptr), x->dims[1], /*isPool=*/true);
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
    if (x && x->rankKnown && x->rank() >= 2) {
      out = *x;
      std::fill(out.dims.begin() + 2, out.dims.end(), 1);
    }
  } else if (op == "Einsum") {
    out = einsumShape(n, in, nullptr);
  } else if (op == "LSTM" || op == "GRU" || op == "RNN") {
    outs = rnnShapes(n, x, y);
  } else if (op == "Reshape") {
    out = reshapeShape(n, x, c1);
  } else if (op == "Flatten") {
    if (x && x->rankKnown) {
      int64_t ax = n.intAttr("axis", 1);
      ax = ax < 0 ? ax + x->rank() : ax;
      if (ax >= 0 && ax <= static_cast<int64_t>(x->rank())) {
        ShapeInfo a = ShapeInfo::of({x->dims.begin(), x->dims.begin() + ax});
        ShapeInfo b = ShapeInfo::of({x->dims.begin() + ax, x->dims.end()});
        out = ShapeInfo::of({a.numElements(), b.numElements()});
      }
    }
  } else if (op == "Transpose") {
    if (x && x->rankKnown) {
      std::vector<int64_t> perm;
      if (const Attribute *a = n.attr("perm"))
        perm = a->ints;
      else
        for (int64_t i = x->rank() - 1; i >= 0; --i)
          perm.push_back(i);
      if (perm.size() == x->rank()) {
        out = ShapeInfo::of({});
        for (int64_t p : perm)
          out.dims.push_back(normAxis(p, x->rank()) >= 0 ? x->dims[normAxis(p, x->rank())] : -1);
      }
    }
  } else if (op == "Squeeze") {
    out = squeezeShape(n, x, cv);
  } else if (op == "Unsqueeze") {
    out = unsqueezeShape(n, x, cv);
  } else if (op == "Concat") {
    out = concatShape(n, in);
  } else if (op == "Split") {
    outs = splitShapes(n, x, cv);
  } else if (op == "Slice") {
    out = sliceShape(n, x, cv);
  } else if (op == "Gather") {
    out = gatherShape(n, x, y);
  } else if (op == "GatherElements") {
    if (y)
      out = *y;
  } else if (op == "ScatterND" || op == "ScatterElements" || op == "Scatter") {
    if (x)
      out = *x;
  } else if (isReduceOp(op)) {
    out = reduceShape(n, x, cv);
  } else if (op == "ArgMax" || op == "ArgMin") {
    if (x && x->rankKnown) {
      int64_t ax = normAxis(n.intAttr("axis", 0), x->rank());
      if (ax >= 0) {
        out = *x;
        if (n.intAttr("keepdims", 1))
          out.dims[ax] = 1;
        else
          out.dims.erase(out.dims.begin() + ax);
      }
    }
  } else if (op == "TopK") {
    if (x && x->rankKnown && c1 && c1->size() == 1) {
      int64_t ax = normAxis(n.intAttr("axis", -1), x->rank());
      if (ax >= 0)
        for (ShapeInfo &o : outs) {
          o = *x;
          o.dims[ax] = c1->integer(0);
        }
    }
  } else if (op == "Expand") {
    if (c1) {
      ShapeInfo target = ShapeInfo::of(toInts(*c1));
      out = broadcast({x, &target});
    }
  } else if (op == "Tile") {
    if (x && x->rankKnown && c1 && c1->size() == x->rank()) {
      out = *x;
      for (unsigned i = 0; i < out.rank(); ++i)
        if (out.dims[i] >= 0)
          out.dims[i] *= c1->integer(i);
    }
  } else if (op == "Pad") {
    out = padShape(n, x, cv);
  } else if (op == "Resize" || op == "Upsample") {
    out = resizeShape(n, x, cv);
  } else if (op == "DepthToSpace" || op == "SpaceToDepth") {
    int64_t b = n.intAttr("blocksize", 0);
    if (x && x->rankKnown && x->rank() == 4 && b > 0) {
      out = *x;
      bool d2s = op == "DepthToSpace";
      auto scale = [&](int64_t d, bool up) { return d < 0 ? -1 : up ? d * b : d / b; };
      out.dims[1] = d2s ? (x->dims[1] < 0 ? -1 : x->dims[1] / (b * b))
                        : (x->dims[1] < 0 ? -1 : x->dims[1] * b * b);
      out.dims[2] = scale(x->dims[2], d2s);
      out.dims[3] = scale(x->dims[3], d2s);
    }
  } else if (op == "Shape") {
    if (x && x->rankKnown) {
      auto [start, end] = shapeRange(n, x->rank());
      out = ShapeInfo::of({end - start});
    }
  } else if (op == "Size") {
    out = ShapeInfo::of({});
  } else if (op == "ConstantOfShape") {
    if (cv.size() > 0 && cv[0])
      out = ShapeInfo::of(toInts(*cv[0]));
  } else if (op == "Constant") {
    if (const Attribute *a = n.attr("value"); a && !a->tensors.empty())
      out = ShapeInfo::of(a->tensors[0].dims);
    else if (n.attr("value_float") || n.attr("value_int") || n.attr("value_string"))
      out = ShapeInfo::of({});
    else if (const Attribute *a = n.attr("value_floats"))
      out = ShapeInfo::of({static_cast<int64_t>(a->floats.size())});
    else if (const Attribute *a = n.attr("value_ints"))
      out = ShapeInfo::of({static_cast<int64_t>(a->ints.size())});
  } else if (op == "Range") {
    if (cv.size() == 3 && cv[0] && cv[1] && cv[2] && cv[0]->size() == 1 && cv[1]->size() == 1 &&
        cv[2]->size() == 1 && cv[2]->real(0) != 0) {
      if (!cv[0]->floating && !cv[1]->floating && !cv[2]->floating) {
        out = ShapeInfo::of({integerRangeCount(cv[0]->ints[0], cv[1]->ints[0], cv[2]->ints[0])});
      } else {
        double cnt = std::ceil((cv[1]->real(0) - cv[0]->real(0)) / cv[2]->real(0));
        out = ShapeInfo::of({std::max<int64_t>(0, saturatingInt64(cnt))});
      }
    }
  } else if (op == "EyeLike" || op == "RandomNormalLike" || op == "RandomUniformLike" ||
             op == "Bernoulli") {
    if (x)
      out = *x;
  }
  return outs;
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
    auto [start, end] = shapeRange(n, x->rank());
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
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (!c(1))
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
  for (const Value *v : n.inputs()) {
    const ShapeInfo *s = v ? &shape(v) : nullptr;
    in.push_back(s && s->rankKnown ? s : nullptr);
    cv.push_back(v ? constValues(v) : nullptr);
  }
  std::vector<ShapeInfo> outs = inferNode(n, in, cv);
  for (unsigned i = 0; i < n.numOutputs(); ++i) {
    const Value *v = n.output(i);
    if (!v)
      continue;
    ShapeInfo s = i < outs.size() ? std::move(outs[i]) : unknownShape();
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
  llvm::SmallVector<const ShapeInfo *, 4> in;
  for (const Value *v : n.inputs())
    in.push_back(v ? &s.shape(v) : nullptr);
  llvm::SmallVector<std::pair<char, int64_t>, 16> letters;
  if (!einsumShape(n, in, &letters).rankKnown)
    return false;
  sizes.clear();
  for (auto &l : letters)
    sizes.push_back(l.second);
  return true;
}
