//===- ControlFlow.cpp - Dynamic mode and If/Loop/Scan/SequenceMap -----------===//
//
// Graphs with control flow or data-dependent shapes run node by node: shapes
// are inferred just before each node runs (small integer inputs and the
// inputs of data-dependent ops are copied to the host for the shape
// function), every value is its own backend allocation, released after its
// last use. If/Loop/Scan/SequenceMap bodies run on sub-executors with host
// copies of their inputs and captured values. Sequence and optional values
// stay on the host in their slots (shared, never changed); sequence and
// optional ops (SequenceOps.cpp) and bodies take them as they are.
//
// A body runs statically planned when it can be; one whose shapes depend on
// the values it is called with (a Slice bounded by the iteration number)
// falls back to this mode while planning (Executor.cpp). A shape function
// that still lacks an operand's value is asked again with every small
// operand on the host (Range's float bounds).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Executor.h"
#include "ExecutorSlot.h"
#include "LaunchAttrCheck.h"
#include "../ops/ShapeHelpers.h"
#include "mpc/Support/Diagnostics.h"
#include <cstring>

using namespace mpc;

static constexpr int64_t kSmallIntLimit = 1 << 16;


llvm::Expected<HostTensor> Executor::hostValue(unsigned, const TensorRef &ref) const {
  HostTensor h(ref.dtype, {ref.shape.begin(), ref.shape.end()});
  backend.copyToHost(h.bytes.data(), ref.data, h.byteSize(), stream);
  backend.synchronize(stream);
  return h;
}

/// The sub-executor of a node's graph attribute.
static Executor *bodyOf(const Node &n, llvm::StringRef attrName,
                        const std::vector<std::unique_ptr<Executor>> &bodies) {
  unsigned idx = 0;
  for (const Attribute &a : n.attrs)
    for (size_t g = 0; g < a.graphs.size(); ++g, ++idx)
      if (a.name == attrName && idx < bodies.size())
        return bodies[idx].get();
  return nullptr;
}

/// The element type of a result no iteration produced: the body output's
/// declared type, else the node output's. A Loop that ran no iteration gave an
/// untyped result where neither was declared (`mpc run` crashed writing it).
static llvm::Expected<DType> declaredElem(const Node &n, const Value *bodyOut,
                                          const Value *outerOut) {
  if (bodyOut->type.elem != DType::Undefined)
    return bodyOut->type.elem;
  if (outerOut && outerOut->type.elem != DType::Undefined)
    return outerOut->type.elem;
  return shapes::nodeError(n, "no iteration ran, and neither the body output " +
                                  quoteName(bodyOut->name()) +
                                  " nor the node's output declares an element type");
}

/// Stacks per-iteration tensors along a new axis 0 (node output `outerOut`).
static llvm::Expected<HostTensor> stack(const Node &n, const std::vector<HostTensor> &parts,
                                        const Value *bodyOut, const Value *outerOut) {
  if (parts.empty()) {
    auto elem = declaredElem(n, bodyOut, outerOut);
    if (!elem)
      return elem.takeError();
    std::vector<int64_t> shape = {0};
    for (const Dim &d : bodyOut->type.dims)
      shape.push_back(d.isKnown() ? d.value : 0);
    return HostTensor(*elem, shape);
  }
  std::vector<int64_t> shape = {int64_t(parts.size())};
  shape.insert(shape.end(), parts[0].shape.begin(), parts[0].shape.end());
  HostTensor out(parts[0].dtype, shape);
  size_t off = 0;
  for (const HostTensor &p : parts) {
    std::memcpy(out.bytes.data() + off, p.bytes.data(),
                std::min(p.byteSize(), out.byteSize() - off));
    off += p.byteSize();
  }
  return out;
}

namespace {
/// A value crossing into or out of a body: a tensor, or a sequence when
/// `seq` is set.
struct Operand {
  HostTensor tensor;
  std::shared_ptr<SequenceValue> seq;
};
} // namespace

/// Element `i` of `x` along axis 0.
static HostTensor element(const HostTensor &x, int64_t i) {
  HostTensor out(x.dtype, {x.shape.begin() + 1, x.shape.end()});
  std::memcpy(out.bytes.data(), x.bytes.data() + i * out.byteSize(), out.byteSize());
  return out;
}

