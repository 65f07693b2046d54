//===- Profile.cpp - Node time by op type for --profile --------------------===//
//
// See Profile.h.
//
//===----------------------------------------------------------------------===//
#include "Profile.h"
#include "mpc/IR/Graph.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>

using namespace mpc;

std::vector<OpTypeTime> mpc::timeByOpType(llvm::ArrayRef<const Node *> nodes,
                                          llvm::ArrayRef<double> seconds) {
  std::map<std::string, OpTypeTime> by;
  for (size_t i = 0; i < nodes.size() && i < seconds.size(); ++i) {
    const Node &n = *nodes[i];
    llvm::StringRef type = n.opType, domain = n.domain;
    std::string op = domain.empty() || domain == "ai.onnx" ? type.str()
                                                           : (domain + "::" + type).str();
    OpTypeTime &t = by[op];
    t.op = op;
    ++t.nodes;
    t.seconds += seconds[i];
  }
  std::vector<OpTypeTime> out;
  for (auto &kv : by)
    out.push_back(std::move(kv.second));
  // By name already (the map); longest first, a stable sort keeps ties so.
  std::stable_sort(out.begin(), out.end(), [](const OpTypeTime &a, const OpTypeTime &b) {
    return a.seconds > b.seconds;
  });
  return out;
}

void mpc::printTimeByOpType(llvm::raw_ostream &os, llvm::ArrayRef<const Node *> nodes,
                            llvm::ArrayRef<double> seconds, unsigned runs,
                            llvm::StringRef unit, llvm::StringRef what, size_t top) {
  std::vector<OpTypeTime> by = timeByOpType(nodes, seconds);
  double total = 0;
  for (const OpTypeTime &t : by)
    total += t.seconds;
  double per = runs ? 1e3 / runs : 0;
  os << llvm::formatv("profile: node time by op type per {0} ({1}): {2:f3} ms in {3} node(s)\n",
                      unit, what, total * per, nodes.size());
  for (size_t k = 0; k < by.size() && k < top; ++k)
    os << llvm::formatv("  {0,10:f4} ms {1,6:f2}%  {2} x{3}\n", by[k].seconds * per,
                        total > 0 ? 100.0 * by[k].seconds / total : 0.0, by[k].op,
                        by[k].nodes);
}
