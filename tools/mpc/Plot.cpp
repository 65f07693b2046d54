//===- Plot.cpp - `mpc plot`: training curves as SVG -------------------------===//
//
// Reads CSV logs (`mpc run --train --log`), takes one column against the
// step column and draws one curve per file with the SVG renderer declared in
// Plot.h. The renderer writes every number with fixed precision and nothing
// else that varies (no dates, no ids), so the bytes are reproducible.
//
//===----------------------------------------------------------------------===//
#include "Plot.h"
#include "Tool.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace mpc;
using namespace mpc::tool;

static const char kPlotUsage[] =
    R"(usage: mpc plot A.csv [B.csv ...] -o CURVES.svg [options]

Draws one column of training logs (`mpc run --train --log`) against their
`step` column (the row number when there is none) as a line chart: one curve
per file, axes with ticks, a legend. The SVG is plain and deterministic: the
same files and options give the same bytes.

options:
  -o FILE           the SVG to write (atomically)
  --column NAME     the column to draw (default loss)
  --label NAME      legend name of the next file, in order (default: the
                    file name without .csv); may be repeated
  --log-y           logarithmic y axis (non-positive values are left out)
  --title TEXT      chart title (default: the column name)

exit status: 0 success, 1 bad input (one line on stderr, nothing written),
2 bad usage.
)";

//===----------------------------------------------------------------------===//
// The renderer
//===----------------------------------------------------------------------===//

namespace {
/// A y (or x) axis: its range in plot units (log10 for a log axis) and ticks.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks; // in data units
};
} // namespace

static constexpr double kWidth = 720, kLeft = 78, kRight = 24, kTop = 40;
static constexpr double kPanelHeight = 260, kPanelGap = 54, kBottom = 52;
static const char *const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static std::string num(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.2f", v);
  return s == "-0.00" ? "0.00" : s;
}

static std::string tickLabel(double v) {
  if (std::fabs(v) < 1e-12)
    return "0";
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.6g", v);
  return s;
}

static std::string escapeXml(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&apos;"; break;
    default:
      // Control characters are not allowed in XML 1.0 text.
      if (static_cast<unsigned char>(c) >= 0x20 || c == '\t')
        out += c;
    }
  }
  return out;
}