/// Scan-8: every state and scan input has a leading batch axis, the scan
/// axis is 1, and the optional first input sequence_lens gives each batch
/// entry's length. Each batch entry runs the body from the initial states
/// over its first sequence_lens[b] elements (the last ones first where
/// `directions` says 1); its scan outputs are padded with zeros to the
/// longest length. `callBody` runs the body on (states..., elements...).
template <typename CallBody>
static llvm::Error runScan8(const Node &n, const Graph &g, llvm::ArrayRef<const HostTensor *> ins,
                            llvm::ArrayRef<std::shared_ptr<SequenceValue>> seqIns,
                            CallBody &callBody, std::vector<HostTensor> &results) {
  size_t numScanIn = n.intAttr("num_scan_inputs", 0);
  if (numScanIn == 0 || n.numInputs() < 1 + numScanIn)
    return shapes::nodeError(n, "num_scan_inputs must be between 1 and the number of "
                              "states and scan inputs");
  size_t numState = n.numInputs() - 1 - numScanIn;
  if (g.outputs().size() < numState)
    return shapes::nodeError(n, "the body returns fewer values than there are states");
  size_t numScanOut = g.outputs().size() - numState;
  for (size_t i = 1; i < n.numInputs(); ++i)
    if (i >= ins.size() || !ins[i] || (i < seqIns.size() && seqIns[i]))
      return shapes::nodeError(n, "states and scan inputs must be tensors");
  std::vector<int64_t> dirs = shapes::intsAttr(n, "directions", {});
  if (dirs.size() > numScanIn)
    return shapes::nodeError(n, "more directions than scan inputs");
  dirs.resize(numScanIn, 0);
  for (int64_t d : dirs)
    if (d != 0 && d != 1)
      return shapes::nodeError(n, "directions must be 0 (forward) or 1 (reverse)");
  const HostTensor &first = *ins[1 + numState];
  if (first.shape.size() < 2)
    return shapes::nodeError(n, "scan inputs need a batch axis and a sequence axis");
  int64_t batch = first.shape[0], maxLen = first.shape[1];
  for (size_t j = 0; j < numScanIn; ++j) {
    const auto &shape = ins[1 + numState + j]->shape;
    if (shape.size() < 2 || shape[0] != batch || shape[1] != maxLen)
      return shapes::nodeError(n, "scan input " + llvm::Twine(j) + " has shape " +
                                    formatShape(shape) + "; the first one has batch " +
                                    llvm::Twine(batch) + " and length " + llvm::Twine(maxLen));
  }
  for (size_t i = 0; i < numState; ++i)
    if (ins[1 + i]->shape.empty() || ins[1 + i]->shape[0] != batch)
      return shapes::nodeError(n, "initial state " + llvm::Twine(i) + " has shape " +
                                    formatShape(ins[1 + i]->shape) + "; the batch size is " +
                                    llvm::Twine(batch));
  std::vector<int64_t> lens(batch, maxLen);
  if (ins[0]) {
    if (ins[0]->numElements() != batch)
      return shapes::nodeError(n, "sequence_lens has " + llvm::Twine(ins[0]->numElements()) +
                                    " entries; the batch size is " + llvm::Twine(batch));
    for (int64_t b = 0; b < batch; ++b) {
      lens[b] = ins[0]->getAsInt64(b);
      if (lens[b] < 0 || lens[b] > maxLen)
        return shapes::nodeError(n, "sequence_lens[" + llvm::Twine(b) + "] is " +
                                      llvm::Twine(lens[b]) + "; the maximum is " +
                                      llvm::Twine(maxLen));
    }
  }
  // finals[i][b]: state i after batch entry b; outs[k][b][t]: scan output k.
  std::vector<std::vector<HostTensor>> finals(numState);
  std::vector<std::vector<std::vector<HostTensor>>> scans(
      numScanOut, std::vector<std::vector<HostTensor>>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Operand> state(numState);
    for (size_t i = 0; i < numState; ++i)
      state[i].tensor = element(*ins[1 + i], b);
    std::vector<HostTensor> xs;
    for (size_t j = 0; j < numScanIn; ++j)
      xs.push_back(element(*ins[1 + numState + j], b));
    for (int64_t t = 0; t < lens[b]; ++t) {
      std::vector<Operand> f = std::move(state); // replaced by the body's outputs
      state.resize(numState);
      for (size_t j = 0; j < numScanIn; ++j) {
        Operand x;
        x.tensor = element(xs[j], dirs[j] ? lens[b] - 1 - t : t);
        f.push_back(std::move(x));
      }
      auto outs = callBody(std::move(f));
      if (!outs)
        return outs.takeError();
      for (size_t k = 0; k < outs->size(); ++k)
        if ((*outs)[k].seq)
          return shapes::nodeError(n, "body output " + llvm::Twine(k) +
                                        " is a sequence; Scan-8 takes tensors only");
      for (size_t i = 0; i < numState; ++i)
        state[i] = std::move((*outs)[i]);
      for (size_t k = 0; k < numScanOut; ++k)
        scans[k][b].push_back(std::move((*outs)[numState + k].tensor));
    }
    for (size_t i = 0; i < numState; ++i)
      finals[i].push_back(std::move(state[i].tensor));
  }
  for (size_t i = 0; i < numState; ++i) {
    for (const HostTensor &s : finals[i])
      if (s.shape != finals[i][0].shape || s.dtype != finals[i][0].dtype)
        return shapes::nodeError(n, "state " + llvm::Twine(i) + " ends with shape " +
                                      formatShape(s.shape) + " in one batch entry and " +
                                      formatShape(finals[i][0].shape) + " in another");
    auto stacked = stack(n, finals[i], g.outputs()[i], n.output(i));
    if (!stacked)
      return stacked.takeError();
    results.push_back(std::move(*stacked));
  }
  for (size_t k = 0; k < numScanOut; ++k) {
    // Every element has the first one's dtype and shape (the declared ones
    // when no batch entry has any).
    const HostTensor *proto = nullptr;
    for (const auto &perBatch : scans[k])
      if (!proto && !perBatch.empty())
        proto = &perBatch[0];
    const Value *declared = g.outputs()[numState + k];
    std::vector<int64_t> shape = {batch, maxLen};
    if (proto) {
      shape.insert(shape.end(), proto->shape.begin(), proto->shape.end());
    } else {
      for (const Dim &d : declared->type.dims)
        shape.push_back(d.isKnown() ? d.value : 0);
    }
    DType elem = proto ? proto->dtype : DType::Undefined;
    if (!proto) {
      auto d = declaredElem(n, declared, n.output(numState + k));
      if (!d)
        return d.takeError();
      elem = *d;
    }
    HostTensor out(elem, shape);
    size_t elemBytes = batch * maxLen ? out.byteSize() / size_t(batch * maxLen) : 0;
    for (int64_t b = 0; b < batch; ++b)
      for (size_t t = 0; t < scans[k][b].size(); ++t) {
        const HostTensor &e = scans[k][b][t];
        if (e.shape != proto->shape || e.dtype != proto->dtype)
          return shapes::nodeError(n, "scan output " + llvm::Twine(k) + " has shape " +
                                        formatShape(e.shape) + " in one iteration and " +
                                        formatShape(proto->shape) + " in another");
        std::memcpy(out.bytes.data() + (b * maxLen + t) * elemBytes, e.bytes.data(), elemBytes);
      }
    results.push_back(std::move(out));
  }
  return llvm::Error::success();
}

