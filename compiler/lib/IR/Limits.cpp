//===- Limits.cpp - Limits on the shape of a model -------------------------===//
#include "mpc/IR/Limits.h"
#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"
#include <algorithm>

using namespace mpc;

int mpc::graphDepth(const Graph &g) {
  int depth = 0;
  for (const Graph *p = g.parent(); p; p = p->parent())
    ++depth;
  return depth;
}

llvm::Error mpc::graphDepthError(llvm::StringRef graphName, int depth,
                                 llvm::ArrayRef<std::string> nodePath) {
  // The outermost and innermost steps say where; the middle repeats.
  constexpr size_t kEnds = 3;
  std::string path;
  for (size_t i = 0; i < nodePath.size(); ++i) {
    if (i == kEnds && nodePath.size() > 2 * kEnds + 1) {
      path += llvm::formatv(" > ... ({0} more) ...", nodePath.size() - 2 * kEnds).str();
      i = nodePath.size() - kEnds - 1;
      continue;
    }
    if (i)
      path += " > ";
    path += nodePath[i];
  }
  return inputError("graph '{0}' is at nesting depth {1}, beyond the limit of {2} (node "
                    "path: {3})",
                    graphName, depth, kMaxGraphDepth, path);
}

llvm::Error mpc::checkGraphDepth(const Graph &g) {
  int depth = graphDepth(g);
  if (depth <= kMaxGraphDepth)
    return llvm::Error::success();
  std::vector<std::string> path;
  for (const Graph *h = &g; h && h->owningNode(); h = h->parent())
    path.push_back(describeNode(*h->owningNode()));
  std::reverse(path.begin(), path.end());
  return graphDepthError(g.name, depth, path);
}