/// 1, 2 or 5 times a power of ten: about `target` steps over `range`.
static double niceStep(double range, int target) {
  double raw = range / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

static Axis linearAxis(double mn, double mx, int target) {
  Axis a;
  if (!(mx > mn)) {
    double pad = mn == 0 ? 1 : std::fabs(mn) * 0.1;
    mn -= pad;
    mx += pad;
  }
  double step = niceStep(mx - mn, target);
  a.lo = std::floor(mn / step) * step;
  a.hi = std::ceil(mx / step) * step;
  for (long k = std::lround(a.lo / step); k <= std::lround(a.hi / step); ++k)
    a.ticks.push_back(double(k) * step);
  return a;
}

static Axis logAxis(double mn, double mx) {
  Axis a;
  a.log = true;
  int lo = int(std::floor(std::log10(mn))), hi = int(std::ceil(std::log10(mx)));
  if (hi == lo)
    ++hi;
  a.lo = lo;
  a.hi = hi;
  for (int k = lo; k <= hi; ++k) {
    double p = std::pow(10.0, k);
    a.ticks.push_back(p);
    if (hi - lo <= 2 && k < hi) {
      a.ticks.push_back(2 * p);
      a.ticks.push_back(5 * p);
    }
  }
  std::sort(a.ticks.begin(), a.ticks.end());
  return a;
}

static double unitOf(const Axis &a, double v) { return a.log ? std::log10(v) : v; }

static bool drawable(const Axis &a, double y) { return std::isfinite(y) && (!a.log || y > 0); }

std::string tool::renderPlotSvg(llvm::ArrayRef<PlotPanel> panels, const std::string &title,
                                const std::string &xLabel) {
  // The shared x axis.
  double xmn = INFINITY, xmx = -INFINITY;
  for (const PlotPanel &p : panels)
    for (const PlotSeries &s : p.series)
      for (const auto &pt : s.points)
        if (std::isfinite(pt.first)) {
          xmn = std::min(xmn, pt.first);
          xmx = std::max(xmx, pt.first);
        }
  if (!std::isfinite(xmn))
    xmn = 0, xmx = 1;
  Axis x = linearAxis(xmn, xmx, 8);
  double plotW = kWidth - kLeft - kRight;
  double height = kTop + double(panels.size()) * kPanelHeight +
                  double(panels.size() ? panels.size() - 1 : 0) * kPanelGap + kBottom;

  std::string out;
  llvm::raw_string_ostream os(out);
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\""
     << num(height) << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << num(kWidth) << "\" height=\"" << num(height)
     << "\" fill=\"white\"/>\n"
     << "<text x=\"" << num(kWidth / 2) << "\" y=\"24\" text-anchor=\"middle\" "
     << "font-size=\"15\">" << escapeXml(title) << "</text>\n";

  for (size_t pi = 0; pi < panels.size(); ++pi) {
    const PlotPanel &p = panels[pi];
    double top = kTop + double(pi) * (kPanelHeight + kPanelGap), bottom = top + kPanelHeight;
    double ymn = INFINITY, ymx = -INFINITY;
    for (const PlotSeries &s : p.series)
      for (const auto &pt : s.points)
        if (std::isfinite(pt.second) && (!p.logY || pt.second > 0)) {
          ymn = std::min(ymn, pt.second);
          ymx = std::max(ymx, pt.second);
        }
    if (!std::isfinite(ymn))
      ymn = p.logY ? 1 : 0, ymx = p.logY ? 10 : 1;
    Axis y = p.logY ? logAxis(ymn, ymx) : linearAxis(ymn, ymx, 6);
    auto px = [&](double v) { return kLeft + (v - x.lo) / (x.hi - x.lo) * plotW; };
    auto py = [&](double v) {
      return bottom - (unitOf(y, v) - y.lo) / (y.hi - y.lo) * kPanelHeight;
    };

    os << "<g class=\"panel\">\n";
    // Gridlines and ticks.
    for (double t : y.ticks) {
      double yy = py(t);
      os << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(yy) << "\" x2=\"" << num(kLeft + plotW)
         << "\" y2=\"" << num(yy) << "\" stroke=\"#e5e5e5\"/>\n"
         << "<line x1=\"" << num(kLeft - 5) << "\" y1=\"" << num(yy) << "\" x2=\"" << num(kLeft)
         << "\" y2=\"" << num(yy) << "\" stroke=\"black\"/>\n"
         << "<text x=\"" << num(kLeft - 8) << "\" y=\"" << num(yy + 4) << "\" text-anchor=\"end\">"
         << tickLabel(t) << "</text>\n";
    }
    for (double t : x.ticks) {
      double xx = px(t);
      os << "<line x1=\"" << num(xx) << "\" y1=\"" << num(top) << "\" x2=\"" << num(xx)
         << "\" y2=\"" << num(bottom) << "\" stroke=\"#e5e5e5\"/>\n"
         << "<line x1=\"" << num(xx) << "\" y1=\"" << num(bottom) << "\" x2=\"" << num(xx)
         << "\" y2=\"" << num(bottom + 5) << "\" stroke=\"black\"/>\n"
         << "<text x=\"" << num(xx) << "\" y=\"" << num(bottom + 18) << "\" text-anchor=\"middle\">"
         << tickLabel(t) << "</text>\n";
    }
    os << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(top) << "\" width=\"" << num(plotW)
       << "\" height=\"" << num(kPanelHeight) << "\" fill=\"none\" stroke=\"black\"/>\n";
    // Axis titles.
    double midY = (top + bottom) / 2;
    os << "<text x=\"18\" y=\"" << num(midY)
       << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << num(midY) << ")\">"
       << escapeXml(p.yLabel + (p.logY ? " (log)" : "")) << "</text>\n";
    if (pi + 1 == panels.size())
      os << "<text x=\"" << num(kLeft + plotW / 2) << "\" y=\"" << num(bottom + 38)
         << "\" text-anchor=\"middle\">" << escapeXml(xLabel) << "</text>\n";
    // Curves: a polyline per unbroken run of drawable points; a lone point
    // is a dot.
    for (size_t si = 0; si < p.series.size(); ++si) {
      const char *color = kColors[si % (sizeof(kColors) / sizeof(kColors[0]))];
      std::vector<std::pair<double, double>> run;
      auto flush = [&] {
        if (run.size() == 1)
          os << "<circle cx=\"" << num(run[0].first) << "\" cy=\"" << num(run[0].second)
             << "\" r=\"2\" fill=\"" << color << "\"/>\n";
        if (run.size() > 1) {
          os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
          for (size_t i = 0; i < run.size(); ++i)
            os << (i ? " " : "") << num(run[i].first) << "," << num(run[i].second);
          os << "\"/>\n";
        }
        run.clear();
      };
      for (const auto &pt : p.series[si].points) {
        if (!std::isfinite(pt.first) || !drawable(y, pt.second)) {
          flush();
          continue;
        }
        run.emplace_back(px(pt.first), py(pt.second));
      }
      flush();
    }
    // Legend, top right inside the panel.
    size_t longest = 0;
    for (const PlotSeries &s : p.series)
      longest = std::max(longest, s.label.size());
    double boxW = 34 + 7 * double(longest), boxH = 8 + 16 * double(p.series.size());
    double bx = kLeft + plotW - boxW - 8, by = top + 8;
    if (!p.series.empty())
      os << "<rect x=\"" << num(bx) << "\" y=\"" << num(by) << "\" width=\"" << num(boxW)
         << "\" height=\"" << num(boxH)
         << "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#999999\"/>\n";
    for (size_t si = 0; si < p.series.size(); ++si) {
      const char *color = kColors[si % (sizeof(kColors) / sizeof(kColors[0]))];
      double ly = by + 12 + 16 * double(si);
      os << "<line x1=\"" << num(bx + 6) << "\" y1=\"" << num(ly) << "\" x2=\"" << num(bx + 24)
         << "\" y2=\"" << num(ly) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n"
         << "<text x=\"" << num(bx + 28) << "\" y=\"" << num(ly + 4) << "\">"
         << escapeXml(p.series[si].label) << "</text>\n";
    }
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

//===----------------------------------------------------------------------===//
// `mpc plot`
//===----------------------------------------------------------------------===//

namespace {
struct PlotArgs {
  std::vector<std::string> files, labels;
  std::string output, column = "loss", title;
  bool logY = false;
};
} // namespace

static std::string parseArgs(llvm::ArrayRef<const char *> argv, PlotArgs &a) {
  ArgScanner s(argv);
  while (!s.done()) {
    std::string v;
    bool missing = false;
    llvm::StringRef cur = s.peek();
    if (s.value("-o", v, missing) || s.value("--output", v, missing)) {
      a.output = v;
    } else if (s.value("--column", v, missing)) {
      a.column = v;
    } else if (s.value("--label", v, missing)) {
      a.labels.push_back(v);
    } else if (s.value("--title", v, missing)) {
      a.title = v;
    } else if (s.flag("--log-y")) {
      a.logY = true;
    } else {
      s.next();
      if (cur.startswith("-") && cur != "-")
        return "unknown option " + quoteName(cur);
      a.files.push_back(cur.str());
      continue;
    }
    if (missing)
      return "option " + quoteName(cur) + " needs a value";
  }
  if (a.files.empty())
    return "no CSV file given";
  if (a.output.empty())
    return "no output file given (-o CURVES.svg)";
  if (a.column.empty())
    return "--column needs a column name";
  if (a.labels.size() > a.files.size())
    return "more --label options (" + std::to_string(a.labels.size()) + ") than files (" +
           std::to_string(a.files.size()) + ")";
  return "";
}

/// Reads (step, value) pairs of `column` from a CSV log; empty cells are
/// skipped, "nan"/"inf" kept (they break the line).
static llvm::Expected<PlotSeries> readCsvSeries(const std::string &path, llvm::StringRef column) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return inputError("cannot read '{0}': {1}", path, buf.getError().message());
  llvm::SmallVector<llvm::StringRef, 64> lines;
  (*buf)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.empty())
    return inputError("{0}: empty file, no CSV header", path);
  llvm::SmallVector<llvm::StringRef, 16> header;
  lines[0].rtrim("\r").split(header, ',');
  int stepCol = -1, valueCol = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    llvm::StringRef h = header[i].trim();
    if (h == "step")
      stepCol = int(i);
    if (h == column)
      valueCol = int(i);
  }
  if (valueCol < 0)
    return inputError("{0}: no column '{1}' (the header is '{2}')", path, column,
                      lines[0].rtrim("\r"));
  auto parse = [&](llvm::StringRef cell, size_t line, double &v) -> llvm::Error {
    std::string c = cell.trim().str();
    char *end = nullptr;
    v = std::strtod(c.c_str(), &end);
    if (c.empty() || *end)
      return inputError("{0}:{1}: '{2}' is not a number", path, line + 1, c);
    return llvm::Error::success();
  };
  PlotSeries s;
  s.label = llvm::sys::path::stem(path).str();
  for (size_t l = 1; l < lines.size(); ++l) {
    llvm::StringRef line = lines[l].rtrim("\r");
    if (line.trim().empty())
      continue;
    llvm::SmallVector<llvm::StringRef, 16> cells;
    line.split(cells, ',');
    if (cells.size() != header.size())
      return inputError("{0}:{1}: {2} cells, the header has {3}", path, l + 1, cells.size(),
                        header.size());
    if (cells[size_t(valueCol)].trim().empty())
      continue;
    double x = double(l), y;
    if (stepCol >= 0)
      if (auto err = parse(cells[size_t(stepCol)], l, x))
        return std::move(err);
    if (auto err = parse(cells[size_t(valueCol)], l, y))
      return std::move(err);
    s.points.emplace_back(x, y);
  }
  if (s.points.empty())
    return inputError("{0}: column '{1}' has no values", path, column);
  return s;
}

