//===- AmpColoring.h - The AMP painting analysis ----------------*- C++ -*-===//
//
// Colors every type slot (node, type parameter) of a model allow / deny /
// keep with the algorithm of docs/amp-algorithm.md. An analysis: it reads the
// model, the lists, the options and the backend capabilities and mutates
// nothing; InsertCasts applies its result.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_PASSES_AMPCOLORING_H
#define MPC_PASSES_AMPCOLORING_H

#include "mpc/IR/Graph.h"
#include "mpc/Passes/AmpLists.h"
#include "mpc/Target/BackendCaps.h"
#include "llvm/Support/raw_ostream.h"
#include <cassert>
#include <string>
#include <vector>

namespace mpc {

/// Why a slot ended with its color; printed in the decision log and report.
enum class AmpReason : uint8_t {
  AllowList,        ///< op on the allow list
  BetweenAllow,     ///< clear/infer on a clear/infer-only path between allow ops
  FollowsAllow,     ///< bf16: infer op fed by allow and no deny
  ClearNextToAllow, ///< clear op connected to allow through clear ops
  ForceAll,         ///< UNSAFE_FORCE_ALL
  DenyList,         ///< op on the deny list
  DenyNodes,        ///< node name matched --deny-nodes
  DenyPropagated,   ///< downstream of a deny op through infer/clear ops
  InferAlone,       ///< infer op not between allow ops
  ClearAlone,       ///< clear op not connected to allow
  Unlisted,         ///< op on no list: an fp32 barrier
  NotFloat32,       ///< the slot's type is not fp32
  FixedType,        ///< the schema fixes the slot's type
  ParamKeptFp32,    ///< a parameter slot the lists keep fp32 (BN stats, Resize scales)
  TypeUnknown,      ///< no element type known for the slot
  SchemaRejects,    ///< the op's schema does not accept the target type
  NoKernel,         ///< the backend has no low-precision kernel
  ShapePathGuard,   ///< only feeds shape/size/index computations
  ConstantGuard,    ///< a constant input would flush to zero in the target type
  ClusterDisagrees, ///< a sequence cluster member is not allow
};

llvm::StringRef ampReasonText(AmpReason r);

enum class SlotColor : uint8_t { Keep, Allow, Deny };

/// What a slot's detail text names; the text is built only when printed.
enum class AmpDetail : uint8_t {
  None,
  TrainingFp32, ///< "training fp32 node"
  OtherType,    ///< the slot's element type when it is not fp32
  DenyOp,       ///< the deny op the slot was painted from (a Node)
  Constant,     ///< the constant that flushes to zero (a Value)
};

/// One type slot: 40 bytes, no strings (names point into the model and into
/// the cached operator signatures).
struct AmpSlot {
  Node *node = nullptr;
  /// Type parameter ("T"), pointing into the cached signature; empty for a
  /// fixed port (AmpColoring::paramText names it "#in2"/"#out0").
  llvm::StringRef param;
  union {
    const void *detailRef = nullptr; ///< DenyOp: the Node; Constant: the Value
    DType detailType;                ///< OtherType
  };
  AmpClass cls = AmpClass::Unlisted;
  SlotColor color = SlotColor::Keep;
  AmpReason reason = AmpReason::Unlisted;
  bool processable = false;
  AmpDetail detailKind = AmpDetail::None;

  /// E.g. the deny op a slot was painted from; "" when there is none.
  std::string detail() const;
  bool hasDetail() const { return detailKind != AmpDetail::None; }
};

/// A constant that does not fit the target type, reported by the painting.
struct ConstantIssue {
  std::string value;  ///< initializer or Constant output name
  std::string node;   ///< description of the consuming node
  unsigned overflow = 0, underflow = 0, total = 0;
  double example = 0; ///< one offending value
  bool keptFp32 = false;
};

class AmpColoring {
public:
  /// Paints every graph of `m` (main, nested bodies, training graphs).
  AmpColoring(Model &m, const AmpLists &lists, const AmpOptions &opts,
              const BackendCaps &caps);

  const std::vector<AmpSlot> &slots() const { return slotList; }
  /// Slot of input/output port `port` of `n`.
  unsigned slotOf(const Node &n, bool isInput, unsigned port) const {
    assert(n.id() < portBase.size() && portBase[n.id()] != kNotPainted && "node was not painted");
    return portSlot[portBase[n.id()] + (isInput ? port : n.numInputs() + port)];
  }
  bool isAllow(const Node &n, bool isInput, unsigned port) const {
    return slotList[slotOf(n, isInput, port)].color == SlotColor::Allow;
  }
  /// Whether the input slot a use feeds is allow (without loading the user).
  bool isAllow(const Use &u) const {
    assert(u.userId < portBase.size() && portBase[u.userId] != kNotPainted &&
           "node was not painted");
    return slotList[portSlot[portBase[u.userId] + u.operand]].color == SlotColor::Allow;
  }
  /// Number of slots painted allow (N of the summary line).
  unsigned numAllow() const;
  const std::vector<ConstantIssue> &constantIssues() const { return constIssues; }
  /// Nodes whose signature came from a newer-opset fallback.
  const std::vector<std::string> &fallbackNotes() const { return fallbacks; }

  /// One line per float slot: "Painting slot T of MatMul node 'fc1' ALLOW: ...".
  void printDecisions(llvm::raw_ostream &os) const;

  /// The slot's type parameter, or "#inN"/"#outN" for a fixed port.
  std::string paramText(unsigned slot) const;
  /// Painted (domain, op type) pairs are numbered densely; decision summaries
  /// keep one copy of each op's name.
  unsigned numOps() const { return static_cast<unsigned>(opNames.size()); }
  unsigned opIndex(const Node &n) const { return nodeOp[n.id()]; }
  /// "Domain::OpType" (or "OpType" in the default domain) of op `op`.
  llvm::StringRef opName(unsigned op) const { return opNames[op]; }

private:
  static constexpr unsigned kNotPainted = ~0u;
  std::vector<AmpSlot> slotList;
  std::vector<unsigned> portBase; ///< by Node::id(): first port index
  std::vector<unsigned> portSlot; ///< inputs, then outputs, per node
  std::vector<unsigned> nodeOp;   ///< by Node::id(): index into opNames
  std::vector<std::string> opNames;
  std::vector<ConstantIssue> constIssues;
  std::vector<std::string> fallbacks;

  friend class AmpPainter;
};

} // namespace mpc

#endif // MPC_PASSES_AMPCOLORING_H
