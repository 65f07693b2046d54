//===- Rewrite.cpp - `mpc rewrite`: the AMP compiler pass ------------------===//
//
// Loads a model, checks it, paints and rewrites it, re-checks the result
// (mpc's verifier, and the ONNX checker with full type inference where
// libonnx knows the model's opsets), then writes it atomically beside the
// input. The input file is never written.
//
//===----------------------------------------------------------------------===//
#include "Dump.h"
#include "Tool.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Passes/Amp.h"
#include "mpc/Passes/GemmEpilogues.h"
#include "mpc/Passes/LossScaling.h"
#include "mpc/Passes/MultiTensorOptimizer.h"
#include "mpc/Passes/WeightCopy.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Cuda/CudaBackend.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Text/Text.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <chrono>
#include <cstring>

using namespace mpc;
using namespace mpc::tool;

static const char kRewriteUsage[] =
    R"(usage: mpc rewrite MODEL.onnx [options]

Rewrites MODEL to mixed precision: colors every type slot by the
allow/infer/deny/clear lists, propagates the colors, changes element types and
inserts the casts that keep the model type-correct. Prints the summary line.

options:
  -o, --output FILE        output model (default: MODEL.amp.onnx beside the input;
                           never the input itself)
  --target fp16|bf16       16-bit type to convert to (default fp16)
  --keep-io-types          graph inputs and outputs keep their types (default)
  --no-keep-io-types       float graph inputs/outputs may become 16-bit
  --allow OPS              add ops to the allow list (comma-separated; also
  --infer OPS              --infer, --deny, --clear); an op is `Conv` or a
  --deny OPS               domain-qualified `com.microsoft::FusedMatMul`
  --clear OPS
  --deny-nodes REGEX       paint nodes whose name matches deny (keep them fp32)
  --level LEVEL            TENSOR_CORES_ONLY | TREAT_INFER_AS_DENY | UNSAFE_FORCE_ALL
  --backend any|cpu|cuda   whose kernels the painting asks: a clear/infer node the
                           backend cannot run in 16 bits stays fp32 (default any:
                           the ONNX schemas only; cuda needs a build with the
                           CUDA backend and a usable GPU)
  --dump-dir DIR           write the graph before and after (ONNX, DOT, SVG) and
                           the effective lists to DIR
  --report FILE            write a JSON report of every decision
  -v, --verbose N          1: log casts and type changes; 2: also every decision
  --emit text              print the rewritten model in mpc's text form to
                           stdout instead of writing ONNX
  --verify-each            verify the model after every step
  --time                   print the time of each phase to stderr
  --strict-check           run libonnx's checker with strict type inference on the
                           output even above 5,000 nodes (mpc's verifier always runs)

training models (training_info with the docs/training.md metadata): the nodes
named in mpc.training.fp32_nodes stay fp32, and loss scaling is inserted
after the AMP rewrite (docs/training.md, "Loss scaling"):
  --loss-scale MODE        dynamic (default for fp16) | N (static scale N) |
                           none (no scaling; overflow check and skipped update
                           kept; default for bf16) | off (nothing inserted)
  --loss-scale-init S      initial dynamic scale (default 32768)
  --loss-scale-growth F    factor after INTERVAL clean steps (default 2)
  --loss-scale-backoff F   factor on overflow (default 0.5)
  --loss-scale-interval N  clean steps before growing (default 2000)
  --loss-scale-min S       lower clamp of the dynamic scale (default 1)
  --loss-scale-max S       upper clamp of the dynamic scale (default 16777216)
  --fused-unscale          unscale and check every gradient in one
                           ai.mpc.training MultiTensorUnscale node (one
                           multi-tensor kernel on CUDA) instead of a Cast, Mul
                           and check per gradient; scaled modes only
  --optimizer-weight-copy  each parameter updated by a fused optimizer step
                           (train-graph --fused-optimizer) and cast to the
                           16-bit type gets a persistent 16-bit copy that the
                           step writes in the same pass; the forward reads it
                           instead of casting the master weight every step
  --multi-tensor-optimizer the fused optimizer steps of one kind that share
                           their scalars and skip flag become one
                           MultiTensorSGDStep/MomentumStep/AdamStep node (one
                           launch on CUDA); steps with a weight copy stay
                           per-parameter; runs after the options above

GEMM epilogues (docs/user-guide.md, "GEMM epilogues"; after the AMP rewrite):
  --fuse-gemm-epilogues    fold each MatMul/Gemm with a 2-D B and what
                           follows it (a bias Add, a Relu or Gelu, a Cast;
                           a weight gradient's Cast to float32 and its
                           layer's BiasGrad) into one ai.mpc.training
                           GemmBiasAct node (cuBLASLt epilogues on CUDA)
                           where no value inside the chain has another
                           reader

environment (flags override):
  MPC_AMP_{ALLOW,INFER,DENY,CLEAR}LIST_{ADD,REMOVE}, MPC_AMP_LEVEL,
  MPC_AMP_LOG_PATH (like --dump-dir), MPC_AMP_VERBOSE, MPC_AMP_TARGET,
  MPC_AMP_KEEP_IO_TYPES, MPC_AMP_DENY_NODES, MPC_AMP_LOSS_SCALE (like
  --loss-scale), MPC_AMP_LOSS_SCALE_{INIT,GROWTH,BACKOFF,INTERVAL,MIN,MAX}.
  Unknown MPC_* variables are errors.

exit status: 0 success, 1 bad input (one line on stderr, no output written),
2 bad usage.
)";

namespace {
struct RewriteArgs {
  std::string input, output, dumpDir, report, emit;
  /// --backend: "any" (schema only), "cpu" or "cuda".
  std::string backend = "any";
  bool verifyEach = false;
  bool time = false;
  bool strictCheck = false;
  /// --optimizer-weight-copy (docs/training.md, "The 16-bit weight copy").
  bool weightCopy = false;
  bool multiTensorOptimizer = false;
  bool fuseGemmEpilogues = false;
  AmpOptions amp;
  /// A bad --loss-scale* value: reported as a bad-input error (exit 1), like
  /// the matching MPC_AMP_LOSS_SCALE* variable.
  std::string lossScaleError;
};
} // namespace

/// Parses flags on top of the environment; returns a usage message on error.
static std::string parseArgs(llvm::ArrayRef<const char *> argv, RewriteArgs &a) {
  ArgScanner s(argv);
  static const char *kListFlags[] = {"--allow", "--infer", "--deny", "--clear"};
  while (!s.done()) {
    std::string v;
    bool missing = false;
    llvm::StringRef cur = s.peek();
    if (s.value("-o", v, missing) || s.value("--output", v, missing)) {
      a.output = v;
    } else if (s.value("--target", v, missing)) {
      if (v == "fp16" || v == "f16" || v == "float16")
        a.amp.target = DType::F16;
      else if (v == "bf16" || v == "bfloat16")
        a.amp.target = DType::BF16;
      else if (!missing)
        return "--target must be fp16 or bf16, not " + quoteName(v);
    } else if (s.flag("--keep-io-types")) {
      a.amp.keepIoTypes = true;
    } else if (s.flag("--no-keep-io-types")) {
      a.amp.keepIoTypes = false;
    } else if (s.value("--deny-nodes", v, missing)) {
      a.amp.denyNodesRegex = v;
    } else if (s.value("--level", v, missing)) {
      if (v == "TENSOR_CORES_ONLY")
        a.amp.level = AmpLevel::TensorCoresOnly;
      else if (v == "TREAT_INFER_AS_DENY")
        a.amp.level = AmpLevel::TreatInferAsDeny;
      else if (v == "UNSAFE_FORCE_ALL")
        a.amp.level = AmpLevel::UnsafeForceAll;
      else if (v == "DEFAULT")
        a.amp.level = AmpLevel::Default;
      else if (!missing)
        return "--level must be TENSOR_CORES_ONLY, TREAT_INFER_AS_DENY or UNSAFE_FORCE_ALL";
    } else if (s.value("--backend", v, missing)) {
      if (v != "any" && v != "cpu" && v != "cuda" && !missing)
        return "--backend must be any, cpu or cuda, not " + quoteName(v);
      a.backend = v;
    } else if (s.value("--dump-dir", v, missing)) {
      a.dumpDir = v;
    } else if (s.value("--report", v, missing)) {
      a.report = v;
    } else if (s.value("--emit", v, missing)) {
      if (v != "text" && !missing)
        return "--emit takes 'text'";
      a.emit = v;
    } else if (s.value("-v", v, missing) || s.value("--verbose", v, missing)) {
      if (v != "0" && v != "1" && v != "2" && !missing)
        return "--verbose takes 0, 1 or 2";
      if (!missing)
        a.amp.verbose = static_cast<unsigned>(v[0] - '0');
    } else if (s.value("--loss-scale", v, missing)) {
      if (!missing)
        if (llvm::Error err = parseLossScaleMode(v, "--loss-scale", a.amp.lossScale))
          a.lossScaleError = llvm::toString(std::move(err));
    } else if (cur.startswith("--loss-scale-") &&
               llvm::is_contained(llvm::ArrayRef<llvm::StringRef>{"init", "growth", "backoff",
                                                                  "interval", "min", "max"},
                                  cur.drop_front(strlen("--loss-scale-")).split('=').first)) {
      std::string flag = cur.split('=').first.str();
      s.value(flag, v, missing);
      if (!missing)
        if (llvm::Error err = parseLossScaleSetting(flag.substr(strlen("--loss-scale-")), v,
                                                    flag, a.amp.lossScale))
          a.lossScaleError = llvm::toString(std::move(err));
    } else if (s.flag("--fused-unscale")) {
      a.amp.lossScale.fusedUnscale = true;
    } else if (s.flag("--optimizer-weight-copy")) {
      a.weightCopy = true;
    } else if (s.flag("--multi-tensor-optimizer")) {
      a.multiTensorOptimizer = true;
    } else if (s.flag("--fuse-gemm-epilogues")) {
      a.fuseGemmEpilogues = true;
    } else if (s.flag("--verify-each")) {
      a.verifyEach = true;
    } else if (s.flag("--time")) {
      a.time = true;
    } else if (s.flag("--strict-check")) {
      a.strictCheck = true;
    } else {
      bool matched = false;
      for (unsigned c = 0; c < kNumAmpLists && !matched; ++c)
        if (s.value(kListFlags[c], v, missing)) {
          matched = true;
          for (std::string &op : splitOpList(v)) {
            if (llvm::Error err = checkListedOp(kListFlags[c], op))
              return llvm::toString(std::move(err));
            a.amp.edits.add[c].push_back(op);
          }
        }
      if (!matched) {
        std::string err = s.positional(a.input, "input model");
        if (!err.empty())
          return err;
        continue;
      }
    }
    if (missing)
      return "option " + quoteName(cur) + " needs a value";
  }
  if (a.input.empty())
    return "no input model given";
  if (!a.emit.empty() && !a.output.empty())
    return "--emit text prints the model instead of writing it: not with -o";
  return "";
}

/// MODEL.onnx -> MODEL.amp.onnx in the same folder.
static std::string defaultOutput(llvm::StringRef input) {
  llvm::SmallString<256> out(input);
  llvm::StringRef ext = llvm::sys::path::extension(input);
  llvm::sys::path::replace_extension(out, ".amp" + (ext.empty() ? ".onnx" : ext.str()));
  return std::string(out);
}

/// Models up to this many nodes are also checked by libonnx's checker with
/// strict type inference (above it, that check dominates the run time:
/// --strict-check forces it; mpc's verifier checks every model).
constexpr unsigned kStrictCheckNodeLimit = 5000;

/// The external data file written beside `output`: OUTPUT.data.
static std::string externalDataPath(llvm::StringRef output) { return (output + ".data").str(); }

static bool anyExternal(const Model &m) {
  for (const Value *v : m.graph->initializers())
    if (v->initializer()->isExternal())
      return true;
  return false;
}

int tool::runRewrite(llvm::ArrayRef<const char *> argv, const char *const *envp) {
  if (wantsHelp(argv)) {
    llvm::outs() << kRewriteUsage;
    return Ok;
  }
  RewriteArgs a;
  if (llvm::Error err = applyEnvironment(a.amp, envp))
    return fail(std::move(err));
  a.dumpDir = a.amp.logPath;
  std::string usage = parseArgs(argv, a);
  if (!usage.empty())
    return usageError("rewrite", usage);
  if (!a.lossScaleError.empty())
    return fail(a.lossScaleError);
  if (llvm::Error err = checkLossScaleOptions(a.amp.lossScale))
    return fail(std::move(err));

  // The capabilities the painting asks (docs/user-guide.md, "Target backend").
  SchemaOnlyCaps schemaOnly;
  std::unique_ptr<Backend> target;
  if (a.backend == "cpu") {
    target = std::make_unique<CpuBackend>();
  } else if (a.backend == "cuda") {
    if (!cudaBackendBuilt())
      return fail("--backend cuda: this build has no CUDA backend to say which ops run in "
                  "16 bits there; rewrite with --backend any (the ONNX schemas only) or "
                  "--backend cpu");
    auto b = loadCudaBackend(CudaBackendOptions(), "--backend");
    if (!b)
      return fail(b.takeError());
    // Its capabilities are the CUDA kernel table's; the rewrite is for a GPU
    // that is usable here, as `mpc run --device cuda` will need.
    if (llvm::Error err = (*b)->checkAvailable())
      return fail(inputError("--backend cuda: {0}", llvm::toString(std::move(err))));
    target = std::move(*b);
  }
  const BackendCaps &caps = target ? target->caps() : schemaOnly;

  if (a.output.empty() && a.emit.empty())
    a.output = defaultOutput(a.input);
  FilePlan files;
  files.read(a.input, "input model");
  files.write(a.output, "output");
  files.write(a.report, "report");
  files.writeFolder(a.dumpDir, "dump folder");
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  if (!a.output.empty())
    if (llvm::Error err = checkOutputPath(a.output))
      return fail(std::move(err));
  if (!a.dumpDir.empty() && !llvm::sys::fs::is_directory(a.dumpDir))
    return fail("dump folder " + quoteName(a.dumpDir) + " does not exist");
  if (!a.report.empty()) {
    llvm::SmallString<256> dir(a.report);
    llvm::sys::path::remove_filename(dir);
    if (!dir.empty() && !llvm::sys::fs::is_directory(dir))
      return fail("report folder " + quoteName(dir) + " does not exist");
  }

  // Phase timer for --time (the rewrite benchmark reads these lines).
  auto last = std::chrono::steady_clock::now();
  auto phase = [&](const char *name) {
    auto now = std::chrono::steady_clock::now();
    if (a.time)
      llvm::errs() << llvm::formatv("mpc: time: {0,-8} {1,8:f3} s\n", name,
                                    std::chrono::duration<double>(now - last).count());
    last = now;
  };
  auto modelOrErr = loadModel(a.input);
  if (!modelOrErr)
    return fail(modelOrErr.takeError());
  Model &m = **modelOrErr;
  if (llvm::Error err = verifyModel(m))
    return fail(llvm::Twine(a.input) + ": " + llvm::toString(std::move(err)));
  DumpTarget dump;
  if (!a.dumpDir.empty()) {
    dump.dir = a.dumpDir;
    dump.stamp = llvm::sys::path::stem(a.input).str();
    for (const std::string &f : dumpFiles(dump, m))
      files.write(f, "dump file");
  }
  // The weights beside the input are read until the output is written.
  bool hadExternal = anyExternal(m);
  files.readExternalData(m, a.input);
  if (hadExternal && !a.output.empty())
    files.write(externalDataPath(a.output), "output's external data");
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  files.removeStaleTemporaries();
  phase("load");

  llvm::Error dumpErr = llvm::Error::success();
  // Training models: the loss subgraph and the optimizer stay fp32, and loss
  // scaling follows the AMP rewrite when the model carries the metadata.
  std::string noLossScaling;
  if (m.isTraining()) {
    a.amp.fp32Nodes = trainingFp32Nodes(m);
    noLossScaling = lossScalingUnsupportedReason(m);
  }
  if (a.amp.lossScale.fusedUnscale && (!m.isTraining() || !noLossScaling.empty()))
    return fail("--fused-unscale: no loss scaling can be inserted into " + quoteName(a.input) +
                ": " + (m.isTraining() ? noLossScaling : std::string("not a training model")));
  if (a.weightCopy && !m.isTraining())
    return fail("--optimizer-weight-copy: " + quoteName(a.input) +
                " is not a training model (the copies are written by its fused optimizer "
                "steps)");
  if (a.multiTensorOptimizer && !m.isTraining())
    return fail("--multi-tensor-optimizer: " + quoteName(a.input) +
                " is not a training model (it has no optimizer steps to merge)");
  if (a.multiTensorOptimizer)
    if (llvm::Error err = checkHasFusedOptimizerSteps(m))
      return fail(std::move(err));
  if (a.weightCopy && m.findMetadata(trainkeys::kWeightCopies))
    return fail("--optimizer-weight-copy: " + quoteName(a.input) + " carries weight copies "
                "already (" + trainkeys::kWeightCopies + ")");
  AmpRunOptions ro;
  ro.amp = a.amp;
  ro.verifyEach = a.verifyEach;
  ro.summarize = !a.report.empty() || !dump.dir.empty(); // their only readers
  if (!dump.dir.empty())
    ro.afterColoring = [&](const Model &, const AmpColoring &c, const AmpLists &lists) {
      AmpDecisions d = summarizeDecisions(c);
      if (llvm::Error err = dumpGraph(dump, "before", m, d))
        dumpErr = std::move(err);
      else if (llvm::Error err2 = dumpLists(dump, m, lists, a.amp))
        dumpErr = std::move(err2);
    };
  // The passes' summary lines and warnings, printed once the rewritten model
  // has passed its checks: a rewrite that fails prints its one error line only.
  std::vector<std::pair<bool, std::string>> deferred; // (a warning, the text)
  auto later = [&](bool warning, std::string text) {
    deferred.emplace_back(warning, std::move(text));
  };
  llvm::Expected<AmpResult> res = runAmpRewrite(m, ro, caps, &llvm::errs());
  if (!res) {
    llvm::consumeError(std::move(dumpErr));
    return fail(res.takeError());
  }
  if (dumpErr)
    return fail(std::move(dumpErr));
  if (m.isTraining()) {
    if (!noLossScaling.empty()) {
      if (effectiveLossScaleMode(a.amp.lossScale, a.amp.target) != LossScaleMode::Off)
        later(true, "training model: no loss scaling inserted: " + noLossScaling);
    } else {
      llvm::Expected<LossScalingResult> ls = insertLossScaling(m, a.amp.lossScale, a.amp.target);
      if (!ls)
        return fail(ls.takeError());
      if (a.amp.verbose >= 1)
        for (const std::string &line : ls->log)
          llvm::errs() << line << "\n";
      if (a.amp.verbose >= 2)
        for (const std::string &line : ls->detailLog)
          llvm::errs() << line << "\n";
      later(false, ls->summaryLine());
      if (ls->status == LossScalingResult::Status::Inserted &&
          ls->mode == LossScaleMode::Dynamic && a.amp.lossScale.min < 1)
        later(true, llvm::formatv("loss-scale min {0} lets the scale fall below 1 (gradients "
                                  "are then scaled down)",
                                  a.amp.lossScale.min)
                        .str());
      if (llvm::Error err = verifyModel(m))
        return fail(llvm::Twine("internal error: the model does not verify after loss "
                                "scaling: ") +
                    llvm::toString(std::move(err)));
    }
  }
  if (a.weightCopy) {
    llvm::Expected<WeightCopyResult> wc = insertOptimizerWeightCopies(m, a.amp.target);
    if (!wc)
      return fail(wc.takeError());
    if (a.amp.verbose >= 1)
      for (const std::string &line : wc->log)
        llvm::errs() << line << "\n";
    later(false, wc->summaryLine());
    if (llvm::Error err = verifyModel(m))
      return fail(llvm::Twine("internal error: the model does not verify after the weight "
                              "copies: ") +
                  llvm::toString(std::move(err)));
  }
  if (a.multiTensorOptimizer) {
    llvm::Expected<MultiTensorOptimizerResult> mt = mergeOptimizerSteps(m);
    if (!mt)
      return fail(mt.takeError());
    if (a.amp.verbose >= 1)
      for (const std::string &line : mt->log)
        llvm::errs() << line << "\n";
    later(false, mt->summaryLine());
    if (llvm::Error err = verifyModel(m))
      return fail(llvm::Twine("internal error: the model does not verify after merging the "
                              "optimizer steps: ") +
                  llvm::toString(std::move(err)));
  }
  if (a.fuseGemmEpilogues) {
    GemmEpilogueResult fused = fuseGemmEpilogues(m);
    if (a.amp.verbose >= 1)
      for (const std::string &line : fused.decisions)
        llvm::errs() << line << "\n";
    later(false, fused.summaryLine());
    if (llvm::Error err = verifyModel(m))
      return fail(llvm::Twine("internal error: the model does not verify after fusing GEMM "
                              "epilogues: ") +
                  llvm::toString(std::move(err)));
  }
  phase("rewrite");
  if (m.graph->size() <= kStrictCheckNodeLimit || a.strictCheck)
    if (llvm::Error err = checkWithOnnx(m, a.input, "rewritten model", /*typeInference=*/true))
      return fail(std::move(err));
  phase("check");
  // The rewrite succeeded: the summaries, before the output (--emit text
  // prints the model after them).
  for (const auto &[warning, text] : deferred) {
    if (warning)
      warn(text);
    else
      llvm::errs() << text << "\n";
  }

  if (!a.emit.empty()) {
    printModel(m, llvm::outs());
  } else {
    ExportOptions eo;
    if (hadExternal)
      eo.externalDataFile = llvm::sys::path::filename(externalDataPath(a.output)).str();
    if (llvm::Error err = writeOnnxFile(m, a.output, eo))
      return fail(std::move(err));
  }
  phase("write");
  if (!dump.dir.empty())
    if (llvm::Error err = dumpGraph(dump, "after", m, res->decisions))
      return fail(std::move(err));
  if (!a.report.empty())
    if (llvm::Error err = writeReport(a.report, m, *res, a.amp))
      return fail(std::move(err));

  // The process ends now: skip tearing down a possibly huge model (except
  // under LeakSanitizer, which would report the model as a leak).
  if (!kLeakChecked)
    (void)modelOrErr->release();
  for (const std::string &note : res->notes)
    warn(note);
  (a.emit.empty() ? llvm::outs() : llvm::errs()) << res->summaryLine(a.amp.target) << "\n";
  return Ok;
}
