//===- Dump.h - Before/after dumps of the AMP rewrite -----------*- C++ -*-===//
//
// Dumps for inspection (--dump-dir or MPC_AMP_LOG_PATH): the graph before and
// after as ONNX, a Graphviz rendering of each (DOT and SVG) with nodes colored
// by decision, and the effective lists. Files share a stamp so a before/after
// pair sorts together.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_DUMP_H
#define MPC_TOOLS_DUMP_H

#include "mpc/Passes/Amp.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace mpc {
namespace tool {

struct DumpTarget {
  std::string dir;   ///< existing folder
  std::string stamp; ///< shared prefix, deterministic for a given input
};

/// Writes `<stamp>_<graph>_<phase>.onnx`, `.dot` and `.svg` (the SVG when the
/// Graphviz `dot` program is available; a note otherwise). `decisions` colors
/// the nodes; nodes not in it (inserted casts) are marked as inserted.
/// Graphs too large to render usefully are collapsed, and the rendering says so.
llvm::Error dumpGraph(const DumpTarget &t, llvm::StringRef phase, Model &m,
                      const std::vector<NodeDecision> &decisions);

/// Every file dumpGraph (both phases) and dumpLists may write for `m`.
std::vector<std::string> dumpFiles(const DumpTarget &t, const Model &m);

/// Writes `<stamp>_<graph>_lists.txt`: the effective lists and options.
llvm::Error dumpLists(const DumpTarget &t, const Model &m, const AmpLists &lists,
                      const AmpOptions &opts);

/// Writes the JSON report of a rewrite (`--report`): per node its color and
/// reason, the casts inserted, the constants clipped, and the fractions of
/// FLOPs and of tensor bytes now in 16-bit. `after` is the rewritten model.
llvm::Error writeReport(llvm::StringRef path, const Model &after, const AmpResult &result,
                        const AmpOptions &opts);

} // namespace tool
} // namespace mpc

#endif // MPC_TOOLS_DUMP_H