/// SequenceMap: the body runs once per element of the input sequence, taking
/// that element of every sequence input (all of one length) and every tensor
/// input as it is; output k is the sequence of the body's k-th results.
template <typename CallBody>
static llvm::Error
runSequenceMap(const Node &n, const Graph &g, llvm::ArrayRef<const HostTensor *> ins,
               llvm::ArrayRef<std::shared_ptr<SequenceValue>> seqIns, CallBody callBody,
               std::vector<std::shared_ptr<SequenceValue>> &seqOuts) {
  auto seqAt = [&](size_t i) { return i < seqIns.size() ? seqIns[i].get() : nullptr; };
  if (!seqAt(0) || seqAt(0)->optional)
    return shapes::nodeError(n, "input 0 must be a sequence");
  if (g.inputs().size() != n.numInputs())
    return shapes::nodeError(n, "the body takes " + llvm::Twine(g.inputs().size()) +
                                  " inputs; the node has " + llvm::Twine(n.numInputs()));
  size_t len = seqAt(0)->items.size();
  for (size_t i = 1; i < n.numInputs(); ++i) {
    const SequenceValue *s = seqAt(i);
    if (s && s->optional)
      return shapes::nodeError(n, "input " + llvm::Twine(i) +
                                    " is an optional; SequenceMap "
                                    "takes sequences and tensors");
    if (s && s->items.size() != len)
      return shapes::nodeError(n, "input " + llvm::Twine(i) + " is a sequence of " +
                                    llvm::Twine(s->items.size()) + " tensors; input 0 has " +
                                    llvm::Twine(len));
    if (!s && (i >= ins.size() || !ins[i]))
      return shapes::nodeError(n, "input " + llvm::Twine(i) + " is missing");
  }
  std::vector<std::shared_ptr<SequenceValue>> outs;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    outs.push_back(std::make_shared<SequenceValue>());
    // The declared element type, what an empty result still has.
    outs.back()->elem = g.outputs()[k]->type.tensorElemType();
    if (outs.back()->elem == DType::Undefined && k < n.numOutputs() && n.output(k))
      outs.back()->elem = n.output(k)->type.tensorElemType();
  }
  for (size_t t = 0; t < len; ++t) {
    std::vector<Operand> f(n.numInputs());
    for (size_t i = 0; i < n.numInputs(); ++i)
      f[i].tensor = seqAt(i) ? seqAt(i)->items[t] : *ins[i];
    auto res = callBody(std::move(f));
    if (!res)
      return res.takeError();
    for (size_t k = 0; k < outs.size() && k < res->size(); ++k) {
      Operand &o = (*res)[k];
      if (o.seq)
        return shapes::nodeError(n, "body output " + llvm::Twine(k) +
                                      " is not a tensor; SequenceMap collects tensors");
      if (t == 0 || outs[k]->elem == DType::Undefined)
        outs[k]->elem = o.tensor.dtype;
      if (o.tensor.dtype != outs[k]->elem)
        return shapes::nodeError(n, "body output " + llvm::Twine(k) + " is " +
                                      dtypeName(o.tensor.dtype) + " in one iteration and " +
                                      dtypeName(outs[k]->elem) + " in another");
      outs[k]->items.push_back(std::move(o.tensor));
    }
  }
  seqOuts = std::move(outs);
  return llvm::Error::success();
}

