//===- Untie.cpp - Undo initializers an exporter merged by value -----------===//
//
// torch.onnx.export (TorchScript exporter, module in eval mode) merges
// initializers that hold equal values: the duplicate's uses read the kept
// one, directly or through an Identity node. For inference that changes
// nothing; for training it ties tensors that PyTorch trains (or updates)
// separately: BatchNormalization running statistics that read a parameter
// (all ones or all zeros at initialization) or another layer's statistic,
// and the scales and biases of normalization layers that became one tensor
// (with each other or with a Linear bias). Before the training step is
// built, each such use gets its own copy of the initializer
// (docs/training.md, "Initializers the exporter merged").
//
//===----------------------------------------------------------------------===//
#include "TrainGraphImpl.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>

using namespace mpc;
using namespace mpc::train;

namespace {
enum class Role { RunningMean, RunningVar, Scale, Bias, Other };

struct Site {
  Node *node;
  unsigned input;
  Role role;
};
} // namespace

static bool isDefaultOp(const Node &n, llvm::StringRef op) {
  return n.opType == op && (n.domain.empty() || n.domain == "ai.onnx");
}

static Role roleOf(const Node &n, unsigned input) {
  if (isDefaultOp(n, "BatchNormalization") && (input == 3 || input == 4))
    return input == 3 ? Role::RunningMean : Role::RunningVar;
  bool norm = isDefaultOp(n, "BatchNormalization") || isDefaultOp(n, "LayerNormalization") ||
              isDefaultOp(n, "InstanceNormalization") || isDefaultOp(n, "GroupNormalization");
  if (norm && (input == 1 || input == 2))
    return input == 1 ? Role::Scale : Role::Bias;
  return Role::Other;
}

/// How the summary names a role, and the suffix of a copy's name.
struct RoleNames {
  const char *text, *suffix;
};
static RoleNames namesOf(Role r) {
  static const RoleNames names[] = {{"running mean", "mean"},
                                    {"running variance", "var"},
                                    {"scale", "scale"},
                                    {"bias", "bias"},
                                    {"input", "use"}};
  return names[static_cast<int>(r)];
}

static bool isStatistic(Role r) { return r == Role::RunningMean || r == Role::RunningVar; }
static bool isNormParameter(Role r) { return r == Role::Scale || r == Role::Bias; }

/// The uses of `v` in `g`, looking through Identity nodes (whose outputs are
/// not graph outputs); the Identity nodes passed are collected in `via`.
static void collectSites(Value *v, Graph &g, std::vector<Site> &sites,
                         std::vector<Node *> &via) {
  for (const Use &u : v->uses()) {
    Node *n = u.user;
    if (n->getParent() != &g)
      continue;
    if (isDefaultOp(*n, "Identity") && n->output(0) && !n->output(0)->isGraphOutput()) {
      via.push_back(n);
      collectSites(n->output(0), g, sites, via);
      continue;
    }
    sites.push_back({n, u.operand, roleOf(*n, u.operand)});
  }
}

std::vector<std::string> train::untieMergedInitializers(Model &m) {
  Graph &g = *m.graph;
  std::vector<std::string> report;
  std::vector<Node *> deadIdentities;
  std::vector<Value *> inits = g.initializers(); // copies are appended below
  for (Value *init : inits) {
    if (!isFloatTensor(init) || !init->initializer())
      continue;
    std::vector<Site> sites;
    std::vector<Node *> via;
    collectSites(init, g, sites, via);
    std::sort(sites.begin(), sites.end(), [](const Site &a, const Site &b) {
      return a.node->order() != b.node->order() ? a.node->order() < b.node->order()
                                                : a.input < b.input;
    });
    size_t stats = 0, normParams = 0; // uses of each kind
    for (const Site &s : sites) {
      stats += isStatistic(s.role);
      normParams += isNormParameter(s.role);
    }
    bool tied = stats + normParams > 0 && sites.size() > 1;
    // The use that keeps the initializer: the first other use (all other
    // uses keep it: weight tying the user may mean), else the first
    // normalization parameter, else the first statistic.
    auto rank = [](Role r) { return r == Role::Other ? 0 : isNormParameter(r) ? 1 : 2; };
    const Site *keeper = nullptr;
    for (const Site &s : sites)
      if (!keeper || rank(s.role) < rank(keeper->role))
        keeper = &s;
    for (const Site &s : sites) {
      bool own = tied && &s != keeper && (isStatistic(s.role) || isNormParameter(s.role));
      if (own) {
        std::string node = s.node->name.empty()
                               ? s.node->opType + std::to_string(s.node->order())
                               : s.node->name;
        Value *copy = g.addInitializer(
            m.freshName(init->name() + "." + node + "." + namesOf(s.role).suffix),
            *init->initializer());
        copy->type = init->type;
        s.node->setInput(s.input, copy);
        report.push_back(formatQuoted("'{0}' -> '{1}' ({2} of '{3}')", init->name(),
                                      copy->name(), namesOf(s.role).text, node));
      } else if (isStatistic(s.role) && s.node->input(s.input) != init) {
        // A statistic read through Identity: read the initializer itself, so
        // that its update can be bound to it.
        s.node->setInput(s.input, init);
      }
    }
    deadIdentities.insert(deadIdentities.end(), via.begin(), via.end());
  }
  // Identity nodes left without uses (later ones first: chains unwind).
  std::sort(deadIdentities.begin(), deadIdentities.end(),
            [](const Node *a, const Node *b) { return a->order() > b->order(); });
  deadIdentities.erase(std::unique(deadIdentities.begin(), deadIdentities.end()),
                       deadIdentities.end());
  for (Node *n : deadIdentities)
    if (!n->output(0)->hasUses() && !n->output(0)->isGraphOutput())
      g.eraseNode(n);
  return report;
}
