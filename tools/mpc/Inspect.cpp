//===- Inspect.cpp - `mpc inspect`: what a model holds and a rewrite would do -===//
//
// Prints a model's header (IR version, producer, opsets), its inputs and
// outputs, an op histogram, its parameters by element type, and what the AMP
// painting would decide per op type, computed by running the coloring
// analysis in memory. Writes no file, whatever MPC_AMP_LOG_PATH says.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/Ops/TypeInference.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Text/Text.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"
#include <map>

using namespace mpc;
using namespace mpc::tool;

static const char kInspectUsage[] =
    R"(usage: mpc inspect MODEL [options]

Prints what MODEL holds and what `mpc rewrite` would decide for it: IR version,
producer, opset imports, graph inputs and outputs, node count, op histogram,
parameters by element type, and per op type the colors the AMP painting would
give (with the reason for ops that stay fp32). Nothing is written.

options:
  --target fp16|bf16   16-bit type the painting assumes (default fp16)
  --json               print the same information as one JSON object

environment: the MPC_AMP_* list, level and target variables apply as for
`mpc rewrite` (see 'mpc rewrite --help'); MPC_AMP_LOG_PATH is ignored.

exit status: 0 success, 1 bad input (one line on stderr), 2 bad usage.
)";

namespace {
struct InspectArgs {
  std::string input;
  bool json = false;
  AmpOptions amp;
};

/// Painting outcome of one group of nodes of one op type.
struct GroupKey {
  SlotColor color;
  bool partial;
  AmpReason reason;
  bool operator<(const GroupKey &o) const {
    // allow, deny, keep; then by reason.
    auto rank = [](SlotColor c) {
      return c == SlotColor::Allow ? 0 : c == SlotColor::Deny ? 1 : 2;
    };
    if (rank(color) != rank(o.color))
      return rank(color) < rank(o.color);
    if (partial != o.partial)
      return partial < o.partial;
    return reason < o.reason;
  }
};

struct OpRow {
  std::string op;
  unsigned count = 0;
  std::map<GroupKey, unsigned> groups;
};

struct DTypeParams {
  unsigned tensors = 0;
  uint64_t elements = 0, bytes = 0;
};

/// Everything inspect reports, gathered once and printed as text or JSON.
struct Inspection {
  unsigned nodes = 0, nestedNodes = 0, graphs = 0;
  std::vector<std::pair<std::string, unsigned>> histogram; ///< sorted by count, then name
  std::map<DType, DTypeParams> params;
  uint64_t paramElements = 0, paramBytes = 0;
  unsigned initializers = 0;
  std::vector<OpRow> painting; ///< in histogram order
  unsigned allowNodes = 0, slotsAllow = 0;
};
} // namespace

static std::string parseArgs(llvm::ArrayRef<const char *> argv, InspectArgs &a) {
  ArgScanner s(argv);
  while (!s.done()) {
    std::string v;
    bool missing = false;
    if (s.value("--target", v, missing)) {
      if (missing)
        return "option '--target' needs a value";
      if (v == "fp16" || v == "f16" || v == "float16")
        a.amp.target = DType::F16;
      else if (v == "bf16" || v == "bfloat16")
        a.amp.target = DType::BF16;
      else
        return "--target must be fp16 or bf16, not " + quoteName(v);
      continue;
    }
    if (s.flag("--json")) {
      a.json = true;
      continue;
    }
    std::string err = s.positional(a.input, "input model");
    if (!err.empty())
      return err;
  }
  if (a.input.empty())
    return "no input model given";
  return "";
}

static std::string typeText(const Type &t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printType(t, os);
  return os.str();
}

static llvm::StringRef colorWord(SlotColor c) {
  return c == SlotColor::Allow ? "allow" : c == SlotColor::Deny ? "deny" : "keep";
}

/// "allow 12", "allow 2 partial", "keep 12 (infer op not between allow ops)".
static std::string groupText(const GroupKey &k, unsigned count) {
  std::string s = (colorWord(k.color) + " " + llvm::Twine(count)).str();
  if (k.partial)
    s += " partial";
  // Allow-list ops need no explanation; everything else says why.
  if (k.reason != AmpReason::AllowList)
    s += " (" + ampReasonText(k.reason).str() + ")";
  return s;
}

