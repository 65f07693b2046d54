//===- Amp.h - The AMP rewrite: painting, casts, cleanups -------*- C++ -*-===//
//
// The mixed-precision rewrite of a model: AmpColoring decides, insertAmpCasts
// applies the decision (retypes slots, converts constants, inserts one cast
// per (value, type)), and foldCasts removes no-op casts and low->high->low
// chains and folds widening casts into BiasGrad. runAmpRewrite is the whole pipeline with the verifier around it.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_AMP_H
#define MPC_PASSES_AMP_H

#include "mpc/Passes/AmpColoring.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// One cast the rewrite inserted. The names are as they were when the cast
/// was made (a value may be renamed later); their characters belong to the
/// AmpResult (AmpResult::castNames).
struct InsertedCast {
  llvm::StringRef from; ///< value cast
  llvm::StringRef to;   ///< cast result
  const Value *result; ///< the cast's result (no producer once folded away)
  DType toType;
  bool ofConstant;    ///< producer is an initializer or Constant (not in K)
};

/// The painting's verdict on one node, for reports and renderings. The
/// strings are owned by the AmpDecisions holding the entry.
struct NodeDecision {
  const Node *node = nullptr; ///< valid until the model is modified
  llvm::StringRef graph;      ///< name of the node's graph
  llvm::StringRef name;
  llvm::StringRef opType; ///< qualified ("com.microsoft::FusedMatMul")
  AmpClass cls = AmpClass::Unlisted;
  SlotColor color = SlotColor::Keep; ///< Allow when any slot converts
  bool partial = false;              ///< some float slots convert, others stay fp32
  AmpReason reason = AmpReason::Unlisted;
  llvm::StringRef detail;
};

class AmpDecisions;
/// Per-node decisions of a coloring, in graph order.
AmpDecisions summarizeDecisions(const AmpColoring &coloring);

/// Per-node decisions, in graph order. Owns the strings its entries name
/// (shared by copies), so they stay valid after the model changes and the
/// coloring is gone; a copy into a plain std::vector would not own them.
class AmpDecisions : public std::vector<NodeDecision> {
  friend AmpDecisions summarizeDecisions(const AmpColoring &coloring);
  std::shared_ptr<llvm::BumpPtrAllocator> strings;
};

/// What the rewrite did, for the summary line, the log and the report.
struct AmpResult {
  unsigned nodesBefore = 0;    ///< M
  unsigned slotsConverted = 0; ///< N
  unsigned castsToTarget = 0;  ///< K: non-constant casts to the target type
  unsigned castsToFp32 = 0;
  unsigned constantsConverted = 0;
  unsigned castsReused = 0; ///< existing Cast(to=float) retargeted
  unsigned castsFolded = 0;
  std::vector<InsertedCast> casts;
  /// The characters of the casts' names, shared by copies of the result (a
  /// rewrite inserts up to hundreds of thousands of casts: two heap strings
  /// each were a sizeable part of its fresh memory).
  std::shared_ptr<llvm::BumpPtrAllocator> castNames;
  std::vector<std::string> typeChanges; ///< "value: f32 -> f16" lines (verbose 1)
  std::vector<std::string> notes;       ///< saturated constants and similar
  AmpDecisions decisions;               ///< node pointers refer to the input model
  bool changed = false;

  /// "Converted N/M nodes to float16 precision using K cast(s) to float16
  /// (excluding Const and Variable casts)".
  std::string summaryLine(DType target) const;
};

/// Applies a coloring: retypes allow slots, converts or casts constants and
/// inserts casts where producer and consumer disagree.
AmpResult insertAmpCasts(Model &m, const AmpColoring &coloring, const AmpOptions &opts);

/// Removes casts whose input already has the wanted type, folds
/// low->high->low chains (never high->low->high), and lets a BiasGrad that
/// reads a 16-bit -> float32 Cast read the 16-bit value with `to` = float32
/// (and one whose 16-bit result only a Cast to float32 reads sum into it).
/// Graph output names stay. Returns the number of casts folded (each
/// bypassed read counts once).
unsigned foldCasts(Model &m);

/// Removes nodes whose results are unused (no side effects in ONNX) and unused
/// initializers. Returns the number of nodes removed.
unsigned eliminateDeadCode(Model &m);

struct AmpRunOptions {
  AmpOptions amp;
  /// Verify after every step (tests and debug builds) instead of only at the end.
  bool verifyEach = false;
  /// Fill AmpResult::decisions (for reports and dumps). Off, the rewrite skips
  /// a walk and about 80 bytes per node; its output is the same.
  bool summarize = true;
  /// Called after the painting, before the model changes (dumps of the
  /// colored input graph).
  std::function<void(const Model &, const AmpColoring &, const AmpLists &)> afterColoring;
};

/// The whole rewrite. Fails (and leaves `m` in an unspecified state) when the
/// lists are inconsistent or the output does not verify.
llvm::Expected<AmpResult> runAmpRewrite(Model &m, const AmpRunOptions &opts,
                                        const BackendCaps &caps,
                                        llvm::raw_ostream *decisionLog = nullptr);

} // namespace mpc

#endif // MPC_PASSES_AMP_H
