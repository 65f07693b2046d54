//===- TrainGraph.cpp - `mpc train-graph`: build a training model ----------===//
//
// Loads an inference model, adds the training step (forward copy, loss,
// backward, optimizer update) as training_info[0] following docs/training.md,
// checks the result (mpc's verifier and the ONNX checker) and writes it
// atomically. The input file is never written; on error nothing is written.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Support/Diagnostics.h"
#include "mpc/Verify/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <cmath>

using namespace mpc;
using namespace mpc::tool;

static const char kTrainGraphUsage[] =
    R"(usage: mpc train-graph MODEL.onnx --loss LOSS [options] -o TRAIN.onnx
       mpc train-graph TRAINING.onnx -o LOWERED.onnx

Builds a training model (docs/training.md): training_info[0].algorithm holds
one training step (forward copy with BatchNormalization in training mode,
loss, reverse-mode gradients, optimizer update), update_binding maps every
updated initializer to its new value, metadata_props describe the pieces.

options:
  -o, --output FILE        output model (required; never the input itself)
  --loss cross-entropy     SoftmaxCrossEntropyLoss(mean) on the first output
                           (the input of a final Softmax is taken as the logits);
                           int64 labels [N]
  --class-axis 1|-1        cross-entropy on logits of rank 3 or more: the
                           classes are on axis 1 ([N, C, d...], ONNX's layout,
                           the default) or the last ([N, d..., C], a language
                           model's [N, T, C]; the default after a Softmax over
                           the last axis); labels are [N, d...]
  --loss mse               mean squared error against float labels shaped like
                           the first output
  --loss OUTPUT            the named scalar float model output is the loss
  --labels NAME            the labels input (default "labels")
  --optimizer sgd|momentum|adam   (default sgd)
  --lr X                   learning rate (default 0.01)
  --momentum X             momentum factor (default 0.9)
  --beta1 X --beta2 X --epsilon X  Adam (defaults 0.9, 0.999, 1e-8)
  --weight-decay X         L2 weight decay added to the gradient (default 0)
  --loss-weight X          multiply the loss by X > 0 (a multi-task weight or a
                           normalizer; default 1)
  --freeze REGEX           float initializers whose name matches are not trained
                           (masks holding inf/NaN, Clip bounds and BatchNorm running
                           statistics never are; the output lists what is trained)
  --expose-gradients       add every gradient as an algorithm-graph output
  --verbose                also say what the best-effort shape inference could
                           not do (values left without a rank, ...)
  --fused-optimizer        one ai.mpc.training SGDStep/MomentumStep/AdamStep
                           node per parameter (float or double) instead of
                           the element-wise update nodes; the same results bit
                           for bit (opt-in until measured on a GPU)
  --bn-variance biased|unbiased
                           BatchNormalization's running variance takes the
                           biased batch variance (ONNX, default) or the
                           unbiased one, times n/(n-1) (PyTorch)

A training model whose algorithm uses ai.onnx.preview.training::Gradient is
written with those ops lowered to gradient nodes (--loss and the optimizer
options are not needed then).

exit status: 0 success, 1 bad input (one line on stderr, no output written),
2 bad usage.
)";

namespace {
struct TrainGraphArgs {
  std::string input, output;
  bool lossGiven = false;
  bool verbose = false;
  TrainGraphOptions opts;
};
} // namespace

static bool parseFloat(const std::string &s, float &out) {
  double d;
  if (llvm::StringRef(s).getAsDouble(d) || !std::isfinite(d))
    return false;
  out = static_cast<float>(d);
  return true;
}

