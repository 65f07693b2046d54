//===- Plot.h - Line charts as plain SVG ------------------------*- C++ -*-===//
//
// The renderer behind `mpc plot` and `mpc run --train --plot`: one or more
// stacked panels sharing the x axis, each with its own y axis (linear or
// log), ticks at 1/2/5 steps, gridlines and a legend. The output depends only
// on the data and options: same input, same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TOOLS_PLOT_H
#define MPC_TOOLS_PLOT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <utility>
#include <vector>

namespace mpc {
namespace tool {

/// One curve: (x, y) points in x order; a NaN or infinite y breaks the line.
struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;
};

/// One chart panel with its own y axis.
struct PlotPanel {
  std::string yLabel;
  bool logY = false;
  std::vector<PlotSeries> series;
};

/// Renders the panels stacked vertically, sharing the x axis (`xLabel`).
std::string renderPlotSvg(llvm::ArrayRef<PlotPanel> panels, const std::string &title,
                          const std::string &xLabel);

} // namespace tool
} // namespace mpc

#endif // MPC_TOOLS_PLOT_H
