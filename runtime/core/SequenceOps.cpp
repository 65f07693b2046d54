//===- SequenceOps.cpp - Sequence values and the ONNX sequence ops ----------===//
//
// Sequences exist in dynamic mode only: a sequence value is a vector of host
// tensors of one element type, kept in its executor slot. The ops below move
// tensors in and out of them on the host (they copy bytes, no arithmetic),
// so every dtype the runtime stores works. Optional values (Optional,
// OptionalHasElement, OptionalGetElement) are carried the same way: an
// optional is a SequenceValue marked optional holding a tensor, a sequence
// or nothing.
//
//===----------------------------------------------------------------------===//
#include "ExecutorSlot.h"
#include "../ops/ShapeHelpers.h"
#include "llvm/ADT/StringSwitch.h"
#include <cstring>

using namespace mpc;

bool mpc::isSequenceOp(const Node &n) {
  if (!n.domain.empty() && n.domain != "ai.onnx")
    return false;
  return llvm::StringSwitch<bool>(n.opType)
      .Cases("SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase", true)
      .Cases("SequenceLength", "SequenceEmpty", "ConcatFromSequence", "SplitToSequence", true)
      .Cases("Optional", "OptionalHasElement", "OptionalGetElement", true)
      .Default(false);
}

/// A position operand normalized against `size`; `end` allows size itself
/// (SequenceInsert).
static llvm::Expected<int64_t> position(const Node &n, const HostTensor *t, int64_t size,
                                        int64_t dflt, bool end) {
  if (!t)
    return dflt;
  if (t->numElements() != 1)
    return shapes::nodeError(n, "position must be a scalar");
  int64_t p = t->getAsInt64(0);
  int64_t hi = end ? size : size - 1;
  if (p < -size || p > hi)
    return shapes::nodeError(n, "position " + llvm::Twine(p) + " is out of range for a "
                                  "sequence of " + llvm::Twine(size) + " tensors");
  return p < 0 ? p + size : p;
}

static int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Concatenates (or, with newAxis, stacks) the tensors along `axis`.
static llvm::Expected<HostTensor> concatItems(const Node &n, const SequenceValue &s,
                                              int64_t axis, bool newAxis) {
  if (s.items.empty())
    return shapes::nodeError(n, "cannot concatenate an empty sequence");
  const HostTensor &first = s.items[0];
  int64_t rank = int64_t(first.shape.size()) + (newAxis ? 1 : 0);
  if (!shapes::normalizeAxis(axis, rank))
    return shapes::nodeError(n, "axis " + llvm::Twine(axis) + " is out of range");
  size_t esize = runtimeElementSize(first.dtype);
  // Each item seen as [outer, len, inner] around the axis.
  auto dimsOf = [&](const HostTensor &t) {
    std::vector<int64_t> d = t.shape;
    if (newAxis)
      d.insert(d.begin() + axis, 1);
    return d;
  };
  std::vector<int64_t> outShape = dimsOf(first);
  outShape[axis] = 0;
  for (const HostTensor &t : s.items) {
    std::vector<int64_t> d = dimsOf(t);
    if (t.dtype != first.dtype || d.size() != outShape.size())
      return shapes::nodeError(n, "sequence tensors differ in type or rank");
    for (size_t k = 0; k < d.size(); ++k)
      if (int64_t(k) != axis && d[k] != outShape[k])
        return shapes::nodeError(n, "sequence tensors differ in shape " + formatShape(d) +
                                      " vs " + formatShape(first.shape));
    outShape[axis] += d[axis];
  }
  HostTensor out(first.dtype, outShape);
  int64_t outer = product(llvm::makeArrayRef(outShape).take_front(axis));
  size_t inner = size_t(product(llvm::makeArrayRef(outShape).drop_front(axis + 1))) * esize;
  size_t rowBytes = size_t(outShape[axis]) * inner;
  size_t at = 0;
  for (const HostTensor &t : s.items) {
    size_t len = size_t(dimsOf(t)[axis]) * inner;
    for (int64_t o = 0; o < outer; ++o)
      if (len)
        std::memcpy(out.bytes.data() + o * rowBytes + at, t.bytes.data() + o * len, len);
    at += len;
  }
  return out;
}