/// Parses flags; returns a usage message on error.
static std::string parseArgs(llvm::ArrayRef<const char *> argv, TrainGraphArgs &a) {
  ArgScanner s(argv);
  struct NumFlag {
    const char *flag;
    float *dst;
  };
  const NumFlag nums[] = {{"--lr", &a.opts.lr},
                          {"--momentum", &a.opts.momentum},
                          {"--beta1", &a.opts.beta1},
                          {"--beta2", &a.opts.beta2},
                          {"--epsilon", &a.opts.epsilon},
                          {"--weight-decay", &a.opts.weightDecay}};
  while (!s.done()) {
    std::string v;
    bool missing = false;
    llvm::StringRef cur = s.peek();
    if (s.value("-o", v, missing) || s.value("--output", v, missing)) {
      a.output = v;
    } else if (s.value("--loss", v, missing)) {
      a.lossGiven = !missing;
      if (v == "cross-entropy") {
        a.opts.loss = LossKind::CrossEntropy;
      } else if (v == "mse") {
        a.opts.loss = LossKind::Mse;
      } else {
        a.opts.loss = LossKind::Output;
        a.opts.lossOutput = v;
      }
    } else if (s.value("--labels", v, missing)) {
      if (!missing && v.empty())
        return "--labels needs a name";
      a.opts.labels = v;
    } else if (s.value("--optimizer", v, missing)) {
      if (v == "sgd")
        a.opts.optimizer = OptimizerKind::Sgd;
      else if (v == "momentum")
        a.opts.optimizer = OptimizerKind::Momentum;
      else if (v == "adam")
        a.opts.optimizer = OptimizerKind::Adam;
      else if (!missing)
        return "--optimizer must be sgd, momentum or adam, not " + quoteName(v);
    } else if (s.value("--freeze", v, missing)) {
      a.opts.freezeRegex = v;
    } else if (s.value("--class-axis", v, missing)) {
      if (v == "1" || v == "-1")
        a.opts.classAxis = v == "1" ? 1 : -1;
      else if (!missing)
        return "--class-axis must be 1 or -1, not " + quoteName(v);
    } else if (s.value("--bn-variance", v, missing)) {
      if (v == "unbiased" || v == "biased")
        a.opts.bnUnbiasedVariance = v == "unbiased";
      else if (!missing)
        return "--bn-variance must be biased or unbiased, not " + quoteName(v);
    } else if (s.flag("--expose-gradients")) {
      a.opts.exposeGradients = true;
    } else if (s.flag("--verbose")) {
      a.verbose = true;
    } else if (s.flag("--fused-optimizer")) {
      a.opts.fusedOptimizer = true;
    } else if (s.value("--loss-weight", v, missing)) {
      float w = 0;
      if (!missing && (!parseFloat(v, w) || !(w > 0)))
        return "--loss-weight needs a positive finite number, not " + quoteName(v);
      a.opts.lossWeight = w;
    } else {
      bool matched = false;
      for (const NumFlag &n : nums)
        if (!matched && s.value(n.flag, v, missing)) {
          matched = true;
          if (!missing && !parseFloat(v, *n.dst))
            return std::string(n.flag) + " needs a finite number, not " + quoteName(v);
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
  if (a.output.empty())
    return "-o is required";
  return "";
}

/// Which float initializers are trained, and why the others are not
/// (grouped by reason, in order of first appearance).
static void printInitializerSummary(const TrainGraphResult &res) {
  auto list = [](llvm::ArrayRef<std::string> names) {
    std::string s;
    for (const std::string &n : names)
      s += (s.empty() ? "" : ", ") + quoteName(n);
    return s;
  };
  if (!res.untied.empty()) {
    llvm::outs() << "train-graph: untied (initializers the exporter merged):";
    for (size_t i = 0; i < res.untied.size(); ++i)
      llvm::outs() << (i ? ", " : " ") << res.untied[i];
    llvm::outs() << "\n";
  }
  llvm::outs() << "train-graph: trained: " << list(res.trained) << "\n";
  if (res.notTrained.empty())
    return;
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto &[name, why] : res.notTrained) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&, &why = why](const auto &g) { return g.first == why; });
    if (it == groups.end())
      it = groups.insert(groups.end(), {why, {}});
    it->second.push_back(name);
  }
  llvm::outs() << "train-graph: not trained:";
  for (size_t i = 0; i < groups.size(); ++i)
    llvm::outs() << (i ? "; " : " ") << list(groups[i].second) << " (" << groups[i].first
                 << ")";
  llvm::outs() << "\n";
}