llvm::Expected<std::vector<HostTensor>>
Executor::runControlFlow(const Node &n, llvm::ArrayRef<const HostTensor *> ins,
                         llvm::ArrayRef<std::shared_ptr<SequenceValue>> seqIns,
                         std::vector<std::shared_ptr<SequenceValue>> &seqOuts) {
  const auto &subs = bodies[&n];
  auto operand = [&](size_t i) {
    Operand o;
    if (i < seqIns.size() && seqIns[i])
      o.seq = seqIns[i];
    else if (i < ins.size() && ins[i])
      o.tensor = *ins[i];
    return o;
  };
  // Captured values arrive after the node's own inputs (see runDynamic).
  std::vector<std::pair<std::string, Operand>> captured;
  const std::vector<const Value *> &cap = captures[&n];
  for (size_t i = 0; i < cap.size(); ++i)
    captured.emplace_back(cap[i]->name(), operand(n.numInputs() + i));
  // Runs a body with formal inputs (in order) plus the captured values it
  // reads; sequences are bound to the body's slots directly.
  auto callBody = [&](Executor &body, const Graph &g,
                      std::vector<Operand> f) -> llvm::Expected<std::vector<Operand>> {
    std::vector<NamedTensor> in;
    body.boundSequences.assign(body.formals.size(), nullptr);
    auto bind = [&](const std::string &name, Operand o) -> llvm::Error {
      if (!o.seq) {
        in.push_back(NamedTensor{name, std::move(o.tensor)});
        return llvm::Error::success();
      }
      if (!body.dynamicMode)
        return shapes::nodeError(n, "sequence " + quoteName(name) +
                                      " passed to a body without "
                                      "sequence-typed inputs");
      // Moved, not copied: a loop-carried sequence the body holds alone can
      // be grown in place (runSequenceOp).
      for (size_t k = 0; k < body.formals.size(); ++k)
        if (body.formals[k]->name() == name) {
          body.boundSequences[k] = std::move(o.seq);
          break;
        }
      return llvm::Error::success();
    };
    for (size_t i = 0; i < f.size() && i < g.inputs().size(); ++i)
      if (auto e = bind(g.inputs()[i]->name(), std::move(f[i])))
        return std::move(e);
    for (const Value *v : body.outerValues())
      for (const auto &c : captured)
        if (c.first == v->name())
          if (auto e = bind(c.first, c.second))
            return std::move(e);
    body.bodyCall = true;
    auto outs = body.run(in);
    body.boundSequences.clear();
    if (!outs)
      return outs.takeError();
    std::vector<Operand> r(outs->size());
    for (size_t k = 0; k < outs->size(); ++k) {
      r[k].tensor = std::move((*outs)[k].tensor);
      if (k < body.sequenceOutputs.size())
        r[k].seq = std::move(body.sequenceOutputs[k]);
    }
    body.sequenceOutputs.clear();
    return r;
  };
  std::vector<HostTensor> results;
  auto give = [&](std::vector<Operand> &vals) {
    for (Operand &o : vals) {
      results.push_back(std::move(o.tensor));
      seqOuts.push_back(std::move(o.seq));
    }
  };
  auto tensorsOnly = [&](const std::vector<Operand> &vals, size_t from) -> llvm::Error {
    for (size_t i = from; i < vals.size(); ++i)
      if (vals[i].seq)
        return shapes::nodeError(n, "scan output " + llvm::Twine(i - from) +
                                      " is a sequence; scan outputs must be tensors");
    return llvm::Error::success();
  };
  // A condition (If's input, Loop's input and its body's first output) is a
  // bool with one element; anything else is the model's error, named here
  // (reading element 0 of an empty tensor would read past it).
  auto condition = [&](const HostTensor &t, llvm::StringRef what) -> llvm::Expected<bool> {
    if (t.dtype != DType::Bool || t.numElements() != 1)
      return shapes::nodeError(n, what + " is " + dtypeName(t.dtype).str() + " " +
                                      formatShape(t.shape) +
                                      "; a bool with one element is needed");
    return t.getAsDouble(0) != 0;
  };
  if (n.opType == "If") {
    if (!ins[0])
      return shapes::nodeError(n, "the condition is missing");
    auto c = condition(*ins[0], "the condition");
    if (!c)
      return c.takeError();
    bool cond = *c;
    Executor *body = bodyOf(n, cond ? "then_branch" : "else_branch", subs);
    const Attribute *a = n.attr(cond ? "then_branch" : "else_branch");
    if (!body || !a)
      return shapes::nodeError(n, "missing branch");
    auto outs = callBody(*body, *a->graphs[0], {});
    if (!outs)
      return outs.takeError();
    give(*outs);
    return results;
  }
  if (n.opType == "SequenceMap") {
    Executor *body = bodyOf(n, "body", subs);
    const Graph &g = *n.attr("body")->graphs[0];
    if (auto e = runSequenceMap(
            n, g, ins, seqIns,
            [&](std::vector<Operand> f) { return callBody(*body, g, std::move(f)); }, seqOuts))
      return std::move(e);
    results.resize(seqOuts.size());
    return results;
  }
  if (n.opType == "Loop") {
    Executor *body = bodyOf(n, "body", subs);
    const Graph &g = *n.attr("body")->graphs[0];
    if (ins[0] && (ins[0]->numElements() != 1 || ins[0]->dtype != DType::I64))
      return shapes::nodeError(n, "the trip count is " + dtypeName(ins[0]->dtype).str() + " " +
                                      formatShape(ins[0]->shape) +
                                      "; an int64 with one element is needed");
    int64_t maxTrips = ins[0] ? ins[0]->getAsInt64(0) : INT64_MAX;
    bool cond = true;
    if (ins[1]) {
      auto c = condition(*ins[1], "the condition");
      if (!c)
        return c.takeError();
      cond = *c;
    }
    size_t numState = n.numInputs() - 2;
    size_t numScan = g.outputs().size() - 1 - numState;
    std::vector<Operand> state;
    for (size_t i = 0; i < numState; ++i)
      state.push_back(operand(2 + i));
    std::vector<std::vector<HostTensor>> scans(numScan);
    // The scan outputs' parts are host memory outside the backend's count,
    // and stacking them takes as much again: bounded by --max-memory or,
    // without it, by what the machine has available (a trip count of
    // INT64_MAX whose condition never turns false grows them until the
    // kernel kills the process).
    uint64_t scanBytes = 0, nextSeqCount = 1;
    const uint64_t scanLimit = backend.memoryBudget()
                                   ? std::min<uint64_t>(backend.memoryBudget(),
                                                        availableHostBytes())
                                   : availableHostBytes();
    for (int64_t it = 0; it < maxTrips && cond; ++it) {
      std::vector<Operand> f(2);
      f[0].tensor = HostTensor(DType::I64, {});
      *f[0].tensor.data<int64_t>() = it;
      f[1].tensor = HostTensor(DType::Bool, {});
      *f[1].tensor.data<bool>() = cond;
      // The states move to the body (the body's outputs replace them): a
      // sequence the body then holds alone grows in place, where a copy each
      // iteration made a loop that appends to a sequence quadratic.
      for (Operand &s : state)
        f.push_back(std::move(s));
      auto outs = callBody(*body, g, std::move(f));
      if (!outs)
        return outs.takeError();
      if (auto e = tensorsOnly(*outs, 1 + numState))
        return std::move(e);
      auto c = condition((*outs)[0].tensor, "the body's condition output");
      if (!c)
        return c.takeError();
      cond = *c;
      for (size_t i = 0; i < numState; ++i)
        state[i] = std::move((*outs)[1 + i]);
      for (size_t k = 0; k < numScan; ++k) {
        scanBytes += (*outs)[1 + numState + k].tensor.byteSize();
        scans[k].push_back(std::move((*outs)[1 + numState + k].tensor));
      }
      const char *limitName =
          backend.memoryBudget() ? "of --max-memory" : "available on this machine";
      if (scanBytes > scanLimit / 2)
        return shapes::nodeError(
            n, "after " + llvm::Twine(it + 1) + " iterations the scan outputs hold " +
                   llvm::Twine(scanBytes) + " bytes; stacking them needs as much again, " +
                   "past the " + llvm::Twine(scanLimit) + " bytes " + limitName);
      // Sequences the loop carries (a body that appends to one) are host
      // memory too, bounded alike: counted each time their tensors have
      // grown by an eighth in number, so counting stays linear in the
      // iterations (eight tensors read per tensor added).
      uint64_t seqItems = 0;
      for (const Operand &s : state)
        if (s.seq)
          seqItems += s.seq->items.size() + (s.seq->inner ? s.seq->inner->items.size() : 0);
      if (seqItems >= nextSeqCount) {
        nextSeqCount = seqItems + seqItems / 8 + 1;
        uint64_t seqBytes = 0;
        for (const Operand &s : state)
          for (const SequenceValue *v : {s.seq.get(), s.seq ? s.seq->inner.get() : nullptr})
            if (v)
              for (const HostTensor &t : v->items)
                seqBytes += t.byteSize();
        if (scanBytes + seqBytes > scanLimit / 2)
          return shapes::nodeError(
              n, "after " + llvm::Twine(it + 1) + " iterations the sequences it carries hold " +
                     llvm::Twine(seqBytes) + " bytes (in " + llvm::Twine(seqItems) +
                     " tensors)" +
                     (scanBytes ? " and its scan outputs " + std::to_string(scanBytes) + " bytes"
                                : std::string()) +
                     ", past half of the " + llvm::Twine(scanLimit) + " bytes " + limitName);
      }
    }
    give(state);
    for (size_t k = 0; k < numScan; ++k) {
      auto stacked = stack(n, scans[k], g.outputs()[1 + numState + k], n.output(numState + k));
      if (!stacked)
        return stacked.takeError();
      results.push_back(std::move(*stacked));
      seqOuts.emplace_back();
    }
    return results;
  }
  Executor *body = bodyOf(n, "body", subs);
  const Graph &g = *n.attr("body")->graphs[0];
  size_t numScanIn = n.intAttr("num_scan_inputs", 0);
  if (n.opsetVersion() < 9) {
    auto call = [&](std::vector<Operand> f) { return callBody(*body, g, std::move(f)); };
    if (auto e = runScan8(n, g, ins, seqIns, call, results))
      return std::move(e);
    seqOuts.resize(results.size());
    return results;
  }
  // Scan (opset 9+), axis 0 and forward directions.
  for (const char *attr : {"scan_input_axes", "scan_input_directions",
                           "scan_output_axes", "scan_output_directions"})
    for (int64_t v : shapes::intsAttr(n, attr, {}))
      if (v != 0)
        return shapes::nodeError(n, llvm::Twine(attr) + " other than 0 is not supported");
  size_t numState = n.numInputs() - numScanIn;
  size_t numScanOut = g.outputs().size() - numState;
  std::vector<Operand> state;
  for (size_t i = 0; i < numState; ++i)
    state.push_back(operand(i));
  for (size_t j = 0; j < numScanIn; ++j) {
    if (!ins[numState + j])
      return shapes::nodeError(n, "scan inputs must be tensors");
    // (A scalar here crashed: std::out_of_range reading its length.)
    if (ins[numState + j]->shape.empty())
      return shapes::nodeError(n, "scan input #" + std::to_string(j) +
                                      " is a scalar; a scan input needs an axis to scan");
  }
  int64_t len = numScanIn ? ins[numState]->shape.at(0) : 0;
  std::vector<std::vector<HostTensor>> scans(numScanOut);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Operand> f = std::move(state); // replaced by the body's outputs
    state.resize(numState);
    for (size_t j = 0; j < numScanIn; ++j) {
      const HostTensor &x = *ins[numState + j];
      if (x.shape.empty() || x.shape[0] != len)
        return shapes::nodeError(n, "scan inputs have different lengths");
      Operand slice;
      slice.tensor = HostTensor(x.dtype, {x.shape.begin() + 1, x.shape.end()});
      std::memcpy(slice.tensor.bytes.data(), x.bytes.data() + t * slice.tensor.byteSize(),
                  slice.tensor.byteSize());
      f.push_back(std::move(slice));
    }
    auto outs = callBody(*body, g, std::move(f));
    if (!outs)
      return outs.takeError();
    if (auto e = tensorsOnly(*outs, numState))
      return std::move(e);
    for (size_t i = 0; i < numState; ++i)
      state[i] = std::move((*outs)[i]);
    for (size_t k = 0; k < numScanOut; ++k)
      scans[k].push_back(std::move((*outs)[numState + k].tensor));
  }
  give(state);
  for (size_t k = 0; k < numScanOut; ++k) {
    auto stacked = stack(n, scans[k], g.outputs()[numState + k], n.output(numState + k));
    if (!stacked)
      return stacked.takeError();
    results.push_back(std::move(*stacked));
    seqOuts.emplace_back();
  }
  return results;
}