/// SplitToSequence: chunks of `input` along `axis`.
static llvm::Expected<std::shared_ptr<SequenceValue>>
splitItems(const Node &n, const HostTensor &x, const HostTensor *split) {
  int64_t axis = n.intAttr("axis", 0);
  if (!shapes::normalizeAxis(axis, int64_t(x.shape.size())))
    return shapes::nodeError(n, "axis is out of range for input of shape " +
                                  formatShape(x.shape));
  int64_t dim = x.shape[axis];
  std::vector<int64_t> lengths;
  bool squeeze = false;
  if (!split) {
    lengths.assign(size_t(dim), 1);
    squeeze = n.intAttr("keepdims", 1) == 0;
  } else if (split->shape.empty()) {
    int64_t c = split->getAsInt64(0);
    if (c <= 0)
      return shapes::nodeError(n, "split must be positive");
    for (int64_t o = 0; o < dim; o += c)
      lengths.push_back(std::min(c, dim - o));
  } else {
    int64_t total = 0;
    for (int64_t i = 0; i < split->numElements(); ++i) {
      lengths.push_back(split->getAsInt64(i));
      if (lengths.back() < 0)
        return shapes::nodeError(n, "split lengths must not be negative");
      total += lengths.back();
    }
    if (total != dim)
      return shapes::nodeError(n, "split lengths sum to " + llvm::Twine(total) +
                                    ", the axis has " + llvm::Twine(dim));
  }
  auto seq = std::make_shared<SequenceValue>();
  seq->elem = x.dtype;
  size_t esize = runtimeElementSize(x.dtype);
  int64_t outer = product(llvm::makeArrayRef(x.shape).take_front(axis));
  size_t inner = size_t(product(llvm::makeArrayRef(x.shape).drop_front(axis + 1))) * esize;
  int64_t start = 0;
  for (int64_t len : lengths) {
    std::vector<int64_t> shape = x.shape;
    shape[axis] = len;
    if (squeeze)
      shape.erase(shape.begin() + axis);
    HostTensor part(x.dtype, shape);
    size_t bytes = size_t(len) * inner;
    for (int64_t o = 0; o < outer; ++o)
      if (bytes)
        std::memcpy(part.bytes.data() + o * bytes,
                    x.bytes.data() + (o * dim + start) * inner, bytes);
    seq->items.push_back(std::move(part));
    start += len;
  }
  return std::move(seq);
}

/// Optional (wraps its input, or makes an empty optional of the output's
/// declared type), OptionalHasElement and OptionalGetElement (opset 18 also
/// takes a plain tensor or sequence, and no input at all for HasElement).
static llvm::Expected<SequenceResult> runOptionalOp(const Node &n, const SequenceOperand &x) {
  SequenceResult r;
  bool isOptional = x.seq && x.seq->optional;
  if (n.opType == "OptionalHasElement") {
    r.tensor = HostTensor(DType::Bool, {});
    *r.tensor.data<bool>() = isOptional ? !x.seq->isNone() : (x.seq || x.tensor);
    return std::move(r);
  }
  if (n.opType == "OptionalGetElement") {
    if (!isOptional) {
      if (!x.seq && !x.tensor)
        return shapes::nodeError(n, "needs an input");
      r.seq = x.seq;
      if (x.tensor)
        r.tensor = *x.tensor;
      return std::move(r);
    }
    if (x.seq->isNone())
      return shapes::nodeError(n, "the optional input holds no value");
    r.seq = x.seq->inner;
    if (!r.seq)
      r.tensor = x.seq->items[0];
    return std::move(r);
  }
  // Optional.
  if (isOptional)
    return shapes::nodeError(n, "input must be a tensor or a sequence, not an optional");
  r.seq = std::make_shared<SequenceValue>();
  r.seq->optional = true;
  if (x.tensor) {
    r.seq->elem = x.tensor->dtype;
    r.seq->items.push_back(*x.tensor);
  } else if (x.seq) {
    r.seq->elem = x.seq->elem;
    r.seq->ofSequence = true;
    r.seq->inner = x.seq; // sequences are never changed: share it
  } else {
    // Empty: the element type is the declared one (the 'type' attribute,
    // which type inference put on the output).
    const Type *t = n.numOutputs() && n.output(0) ? &n.output(0)->type : nullptr;
    if (t && t->kind == TypeKind::Optional && t->inner) {
      r.seq->ofSequence = t->inner->kind == TypeKind::Sequence;
      r.seq->elem = t->tensorElemType();
    }
  }
  return std::move(r);
}

