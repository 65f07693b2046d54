//===- OnnxCheck.cpp - libonnx's checker on what a subcommand writes ------===//
//
// `mpc rewrite` and `mpc train-graph` run libonnx's checker on the model they
// are about to write. A failure there is mpc's fault only when the input model
// passes the same check: the input is checked again (only on failure) so that
// a model that was already invalid is reported as bad input, not as an
// internal error.
//
//===----------------------------------------------------------------------===//
#include "Tool.h"
#include "mpc/IO/Onnx.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Support/Diagnostics.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"
#include "onnx/shape_inference/implementation.h"
#include <algorithm>

using namespace mpc;

/// True for a list attribute with no elements (`axes = []`): valid ONNX,
/// which libonnx 1.12's checker refuses ("Attribute 'axes' is expected to
/// have field 'ints'"; later releases accept it).
static bool isEmptyList(const Attribute &a) {
  switch (a.kind) {
  case AttrKind::Floats:
    return a.floats.empty();
  case AttrKind::Ints:
    return a.ints.empty();
  case AttrKind::Strings:
    return a.strings.empty();
  case AttrKind::Tensors:
    return a.tensors.empty();
  case AttrKind::Graphs:
    return a.graphs.empty();
  case AttrKind::SparseTensors:
  case AttrKind::TypeProtos:
    return a.opaque.empty();
  default:
    return false;
  }
}

/// True when libonnx (1.12: default domain up to opset 17, IR up to 8) knows
/// every opset the model imports and its checker judges every node, so that
/// its checker can judge the model.
static bool libonnxKnows(Model &m) {
  if (m.irVersion > 8)
    return false;
  for (const OpsetId &o : m.opsets) {
    int64_t known = newestKnownOpset(o.domain);
    if (known >= 0 && o.version > known)
      return false;
  }
  bool emptyList = false;
  forEachGraph(*m.graph, [&](Graph &g) {
    for (const Node &n : g.nodes())
      emptyList = emptyList || llvm::any_of(n.attrs, isEmptyList);
  });
  return !emptyList;
}

/// The checker's message for `m`, empty when it passes.
static llvm::Expected<std::string> checkerMessage(Model &m, bool typeInference) {
  onnx::ModelProto proto;
  if (llvm::Error err = exportOnnx(m, proto))
    return std::move(err);
  // External tensors were inlined by exportOnnx; the checker reads no files.
  try {
    onnx::checker::check_model(proto);
    if (typeInference) {
      // The checker's full mode: strict type inference over the whole model.
      onnx::ShapeInferenceOptions opts{/*check_type=*/true, /*error_mode=*/1,
                                       /*enable_data_propagation=*/false};
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
    }
  } catch (const std::bad_alloc &) {
    throw; // out of memory is not a verdict on the model (main reports it)
  } catch (const std::exception &e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    return what.empty() ? std::string("(no message)") : what;
  }
  return std::string();
}

llvm::Error tool::checkWithOnnx(Model &m, llvm::StringRef inputPath, llvm::StringRef what,
                                bool typeInference) {
  registerTrainingSchemas();
  if (!libonnxKnows(m))
    return llvm::Error::success();
  llvm::Expected<std::string> out = checkerMessage(m, typeInference);
  if (!out)
    return out.takeError();
  if (out->empty())
    return llvm::Error::success();
  // Blame the input when it fails the same check.
  if (llvm::Expected<std::unique_ptr<Model>> in = loadModel(inputPath)) {
    if (libonnxKnows(**in)) {
      llvm::Expected<std::string> inMsg = checkerMessage(**in, typeInference);
      if (!inMsg)
        llvm::consumeError(inMsg.takeError());
      else if (!inMsg->empty())
        return inputError("{0}: the input model fails the ONNX checker: {1}", inputPath, *inMsg);
    }
  } else {
    llvm::consumeError(in.takeError());
  }
  return inputError("internal error: the {0} fails the ONNX checker: {1}", what, *out);
}