/// Runs a sequence op (or Identity over a sequence) of dynamic mode: reads
/// sequences from their slots and tensors as host copies, and stores the
/// result as a sequence slot or through `define` as a tensor.
/// `uses[s]`: the uses of slot s left, this node's included; where this node
/// is a sequence's last use, the slot's reference moves to the op, which may
/// then change the sequence in place when no other slot shares it.
template <typename HostOf, typename Define>
static llvm::Error runSequenceNode(const Node &n, const std::vector<unsigned> &inSlots,
                                   unsigned out, std::vector<Executor::Slot> &slots,
                                   const std::vector<int64_t> &uses, HostOf &hostOf,
                                   Define &define) {
  std::vector<SequenceOperand> ops;
  for (unsigned s : inSlots) {
    SequenceOperand o;
    if (s != ~0u && slots[s].seq) {
      if (uses[s] == 1)
        o.seq = std::move(slots[s].seq);
      else
        o.seq = slots[s].seq;
    } else if (s != ~0u) {
      auto h = hostOf(s);
      if (!h)
        return h.takeError();
      o.tensor = *h;
    }
    ops.push_back(o);
  }
  SequenceResult r;
  if (n.opType == "Identity") {
    r.seq = std::move(ops[0].seq); // shared (a shared sequence is never changed)
  } else {
    auto res = runSequenceOp(n, ops);
    if (!res)
      return res.takeError();
    r = std::move(*res);
  }
  if (out == ~0u)
    return llvm::Error::success();
  if (r.seq) {
    slots[out].type = ShapedType{r.seq->elem, {}};
    slots[out].seq = std::move(r.seq);
    return llvm::Error::success();
  }
  return define(out, &r.tensor, ShapedType{r.tensor.dtype, r.tensor.shape});
}