static Inspection inspect(Model &m, const AmpLists &lists, const AmpOptions &opts) {
  Inspection r;
  std::map<std::string, unsigned> hist;
  auto visit = [&](Graph &g) {
    ++r.graphs;
    for (const Node &n : g.nodes()) {
      ++hist[n.qualifiedOpType()];
      ++(&g == m.graph.get() ? r.nodes : r.nestedNodes);
    }
    for (const Value *v : g.initializers()) {
      const Tensor *t = v->initializer();
      if (!t)
        continue;
      DTypeParams &p = r.params[t->dtype];
      ++p.tensors;
      p.elements += static_cast<uint64_t>(t->numElements());
      p.bytes += t->byteSize();
      r.paramElements += static_cast<uint64_t>(t->numElements());
      r.paramBytes += t->byteSize();
      ++r.initializers;
    }
  };
  // The same graphs the painting colors: main, nested and training graphs.
  forEachGraph(*m.graph, visit);
  for (TrainingInfo &t : m.trainingInfo)
    for (Graph *g : {t.initialization.get(), t.algorithm.get()})
      if (g)
        forEachGraph(*g, visit);
  r.histogram.assign(hist.begin(), hist.end());
  std::stable_sort(r.histogram.begin(), r.histogram.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });

  SchemaOnlyCaps caps;
  AmpColoring coloring(m, lists, opts, caps);
  r.slotsAllow = coloring.numAllow();
  std::map<std::string, OpRow> rows;
  for (const NodeDecision &d : summarizeDecisions(coloring)) {
    OpRow &row = rows[d.opType.str()];
    ++row.count;
    ++row.groups[GroupKey{d.color, d.partial, d.reason}];
    r.allowNodes += d.color == SlotColor::Allow;
  }
  for (auto &[op, count] : r.histogram) {
    auto it = rows.find(op);
    if (it == rows.end())
      continue;
    it->second.op = op;
    r.painting.push_back(std::move(it->second));
  }
  return r;
}

static std::string opsetText(const OpsetId &o) {
  return (o.domain.empty() ? std::string("ai.onnx") : o.domain) + " " + std::to_string(o.version);
}

static void printText(llvm::raw_ostream &os, llvm::StringRef path, const Model &m,
                      const Inspection &r, const AmpOptions &opts) {
  const Graph &g = *m.graph;
  os << "model:      " << path << "\n";
  os << "ir version: " << m.irVersion << "\n";
  os << "producer:   " << (m.producerName.empty() ? "(none)" : escapeName(m.producerName));
  if (!m.producerVersion.empty())
    os << " " << escapeName(m.producerVersion);
  os << "\n";
  os << "opsets:     ";
  for (size_t i = 0; i < m.opsets.size(); ++i)
    os << (i ? ", " : "") << opsetText(m.opsets[i]);
  os << "\n";
  // Names and op types are the file's text: escaped (escapeName), so that
  // one holding a newline cannot add a line of its own.
  os << "graph:      " << escapeName(g.name) << "\n";
  if (m.isTraining())
    os << "training:   " << m.trainingInfo.size() << " training_info entries (not inspected)\n";

  size_t width = 0;
  for (const Value *v : g.inputs())
    width = std::max(width, escapeName(v->name()).size());
  for (const Value *v : g.outputs())
    width = std::max(width, escapeName(v->name()).size());
  os << "inputs (" << g.inputs().size() << "):\n";
  for (const Value *v : g.inputs())
    os << "  " << llvm::left_justify(escapeName(v->name()), width) << "  " << typeText(v->type)
       << (v->initializer() ? "  (with default)" : "") << "\n";
  os << "outputs (" << g.outputs().size() << "):\n";
  for (const Value *v : g.outputs())
    os << "  " << llvm::left_justify(escapeName(v->name()), width) << "  " << typeText(v->type)
       << "\n";

  os << "nodes:      " << r.nodes + r.nestedNodes;
  if (r.nestedNodes)
    os << " (" << r.nodes << " in the main graph, " << r.nestedNodes << " in " << r.graphs - 1
       << " nested or training graphs)";
  os << "\n";

  size_t opWidth = 2, countWidth = 1;
  for (auto &[op, count] : r.histogram) {
    opWidth = std::max(opWidth, escapeName(op).size());
    countWidth = std::max(countWidth, std::to_string(count).size());
  }
  os << "op histogram:\n";
  for (auto &[op, count] : r.histogram)
    os << "  " << llvm::left_justify(escapeName(op), opWidth) << "  "
       << llvm::right_justify(std::to_string(count), countWidth) << "\n";

  os << "parameters: " << r.paramElements << " in " << r.initializers << " initializers, "
     << r.paramBytes << " bytes\n";
  for (auto &[dtype, p] : r.params)
    os << "  " << llvm::left_justify(dtypeName(dtype), 5) << "  "
       << llvm::right_justify(std::to_string(p.elements), 10) << " elements  "
       << llvm::right_justify(std::to_string(p.bytes), 11) << " bytes  " << p.tensors
       << " initializers\n";

  os << "AMP painting (target " << dtypeName(opts.target) << ", level " << ampLevelName(opts.level)
     << (opts.keepIoTypes ? ", keep-io-types" : "") << ", backend any):\n";
  for (const OpRow &row : r.painting) {
    os << "  " << llvm::left_justify(escapeName(row.op), opWidth) << "  "
       << llvm::right_justify(std::to_string(row.count), countWidth) << "  ";
    bool first = true;
    for (auto &[key, count] : row.groups) {
      os << (first ? "" : ", ") << groupText(key, count);
      first = false;
    }
    os << "\n";
  }
  os << "would convert " << r.allowNodes << " of " << r.nodes + r.nestedNodes << " nodes ("
     << r.slotsAllow << " type slots) to " << (opts.target == DType::BF16 ? "bfloat16" : "float16")
     << "\n";
}