llvm::Expected<SequenceResult> mpc::runSequenceOp(const Node &n,
                                                  llvm::MutableArrayRef<SequenceOperand> ins) {
  SequenceResult r;
  auto in = [&](unsigned i) { return i < ins.size() ? ins[i] : SequenceOperand(); };
  auto needSeq = [&](unsigned i) -> llvm::Expected<const SequenceValue *> {
    if (!in(i).seq || in(i).seq->optional)
      return shapes::nodeError(n, "input " + llvm::Twine(i) + " must be a sequence");
    return in(i).seq.get();
  };
  auto needTensor = [&](unsigned i) -> llvm::Expected<const HostTensor *> {
    if (!in(i).tensor)
      return shapes::nodeError(n, "input " + llvm::Twine(i) + " must be a tensor");
    return in(i).tensor;
  };
  auto checkElem = [&](const SequenceValue &s, const HostTensor &t) -> llvm::Error {
    if (s.elem != DType::Undefined && t.dtype != s.elem)
      return shapes::nodeError(n, "tensor of type " + dtypeName(t.dtype) +
                                    " in a sequence of " + dtypeName(s.elem));
    return llvm::Error::success();
  };
  llvm::StringRef op = n.opType;
  if (op.startswith("Optional"))
    return runOptionalOp(n, in(0));
  if (op == "SequenceEmpty") {
    r.seq = std::make_shared<SequenceValue>();
    r.seq->elem = DType(n.intAttr("dtype", int64_t(DType::F32)));
    if (runtimeElementSize(r.seq->elem) == 0)
      return shapes::nodeError(n, "element type " + dtypeName(r.seq->elem) +
                                    " is not supported");
    return std::move(r);
  }
  if (op == "SequenceConstruct") {
    r.seq = std::make_shared<SequenceValue>();
    for (unsigned i = 0; i < ins.size(); ++i) {
      auto t = needTensor(i);
      if (!t)
        return t.takeError();
      if (i == 0)
        r.seq->elem = (*t)->dtype;
      if (auto e = checkElem(*r.seq, **t))
        return std::move(e);
      r.seq->items.push_back(**t);
    }
    if (ins.empty())
      return shapes::nodeError(n, "needs at least one input");
    return std::move(r);
  }
  if (op == "SplitToSequence") {
    auto x = needTensor(0);
    if (!x)
      return x.takeError();
    auto s = splitItems(n, **x, in(1).tensor);
    if (!s)
      return s.takeError();
    r.seq = std::move(*s);
    return std::move(r);
  }
  auto s = needSeq(0);
  if (!s)
    return s.takeError();
  const SequenceValue &seq = **s;
  int64_t size = int64_t(seq.items.size());
  // The sequence to change: input 0 itself when nothing else holds it (the
  // caller passed its last reference), else a copy. `seq` stays valid: the
  // result owns what it refers to.
  auto ownedCopy = [&]() -> std::shared_ptr<SequenceValue> {
    if (ins[0].seq.use_count() == 1)
      return std::move(ins[0].seq);
    return std::make_shared<SequenceValue>(seq);
  };
  if (op == "SequenceLength") {
    r.tensor = HostTensor(DType::I64, {});
    *r.tensor.data<int64_t>() = size;
    return std::move(r);
  }
  if (op == "SequenceAt") {
    auto t = needTensor(1);
    if (!t)
      return t.takeError();
    auto p = position(n, *t, size, 0, false);
    if (!p)
      return p.takeError();
    r.tensor = seq.items[size_t(*p)];
    return std::move(r);
  }
  if (op == "SequenceErase") {
    auto p = position(n, in(1).tensor, size, size - 1, false);
    if (!p)
      return p.takeError();
    if (size == 0)
      return shapes::nodeError(n, "cannot erase from an empty sequence");
    r.seq = ownedCopy();
    r.seq->items.erase(r.seq->items.begin() + *p);
    return std::move(r);
  }
  if (op == "SequenceInsert") {
    auto t = needTensor(1);
    if (!t)
      return t.takeError();
    if (auto e = checkElem(seq, **t))
      return std::move(e);
    auto p = position(n, in(2).tensor, size, size, true);
    if (!p)
      return p.takeError();
    r.seq = ownedCopy();
    if (r.seq->elem == DType::Undefined)
      r.seq->elem = (*t)->dtype;
    r.seq->items.insert(r.seq->items.begin() + *p, **t);
    return std::move(r);
  }
  if (op == "ConcatFromSequence") {
    if (!n.attr("axis"))
      return shapes::nodeError(n, "missing attribute 'axis'");
    auto t = concatItems(n, seq, n.intAttr("axis", 0), n.intAttr("new_axis", 0) != 0);
    if (!t)
      return t.takeError();
    r.tensor = std::move(*t);
    return std::move(r);
  }
  return shapes::nodeError(n, "not a sequence op");
}
