//===- AmpPipeline.cpp - The AMP rewrite pipeline --------------------------===//
//
// Straight-line assembly of the rewrite. Ordering constraints:
//  - types are inferred first: the painting needs an element type per slot;
//  - coloring is an analysis over the unmodified model;
//  - casts are inserted from the coloring, then folded (folding needs the
//    final types) and the debris removed;
//  - the verifier runs on the result always, and between steps on request.
//
//===----------------------------------------------------------------------===//
#include "mpc/Ops/TypeInference.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Verify/Verifier.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/Regex.h"
#include <cstring>

using namespace mpc;

static llvm::Error verifyAfter(Model &m, llvm::StringRef step) {
  if (llvm::Error err = verifyModel(m))
    return llvm::make_error<InputError>("internal error: the model does not verify after " +
                                        step.str() + ": " + llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Expected<AmpResult> mpc::runAmpRewrite(Model &m, const AmpRunOptions &opts,
                                             const BackendCaps &caps,
                                             llvm::raw_ostream *decisionLog) {
  AmpLists lists = AmpLists::defaults(opts.amp.target);
  if (llvm::Error err = lists.apply(opts.amp.edits, opts.amp.level))
    return std::move(err);
  if (!opts.amp.denyNodesRegex.empty()) {
    std::string why;
    if (!llvm::Regex(opts.amp.denyNodesRegex).isValid(why))
      return inputError("--deny-nodes '{0}' is not a valid regular expression: {1}",
                        opts.amp.denyNodesRegex, why);
  }
  inferTypes(m);
  AmpColoring coloring(m, lists, opts.amp, caps);
  AmpDecisions decisions;
  if (opts.summarize)
    decisions = summarizeDecisions(coloring);
  if (opts.afterColoring)
    opts.afterColoring(m, coloring, lists);
  if (decisionLog) {
    for (const std::string &note : coloring.fallbackNotes())
      *decisionLog << note << "\n";
    if (opts.amp.verbose >= 1)
      for (const std::string &note : customOpNotes(opts.amp.edits))
        *decisionLog << note << "\n";
    if (opts.amp.verbose >= 2)
      coloring.printDecisions(*decisionLog);
  }
  AmpResult result = insertAmpCasts(m, coloring, opts.amp);
  result.decisions = std::move(decisions);
  if (opts.verifyEach)
    if (llvm::Error err = verifyAfter(m, "amp-insert-casts"))
      return std::move(err);
  if (result.changed) {
    result.castsFolded = foldCasts(m);
    // Casts the cleanup removed are not part of the result (nor of K). The
    // list is compacted in place: a second list of every cast would be as
    // much fresh memory again.
    size_t kept = 0;
    result.castsToTarget = result.castsToFp32 = 0;
    for (InsertedCast &c : result.casts) {
      if (!c.result->producer())
        continue;
      result.castsToTarget += c.toType == opts.amp.target && !c.ofConstant;
      result.castsToFp32 += c.toType == DType::F32;
      if (&result.casts[kept] != &c)
        result.casts[kept] = std::move(c);
      ++kept;
    }
    result.casts.erase(result.casts.begin() + kept, result.casts.end());
    if (opts.verifyEach)
      if (llvm::Error err = verifyAfter(m, "cleanup-fold-casts"))
        return std::move(err);
  }
  for (const ConstantIssue &c : coloring.constantIssues()) {
    std::string line = mpc::formatQuoted("constant '{0}' feeding {1}: ", c.value, c.node);
    if (c.overflow)
      line += llvm::formatv("{0} of {1} value(s) overflow {2} (e.g. {3:e})", c.overflow, c.total,
                            dtypeName(opts.amp.target), c.example)
                  .str();
    if (c.underflow)
      line += llvm::formatv("{0}{1} of {2} value(s) flush to zero in {3}{4}",
                            c.overflow ? "; " : "", c.underflow, c.total,
                            dtypeName(opts.amp.target),
                            c.overflow ? "" : llvm::formatv(" (e.g. {0:e})", c.example).str())
                  .str();
    if (c.keptFp32)
      line += "; the consumer stays fp32";
    else if (c.overflow)
      line += "; saturated to the largest finite value";
    result.notes.push_back(line);
  }
  if (decisionLog && opts.amp.verbose >= 1) {
    for (const InsertedCast &c : result.casts)
      *decisionLog << "Inserted Cast " << quoteName(c.from) << " -> " << quoteName(c.to) << " ("
                   << dtypeName(c.toType) << (c.ofConstant ? ", constant" : "") << ")\n";
    for (const std::string &line : result.typeChanges)
      *decisionLog << "Changed " << line << "\n";
  }
  if (llvm::Error err = verifyAfter(m, "the AMP rewrite"))
    return std::move(err);
  return std::move(result); // not a copy of every inserted cast's names
}

AmpDecisions mpc::summarizeDecisions(const AmpColoring &coloring) {
  AmpDecisions out;
  out.strings = std::make_shared<llvm::BumpPtrAllocator>();
  llvm::BumpPtrAllocator &arena = *out.strings;
  auto save = [&](llvm::StringRef s) -> llvm::StringRef {
    if (s.empty())
      return {};
    char *p = arena.Allocate<char>(s.size()); // no terminator: nobody needs one
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  };
  // Graph and op names are kept once each; node names and details per node.
  std::vector<llvm::StringRef> opNames(coloring.numOps());
  for (unsigned op = 0; op < opNames.size(); ++op)
    opNames[op] = save(coloring.opName(op));
  const Graph *graph = nullptr;
  llvm::StringRef graphName;
  const std::vector<AmpSlot> &slots = coloring.slots();
  size_t numNodes = 0; // one decision per run of slots of one node
  for (size_t i = 0; i < slots.size(); ++i)
    numNodes += i == 0 || slots[i].node != slots[i - 1].node;
  out.reserve(numNodes);
  for (size_t i = 0; i < slots.size();) {
    const Node *n = slots[i].node;
    if (n->getParent() != graph) {
      graph = n->getParent();
      graphName = save(graph->name);
    }
    NodeDecision d;
    d.node = n;
    d.graph = graphName;
    d.name = save(n->name);
    d.opType = opNames[coloring.opIndex(*n)];
    d.cls = slots[i].cls;
    bool anyAllow = false, anyDeny = false, anyFloatKeep = false;
    const AmpSlot *main = nullptr;
    for (; i < slots.size() && slots[i].node == n; ++i) {
      const AmpSlot &s = slots[i];
      bool floatSlot = s.reason != AmpReason::FixedType && s.reason != AmpReason::NotFloat32 &&
                       s.reason != AmpReason::TypeUnknown;
      anyAllow |= s.color == SlotColor::Allow;
      anyDeny |= s.color == SlotColor::Deny;
      anyFloatKeep |= floatSlot && s.color != SlotColor::Allow &&
                      s.reason != AmpReason::ParamKeptFp32;
      if (!main || (floatSlot && (s.color == SlotColor::Allow || !main->processable)))
        if (!main || main->color != SlotColor::Allow)
          main = &s;
    }
    d.color = anyAllow ? SlotColor::Allow : anyDeny ? SlotColor::Deny : SlotColor::Keep;
    d.partial = anyAllow && anyFloatKeep;
    d.reason = main->reason;
    if (main->hasDetail())
      d.detail = save(main->detail());
    out.push_back(d);
  }
  return out;
}