static void printJson(llvm::raw_ostream &os, llvm::StringRef path, const Model &m,
                      const Inspection &r, const AmpOptions &opts) {
  const Graph &g = *m.graph;
  llvm::json::Array opsets, inputs, outputs, hist, params, painting;
  for (const OpsetId &o : m.opsets)
    opsets.push_back(llvm::json::Object{{"domain", o.domain.empty() ? "ai.onnx" : o.domain},
                                        {"version", o.version}});
  for (const Value *v : g.inputs())
    inputs.push_back(llvm::json::Object{{"name", v->name().str()}, {"type", typeText(v->type)}});
  for (const Value *v : g.outputs())
    outputs.push_back(llvm::json::Object{{"name", v->name().str()}, {"type", typeText(v->type)}});
  for (auto &[op, count] : r.histogram)
    hist.push_back(llvm::json::Object{{"op", op}, {"count", count}});
  for (auto &[dtype, p] : r.params)
    params.push_back(llvm::json::Object{{"dtype", dtypeName(dtype)},
                                        {"initializers", p.tensors},
                                        {"elements", static_cast<int64_t>(p.elements)},
                                        {"bytes", static_cast<int64_t>(p.bytes)}});
  for (const OpRow &row : r.painting) {
    llvm::json::Array groups;
    for (auto &[key, count] : row.groups)
      groups.push_back(llvm::json::Object{{"color", colorWord(key.color)},
                                          {"partial", key.partial},
                                          {"reason", ampReasonText(key.reason)},
                                          {"count", count}});
    painting.push_back(
        llvm::json::Object{{"op", row.op}, {"count", row.count}, {"decisions", std::move(groups)}});
  }
  llvm::json::Object root{
      {"model", path},
      {"ir_version", m.irVersion},
      {"producer_name", m.producerName},
      {"producer_version", m.producerVersion},
      {"opsets", std::move(opsets)},
      {"graph", g.name},
      {"training", m.isTraining()},
      {"inputs", std::move(inputs)},
      {"outputs", std::move(outputs)},
      {"nodes", r.nodes + r.nestedNodes},
      {"main_graph_nodes", r.nodes},
      {"op_histogram", std::move(hist)},
      {"parameters", llvm::json::Object{{"elements", static_cast<int64_t>(r.paramElements)},
                                        {"bytes", static_cast<int64_t>(r.paramBytes)},
                                        {"initializers", r.initializers},
                                        {"by_dtype", std::move(params)}}},
      {"painting", llvm::json::Object{{"target", dtypeName(opts.target)},
                                      {"level", ampLevelName(opts.level)},
                                      {"keep_io_types", opts.keepIoTypes},
                                      {"backend", "any"},
                                      {"allow_nodes", r.allowNodes},
                                      {"allow_slots", r.slotsAllow},
                                      {"ops", std::move(painting)}}},
  };
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
}

int tool::runInspect(llvm::ArrayRef<const char *> argv, const char *const *envp) {
  if (wantsHelp(argv)) {
    llvm::outs() << kInspectUsage;
    return Ok;
  }
  InspectArgs a;
  if (llvm::Error err = applyEnvironment(a.amp, envp))
    return fail(std::move(err));
  std::string usage = parseArgs(argv, a);
  if (!usage.empty())
    return usageError("inspect", usage);

  AmpLists lists = AmpLists::defaults(a.amp.target);
  if (llvm::Error err = lists.apply(a.amp.edits, a.amp.level))
    return fail(std::move(err));
  if (!a.amp.denyNodesRegex.empty()) {
    std::string why;
    if (!llvm::Regex(a.amp.denyNodesRegex).isValid(why))
      return fail("MPC_AMP_DENY_NODES '" + a.amp.denyNodesRegex +
                  "' is not a valid regular expression: " + why);
  }

  auto modelOrErr = loadModel(a.input);
  if (!modelOrErr)
    return fail(modelOrErr.takeError());
  Model &m = **modelOrErr;
  if (llvm::Error err = verifyModel(m))
    return fail(llvm::Twine(a.input) + ": " + llvm::toString(std::move(err)));
  // The painting needs an element type per slot, as in the rewrite.
  inferTypes(m);
  Inspection r = inspect(m, lists, a.amp);
  if (a.json)
    printJson(llvm::outs(), a.input, m, r, a.amp);
  else
    printText(llvm::outs(), a.input, m, r, a.amp);
  return Ok;
}
