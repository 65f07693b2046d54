//===- Ops.cpp - `mpc ops`: the op support matrix ---------------------------===//
//
// One row per op known to the AMP default lists or the CPU kernel table:
// the AMP class (f16 defaults; the bf16 class where it differs) with the
// list's reason, the dtypes the CPU kernel rows accept for input 0 with
// their opset ranges, and the CUDA kernel (there is no CUDA backend yet, so
// always "none"). Rows are sorted by op name; the output is deterministic.
// docs/gen_ops.py reads `mpc ops --json` to generate docs/ops.md.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/IR/DType.h"
#include "mpc/Passes/AmpLists.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::tool;

static const char kOpsUsage[] =
    R"(usage: mpc ops [--json]

Prints one row per op known to the AMP default lists or the CPU kernel
table: the AMP class (allow/infer/deny/clear/unlisted) of the f16 defaults
with the list's reason (for an unlisted op: why it is on no list), the CPU
kernel's input dtypes and opset range, and
the CUDA kernel ("none": there is no CUDA backend yet). Sorted by op.

options:
  --json    print a JSON array of objects instead of a table
  --help    show this help
)";

namespace {
struct CpuRow {
  int64_t minOpset, maxOpset;
  std::vector<std::string> dtypes;
};

struct OpRow {
  std::string op;     ///< "domain::Op" for non-default domains, else "Op"
  std::string domain; ///< "" for the default domain
  std::string opType;
  AmpClass f16 = AmpClass::Unlisted, bf16 = AmpClass::Unlisted;
  std::string reason; ///< reason of the f16 entry, or why it is unlisted
  std::vector<CpuRow> cpu;
};
} // namespace

static std::vector<std::string> dtypeNames(DTypeSet set) {
  std::vector<std::string> names;
  for (unsigned t = 0; t <= kMaxDType && t < 32; ++t)
    if (set & (DTypeSet(1) << t))
      names.push_back(dtypeName(DType(t)).str());
  return names;
}

static std::string join(const std::vector<std::string> &v, llvm::StringRef sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i)
      s += sep.str();
    s += v[i];
  }
  return s;
}

static std::string opsetRange(const CpuRow &r) {
  if (r.maxOpset >= 1000)
    return std::to_string(r.minOpset) + "+";
  if (r.minOpset == r.maxOpset)
    return std::to_string(r.minOpset);
  return std::to_string(r.minOpset) + "-" + std::to_string(r.maxOpset);
}

static std::string cpuText(const OpRow &r) {
  if (r.cpu.empty())
    return "none";
  std::vector<std::string> parts;
  for (const CpuRow &c : r.cpu)
    parts.push_back(join(c.dtypes, ",") + " (opset " + opsetRange(c) + ")");
  return join(parts, "; ");
}

static std::vector<OpRow> collectRows() {
  std::map<std::string, OpRow> rows;
  auto rowFor = [&](llvm::StringRef domain, llvm::StringRef opType) -> OpRow & {
    std::string dom = domain == "ai.onnx" ? "" : domain.str();
    std::string key = dom.empty() ? opType.str() : dom + "::" + opType.str();
    OpRow &r = rows[key];
    if (r.op.empty()) {
      r.op = key;
      r.domain = dom;
      r.opType = opType.str();
    }
    return r;
  };

  AmpLists f16 = AmpLists::defaults(DType::F16);
  AmpLists bf16 = AmpLists::defaults(DType::BF16);
  for (AmpLists *lists : {&f16, &bf16})
    for (AmpClass c : {AmpClass::Allow, AmpClass::Infer, AmpClass::Deny, AmpClass::Clear})
      for (const std::string &q : lists->entries(c)) {
        llvm::StringRef qs(q);
        size_t sep = qs.rfind("::");
        if (sep == llvm::StringRef::npos)
          rowFor("", qs);
        else
          rowFor(qs.substr(0, sep), qs.substr(sep + 2));
      }

  for (const CpuKernel &k : cpuKernelTable())
    rowFor(k.domain ? k.domain : "", k.opType)
        .cpu.push_back({k.minOpset, k.maxOpset, dtypeNames(k.dtypes)});
  // Ops the executor runs itself, in dynamic mode, on every backend
  // (runtime/lib/ControlFlow.cpp and SequenceOps.cpp), for every stored type:
  // control flow, sequences and optionals (registry rows without a shape
  // function).
  for (const OpDef &d : opRegistry())
    if (d.runByExecutor())
      rowFor(d.domain, d.opType)
          .cpu.push_back({d.minOpset, d.maxOpset, {"executor (all types)"}});

  std::vector<OpRow> out;
  for (auto &kv : rows) {
    OpRow r = kv.second;
    r.f16 = f16.classify(r.domain, r.opType);
    r.bf16 = bf16.classify(r.domain, r.opType);
    r.reason = f16.reason(r.op).str();
    if (r.reason.empty())
      r.reason = bf16.reason(r.op).str();
    if (r.reason.empty())
      r.reason = ampUnlistedReason(r.op).str();
    std::sort(r.cpu.begin(), r.cpu.end(), [](const CpuRow &a, const CpuRow &b) {
      return a.minOpset < b.minOpset;
    });
    out.push_back(std::move(r));
  }
  return out; // std::map: sorted by op
}

int tool::runOps(llvm::ArrayRef<const char *> args, const char *const *envp) {
  (void)envp;
  bool json = false;
  for (llvm::StringRef a : args) {
    if (a == "--help" || a == "-h") {
      llvm::outs() << kOpsUsage;
      return Ok;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    return usageError("ops", "unknown argument " + quoteName(a));
  }

  std::vector<OpRow> rows = collectRows();
  if (json) {
    llvm::json::Array arr;
    for (const OpRow &r : rows) {
      llvm::json::Array cpu;
      for (const CpuRow &c : r.cpu) {
        llvm::json::Array dts;
        for (const std::string &d : c.dtypes)
          dts.push_back(d);
        cpu.push_back(llvm::json::Object{{"min_opset", c.minOpset},
                                         {"max_opset", c.maxOpset},
                                         {"dtypes", std::move(dts)}});
      }
      arr.push_back(llvm::json::Object{
          {"op", r.op},
          {"domain", r.domain},
          {"op_type", r.opType},
          {"amp_class", ampClassName(r.f16).str()},
          {"amp_class_bf16", ampClassName(r.bf16).str()},
          {"amp_reason", r.reason},
          {"cpu_kernels", std::move(cpu)},
          {"cpu", cpuText(r)},
          {"cuda", "none"},
      });
    }
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(arr))) << "\n";
    return Ok;
  }

  size_t opW = 2, ampW = 3, cpuW = 3;
  std::vector<std::string> ampTexts;
  for (const OpRow &r : rows) {
    std::string amp = ampClassName(r.f16).str();
    if (r.bf16 != r.f16)
      amp += " (bf16: " + ampClassName(r.bf16).str() + ")";
    ampTexts.push_back(amp);
    opW = std::max(opW, r.op.size());
    ampW = std::max(ampW, amp.size());
    cpuW = std::max(cpuW, cpuText(r).size());
  }
  auto pad = [](const std::string &s, size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };
  llvm::outs() << pad("op", opW) << "  " << pad("amp", ampW) << "  " << pad("cpu", cpuW)
               << "  cuda  reason\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpRow &r = rows[i];
    llvm::outs() << pad(r.op, opW) << "  " << pad(ampTexts[i], ampW) << "  "
                 << pad(cpuText(r), cpuW) << "  none  " << r.reason << "\n";
  }
  return Ok;
}
