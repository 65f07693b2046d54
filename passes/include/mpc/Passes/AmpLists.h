//===- AmpLists.h - Allow/infer/deny/clear lists and AMP options -*- C++ -*-===//
//
// The four op lists that drive the AMP painting (defaults explained in
// docs/amp-lists.md), the user's edits to them, the levels, and the typed
// options of the AMP pass.
// The environment (MPC_AMP_*) is read once, by the tool, into AmpOptions;
// nothing below the tool reads the environment.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_AMPLISTS_H
#define MPC_PASSES_AMPLISTS_H

#include "mpc/IR/DType.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include <array>
#include <string>
#include <vector>

namespace mpc {

class Node;

enum class AmpClass : uint8_t { Allow, Infer, Deny, Clear, Unlisted };
constexpr unsigned kNumAmpLists = 4; ///< Allow, Infer, Deny, Clear

llvm::StringRef ampClassName(AmpClass c); ///< "allow", "infer", ...

/// An op deliberately on no default list, and why (an fp32 barrier).
struct AmpUnlistedOp {
  const char *op; ///< "Op" or "domain::Op"
  const char *reason;
};
/// Every deliberately unlisted op (docs/op-registry.md).
llvm::ArrayRef<AmpUnlistedOp> ampUnlistedOps();
/// Why `qualifiedOp` is deliberately unlisted ("" when it is not).
llvm::StringRef ampUnlistedReason(llvm::StringRef qualifiedOp);
/// The file defining the default lists (__FILE__ of AmpLists.cpp).
const char *ampListsSourceFile();

enum class AmpLevel : uint8_t {
  Default,
  TensorCoresOnly,  ///< only allow-list ops convert, each wrapped in casts
  TreatInferAsDeny, ///< every infer op moves to deny
  UnsafeForceAll,   ///< every processable slot is painted allow
};

llvm::StringRef ampLevelName(AmpLevel l);

/// User edits, applied to the defaults: all ADDs, then all REMOVEs.
struct AmpListEdits {
  std::array<std::vector<std::string>, kNumAmpLists> add;
  std::array<std::vector<std::string>, kNumAmpLists> remove;
};

class AmpLists {
public:
  /// The default lists for a target (f16 or bf16).
  static AmpLists defaults(DType target);

  /// Applies edits and the level; an op left on two lists is an error naming
  /// the op and both lists.
  llvm::Error apply(const AmpListEdits &edits, AmpLevel level);

  /// The class of an op: looked up by "domain::op" for non-default domains and
  /// by "op" for the default domain.
  AmpClass classify(llvm::StringRef domain, llvm::StringRef opType) const;
  AmpClass classify(const Node &n) const;
  /// The reason a default entry is where it is ("" for user additions).
  llvm::StringRef reason(llvm::StringRef qualifiedOp) const;

  /// Entries of one list, sorted.
  std::vector<std::string> entries(AmpClass c) const;

private:
  struct Entry {
    AmpClass cls;
    std::string reason;
  };
  llvm::StringMap<Entry> table;
};

/// Loss scaling of training models (docs/training.md, "Loss scaling").
enum class LossScaleMode : uint8_t {
  Default, ///< dynamic for an fp16 target, none for bf16
  Dynamic, ///< S is graph state: backoff on overflow, growth after `interval` clean steps
  Static,  ///< S is a fixed initializer (`staticScale`)
  None,    ///< no scaling; the overflow check and the skipped update stay
  Off,     ///< nothing inserted: plain AMP
};

llvm::StringRef lossScaleModeName(LossScaleMode m); ///< "default", "dynamic", ...

/// Settings of the loss-scaling stage (--loss-scale*, MPC_AMP_LOSS_SCALE*).
struct LossScaleOptions {
  LossScaleMode mode = LossScaleMode::Default;
  double staticScale = 0; ///< the N of --loss-scale N
  double init = 32768;    ///< 2^15
  double growth = 2;
  double backoff = 0.5;
  int64_t interval = 2000;
  double min = 1;
  double max = 16777216; ///< 2^24
  /// --fused-unscale: one ai.mpc.training MultiTensorUnscale node instead of
  /// the per-gradient Cast, Mul and check nodes (scaled modes only).
  bool fusedUnscale = false;
};

/// Parses "dynamic|none|off|N" into `o` (mode and static scale).
llvm::Error parseLossScaleMode(llvm::StringRef text, llvm::StringRef what, LossScaleOptions &o);
/// Parses one numeric loss-scale setting: `key` is init, growth, backoff,
/// interval, min or max; `what` names the flag or variable in messages.
llvm::Error parseLossScaleSetting(llvm::StringRef key, llvm::StringRef text,
                                  llvm::StringRef what, LossScaleOptions &o);

/// Options of the AMP rewrite, filled from flags and MPC_AMP_* variables.
struct AmpOptions {
  DType target = DType::F16;
  /// Graph inputs and outputs keep their element types (casts next to them).
  bool keepIoTypes = true;
  AmpLevel level = AmpLevel::Default;
  AmpListEdits edits;
  /// Nodes whose name matches are painted deny whatever their op.
  std::string denyNodesRegex;
  /// 0: summary only; 1: every cast and type change; 2: every decision.
  unsigned verbose = 0;
  /// Folder for before/after dumps (MPC_AMP_LOG_PATH or --dump-dir).
  std::string logPath;
  /// Nodes painted deny whatever their op, like --deny-nodes: the training
  /// model's mpc.training.fp32_nodes (filled by the tool, see LossScaling.h).
  llvm::DenseSet<const Node *> fp32Nodes;
  LossScaleOptions lossScale;
};

/// Reads the MPC_AMP_* (and other MPC_*) variables of `envp` into `opts`.
/// Unknown MPC_ variables and malformed values are errors naming them.
llvm::Error applyEnvironment(AmpOptions &opts, const char *const *envp);

/// Splits a comma-separated list, trimming whitespace, dropping empties.
std::vector<std::string> splitOpList(llvm::StringRef s);

/// Checks one op of a list edit: an op type of the default domain ("Conv",
/// "ai.onnx::Conv") must be one that an ONNX schema, mpc's signatures or its
/// kernels know; a domain-qualified op ("com.example::MyOp") is taken as a
/// custom op. `source` names the variable or flag in the one-line error.
llvm::Error checkListedOp(llvm::StringRef source, llvm::StringRef op);

/// Verbose-mode notes on the domain-qualified ops the edits add that no
/// schema mpc knows defines (custom ops), one line each, sorted.
std::vector<std::string> customOpNotes(const AmpListEdits &edits);

} // namespace mpc

#endif // MPC_PASSES_AMPLISTS_H