int tool::runTrainGraph(llvm::ArrayRef<const char *> argv, const char *const *) {
  if (wantsHelp(argv)) {
    llvm::outs() << kTrainGraphUsage;
    return Ok;
  }
  TrainGraphArgs a;
  std::string usage = parseArgs(argv, a);
  if (!usage.empty())
    return usageError("train-graph", usage);
  FilePlan files;
  files.read(a.input, "input model");
  files.write(a.output, "output");
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  if (llvm::Error err = checkOutputPath(a.output))
    return fail(std::move(err));

  auto modelOrErr = loadModel(a.input);
  if (!modelOrErr)
    return fail(modelOrErr.takeError());
  Model &m = **modelOrErr;
  files.readExternalData(m, a.input);
  if (llvm::Error err = files.check())
    return fail(std::move(err));
  files.removeStaleTemporaries();
  if (llvm::Error err = verifyModel(m))
    return fail(llvm::Twine(a.input) + ": " + llvm::toString(std::move(err)));
  // A training model whose algorithm uses the standard Gradient op: lower it.
  if (m.isTraining()) {
    llvm::Expected<unsigned> lowered = lowerGradientOps(m);
    if (!lowered)
      return fail(llvm::Twine(a.input) + ": " + llvm::toString(lowered.takeError()));
    if (*lowered) {
      if (llvm::Error err = verifyModel(m))
        return fail("internal error: the lowered model fails mpc's verifier: " +
                    llvm::toString(std::move(err)));
      if (llvm::Error err = checkWithOnnx(m, a.input, "lowered model", false))
        return fail(std::move(err));
      if (llvm::Error err = writeOnnxFile(m, a.output))
        return fail(std::move(err));
      llvm::outs() << "train-graph: lowered " << *lowered << " Gradient op(s) -> " << a.output
                   << "\n";
      return Ok;
    }
  }
  if (!a.lossGiven)
    return usageError("train-graph",
                      "--loss is required (cross-entropy, mse or the name of a scalar output)");
  std::vector<std::string> details;
  if (a.verbose)
    a.opts.details = &details;
  // The training model is written as IR 7 at least (training_info's version),
  // which would make valid an older input the checker refuses (an IR 3 model
  // with an initializer that is no graph input): such an input is checked,
  // and blamed, as it is.
  if (m.irVersion < 7)
    if (llvm::Error err = checkWithOnnx(m, a.input, "input model", false))
      return fail(std::move(err));
  llvm::Expected<TrainGraphResult> res = buildTrainingGraph(m, a.opts);
  // Said first, also when building fails: they may explain the failure.
  for (const std::string &line : details)
    llvm::outs() << "train-graph: " << line << "\n";
  if (!res)
    return fail(llvm::Twine(a.input) + ": " + llvm::toString(res.takeError()));
  if (llvm::Error err = verifyModel(m))
    return fail("internal error: the training model fails mpc's verifier: " +
                llvm::toString(std::move(err)));
  if (llvm::Error err = checkWithOnnx(m, a.input, "training model", false))
    return fail(std::move(err));
  for (const std::string &note : res->notes)
    llvm::errs() << "mpc: note: " << note << "\n";
  if (llvm::Error err = writeOnnxFile(m, a.output))
    return fail(std::move(err));
  llvm::outs() << "train-graph: " << res->numParameters << " parameter(s) trained, "
               << res->numGradientNodes << " gradient node(s), optimizer "
               << describeOptimizer(a.opts) << " -> " << a.output << "\n";
  printInitializerSummary(*res);
  return Ok;
}