int tool::runPlot(llvm::ArrayRef<const char *> args, const char *const *) {
  if (wantsHelp(args)) {
    llvm::outs() << kPlotUsage;
    return Ok;
  }
  PlotArgs a;
  std::string usage = parseArgs(args, a);
  if (!usage.empty())
    return usageError("plot", usage);
  FilePlan files;
  for (const std::string &f : a.files)
    files.read(f, "CSV file");
  files.write(a.output, "output");
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  files.removeStaleTemporaries();
  PlotPanel panel;
  panel.yLabel = a.column;
  panel.logY = a.logY;
  for (size_t i = 0; i < a.files.size(); ++i) {
    auto s = readCsvSeries(a.files[i], a.column);
    if (!s)
      return fail(s.takeError());
    if (i < a.labels.size())
      s->label = a.labels[i];
    panel.series.push_back(std::move(*s));
  }
  if (a.logY && llvm::none_of(panel.series, [](const PlotSeries &s) {
        return llvm::any_of(s.points, [](const auto &p) { return p.second > 0; });
      }))
    return fail("--log-y: column " + quoteName(a.column) + " has no positive values");
  std::string svg = renderPlotSvg({panel}, a.title.empty() ? a.column : a.title, "step");
  if (llvm::Error err = writeFileAtomically(a.output, svg))
    return fail(std::move(err));
  return Ok;
}