llvm::Expected<std::vector<NamedTensor>>
Executor::runDynamic(const std::vector<const HostTensor *> &bound) {
  std::vector<DeviceBuffer> bufs(slots.size());
  std::vector<int64_t> uses(slots.size(), 0);
  for (Slot &s : slots)
    s.seq.reset();
  clearErrors();
  for (const Node &n : graph.nodes()) {
    for (const Value *v : n.inputs())
      if (v)
        ++uses[slotOf[v]];
    for (const Value *v : captures.lookup(&n))
      ++uses[slotOf[v]];
  }
  for (const Value *v : graph.outputs())
    uses[slotOf[v]] = INT64_MAX / 2;
  struct Releaser {
    Backend &b;
    std::vector<DeviceBuffer> &bufs;
    ~Releaser() {
      for (DeviceBuffer &d : bufs)
        b.release(d);
    }
  } releaser{backend, bufs};
  auto ref = [&](unsigned s) {
    TensorRef r;
    r.dtype = slots[s].type.dtype;
    r.shape.assign(slots[s].type.shape.begin(), slots[s].type.shape.end());
    r.data = slots[s].kind == SlotKind::Initializer ? slots[s].persistent : bufs[s].data;
    return r;
  };
  auto define = [&](unsigned s, const HostTensor *h, const ShapedType &t) -> llvm::Error {
    slots[s].type = t;
    auto bytes = checkedTensorBytes(t.shape, t.dtype, "value " + quoteName(slots[s].value->name()));
    if (!bytes)
      return bytes.takeError();
    auto buf = backend.allocate(*bytes, BufferKind::Transient);
    if (!buf) // named: a model's first huge value is seldom its input
      return inputError("value {0}: {1}", quoteName(slots[s].value->name()),
                        llvm::toString(buf.takeError()));
    bufs[s] = *buf;
    if (h)
      backend.copyToDevice(buf->data, h->bytes.data(), h->byteSize(), stream);
    return llvm::Error::success();
  };
  for (size_t i = 0; i < formals.size(); ++i) {
    if (i < boundSequences.size() && boundSequences[i]) {
      Slot &s = slots[slotOf[formals[i]]];
      s.type = ShapedType{boundSequences[i]->elem, {}};
      s.seq = std::move(boundSequences[i]);
      continue;
    }
    std::unique_ptr<HostTensor> dflt;
    const HostTensor *t = bound[i];
    if (!t) {
      auto d = hostTensorFromIR(*formals[i]->initializer());
      if (!d)
        return d.takeError();
      dflt = std::make_unique<HostTensor>(std::move(*d));
      t = dflt.get();
    }
    if (auto e = define(slotOf[formals[i]], t, ShapedType{t->dtype, t->shape}))
      return std::move(e);
  }
  for (const Node &n : graph.nodes()) {
    std::vector<unsigned> inSlots;
    for (const Value *v : n.inputs())
      inSlots.push_back(v ? slotOf[v] : ~0u);
    std::vector<std::unique_ptr<HostTensor>> hostCopies;
    auto hostOf = [&](unsigned s) -> llvm::Expected<const HostTensor *> {
      if (slots[s].seq)
        return inputError("{0}: {1} value '{2}' used as a tensor (sequences and optionals "
                          "may only feed sequence and optional ops)",
                          describeNode(n), slots[s].seq->optional ? "optional" : "sequence",
                          slots[s].value->name());
      if (slots[s].kind == SlotKind::Initializer && slots[s].host)
        return slots[s].host.get();
      auto h = hostValue(s, ref(s));
      if (!h)
        return h.takeError();
      hostCopies.push_back(std::make_unique<HostTensor>(std::move(*h)));
      return hostCopies.back().get();
    };
    if (isSequenceOp(n) || (n.opType == "Identity" && n.domain.empty() &&
                            inSlots.size() == 1 && inSlots[0] != ~0u &&
                            slots[inSlots[0]].seq)) {
      if (auto e = runSequenceNode(
              n, inSlots, n.numOutputs() && n.output(0) ? slotOf[n.output(0)] : ~0u,
              slots, uses, hostOf, define))
        return std::move(e);
    } else if (bodies.count(&n)) {
      std::vector<const HostTensor *> ins;
      std::vector<std::shared_ptr<SequenceValue>> seqIns;
      std::vector<unsigned> all = inSlots;
      for (const Value *v : captures.lookup(&n))
        all.push_back(slotOf[v]);
      for (unsigned s : all) {
        seqIns.push_back(s == ~0u ? nullptr : slots[s].seq);
        if (s == ~0u || slots[s].seq) {
          ins.push_back(nullptr);
          continue;
        }
        auto h = hostOf(s);
        if (!h)
          return h.takeError();
        ins.push_back(*h);
      }
      std::vector<std::shared_ptr<SequenceValue>> seqOuts;
      auto outs = runControlFlow(n, ins, seqIns, seqOuts);
      if (!outs)
        return outs.takeError();
      for (unsigned o = 0; o < n.numOutputs() && o < outs->size(); ++o) {
        if (!n.output(o))
          continue;
        unsigned so = slotOf[n.output(o)];
        if (o < seqOuts.size() && seqOuts[o]) {
          slots[so].type = ShapedType{seqOuts[o]->elem, {}};
          slots[so].seq = std::move(seqOuts[o]);
          continue;
        }
        if (auto e = define(so, &(*outs)[o], ShapedType{(*outs)[o].dtype, (*outs)[o].shape}))
          return std::move(e);
      }
    } else {
      for (unsigned s : inSlots)
        if (s != ~0u && slots[s].seq)
          return inputError("{0}: input '{1}' is {2}; {3} takes tensors", describeNode(n),
                            slots[s].value->name(),
                            slots[s].seq->optional ? "an optional" : "a sequence", n.opType);
      const OpDef *row = prepared.find(&n)->second.op;
      std::vector<ShapedType> inTypes;
      std::vector<const HostTensor *> values;
      for (unsigned s : inSlots) {
        if (s == ~0u) {
          inTypes.emplace_back();
          values.push_back(nullptr);
          continue;
        }
        inTypes.push_back(slots[s].type);
        DType dt = slots[s].type.dtype;
        bool smallInt = (dt == DType::I64 || dt == DType::I32) &&
                        shapes::numel(slots[s].type.shape) <= kSmallIntLimit;
        if (smallInt || row->valueDependentShape || slots[s].host) {
          auto h = hostOf(s);
          if (!h)
            return h.takeError();
          values.push_back(*h);
        } else {
          values.push_back(nullptr);
        }
      }
      std::vector<ShapedType> outTypes;
      if (llvm::Error e = row->shape(ShapeQuery{n, inTypes, values}, outTypes)) {
        // A shape operand of another type (Range's float bounds, Resize's
        // scales): once more with every small operand on the host.
        bool fetched = false;
        for (size_t i = 0; i < inSlots.size(); ++i) {
          unsigned s = inSlots[i];
          if (s == ~0u || values[i] || shapes::numel(slots[s].type.shape) > kSmallIntLimit)
            continue;
          auto h = hostOf(s);
          if (!h) {
            llvm::consumeError(std::move(e));
            return h.takeError();
          }
          values[i] = *h;
          fetched = true;
        }
        if (!fetched)
          return std::move(e);
        llvm::consumeError(std::move(e));
        outTypes.clear();
        if (auto again = row->shape(ShapeQuery{n, inTypes, values}, outTypes))
          return std::move(again);
      }
      outTypes.resize(n.numOutputs());
      llvm::SmallVector<DType, 4> dts;
      for (const ShapedType &t : inTypes)
        dts.push_back(t.dtype);
      // A node without inputs (Constant) is keyed by its output dtype; the
      // shape function knows it where the IR type was never inferred.
      if (dts.empty() && !outTypes.empty())
        dts.push_back(outTypes[0].dtype);
      if (!backend.supportsOp(n, dts))
        return inputError("unsupported op {0} at {1} for input type {2}", escapeName(n.opType),
                          describeNode(n), dts.empty() ? "none" : dtypeName(dts[0]));
      llvm::SmallVector<TensorDesc, 4> signature;
      for (const ShapedType &t : inTypes)
        signature.push_back(TensorDesc{t.dtype, {t.shape.begin(), t.shape.end()}, false, {}});
      if (auto e = prepareFor(n, signature))
        return std::move(e);
      if (auto e = reserveWorkspace(prepared.find(&n)->second.kernel.workspaceBytes))
        return std::move(e);
      KernelCall call = preparedCall(n);
      for (unsigned s : inSlots)
        call.inputs.push_back(s == ~0u ? TensorRef() : ref(s));
      for (unsigned o = 0; o < n.numOutputs(); ++o) {
        if (!n.output(o)) {
          call.outputs.emplace_back();
          continue;
        }
        unsigned s = slotOf[n.output(o)];
        if (auto e = define(s, nullptr, outTypes[o]))
          return std::move(e);
        call.outputs.push_back(ref(s));
      }
      // Shapes here depend on values the host reads as it goes, so the
      // record is read after each launch: a failed node stops the run.
      {
        LaunchAttrScope check;
        backend.launch(call, stream);
      }
      if (auto e = readErrors([&](int32_t) { return &call; }))
        return std::move(e);
    }
    // Release values whose last use this was.
    auto drop = [&](unsigned s) {
      if (s != ~0u && --uses[s] == 0 && slots[s].kind != SlotKind::Initializer) {
        backend.release(bufs[s]);
        bufs[s] = DeviceBuffer();
        slots[s].seq.reset();
      }
    };
    for (unsigned s : inSlots)
      drop(s);
    for (const Value *v : captures.lookup(&n))
      drop(slotOf[v]);
  }
  backend.synchronize(stream);
  // A body returns its sequence outputs to the If/Loop/Scan running it; the
  // main graph returns tensors only (but see the run() with sequences).
  bool returnSequences = bodyCall;
  bodyCall = false;
  sequenceOutputs.assign(graph.outputs().size(), nullptr);
  std::vector<NamedTensor> outs;
  for (const Value *v : graph.outputs()) {
    if (slots[slotOf[v]].seq) {
      if (!returnSequences)
        return inputError("graph output '{0}' is {1}; the executor returns tensors only", v->name(),
                          slots[slotOf[v]].seq->optional ? "an optional" : "a sequence");
      sequenceOutputs[outs.size()] = slots[slotOf[v]].seq;
      outs.push_back(NamedTensor{v->name(), HostTensor()});
      continue;
    }
    auto h = hostValue(slotOf[v], ref(slotOf[v]));
    if (!h)
      return h.takeError();
    outs.push_back(NamedTensor{v->name(), std::move(*h)});
  }
  return outs;
}
