//===- ContribSchemas.cpp - libonnx schemas of onnxruntime contrib ops -----===//
//
// Registers the com.microsoft ops that mpc runs (FusedMatMul, ConvGrad;
// runtime/cpu/ContribKernels.cpp) with libonnx's OpSchemaRegistry, as
// onnxruntime declares them, so type inference ties their outputs to their
// inputs (an fp16 FusedMatMul yields fp16), the verifier checks them and
// strict shape inference knows them. Other com.microsoft ops stay unknown.
// Called from registerTrainingSchemas(), never from a global constructor.
//
//===----------------------------------------------------------------------===//
#include "SchemaRegistry.h"
#include "mpc/Ops/OpSignature.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;
using onnx::TensorShapeProto;

static const char *const kDomain = "com.microsoft";

static const std::vector<std::string> &floatTypes() { return mpc::schemaFloatTypes(); }

/// The shape of op(X) for a FusedMatMul operand: transBatch moves axis 0
/// behind the batch axes (rank >= 3), trans swaps the last two axes; a vector
/// is left as it is.
static TensorShapeProto fusedOperandShape(const TensorShapeProto &x, bool trans, bool transBatch) {
  int r = x.dim_size();
  if (r < 2)
    return x;
  TensorShapeProto s;
  for (int i = transBatch ? 1 : 0; i < (transBatch ? r - 1 : r - 2); ++i)
    *s.add_dim() = x.dim(i);
  const auto &rows = x.dim(transBatch ? 0 : r - 2), &cols = x.dim(r - 1);
  *s.add_dim() = trans ? cols : rows;
  *s.add_dim() = trans ? rows : cols;
  return s;
}

void mpc::inferTransposedMatMulShape(InferenceContext &ctx, const char *op, bool transA,
                                     bool transB, bool transBatchA, bool transBatchB) {
  if (!onnx::hasInputShape(ctx, 0) || !onnx::hasInputShape(ctx, 1))
    return;
  const TensorShapeProto &a0 = onnx::getInputShape(ctx, 0), &b0 = onnx::getInputShape(ctx, 1);
  if (a0.dim_size() == 0 || b0.dim_size() == 0)
    fail_shape_inference(op, ": A and B must have rank 1 or more");
  TensorShapeProto a = fusedOperandShape(a0, transA, transBatchA);
  TensorShapeProto b = fusedOperandShape(b0, transB, transBatchB);
  int ra = a.dim_size(), rb = b.dim_size();
  const auto &ka = a.dim(ra - 1), &kb = b.dim(rb == 1 ? 0 : rb - 2);
  if (ka.has_dim_value() && kb.has_dim_value() && ka.dim_value() != kb.dim_value())
    fail_shape_inference(op, ": op(A) and op(B) do not multiply");
  TensorShapeProto batchA, batchB, y;
  for (int i = 0; i + 2 < ra; ++i)
    *batchA.add_dim() = a.dim(i);
  for (int i = 0; i + 2 < rb; ++i)
    *batchB.add_dim() = b.dim(i);
  onnx::bidirectionalBroadcastShapeInference(batchA, batchB, y);
  if (ra > 1)
    *y.add_dim() = a.dim(ra - 2);
  if (rb > 1)
    *y.add_dim() = b.dim(rb - 1);
  *onnx::getOutputShape(ctx, 0) = y;
}

/// Y: A's type, MatMul's rule on op(A) and op(B).
static void inferFusedMatMul(InferenceContext &ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  auto flag = [&](const char *name) {
    const AttributeProto *a = ctx.getAttribute(name);
    return a && a->i() != 0;
  };
  mpc::inferTransposedMatMulShape(ctx, "FusedMatMul", flag("transA"), flag("transB"),
                                  flag("transBatchA"), flag("transBatchB"));
}

/// ConvGrad: dX like X, dW like W, dB [W's dim 0]; all typed like dY.
static void inferConvGrad(InferenceContext &ctx) {
  for (size_t out = 0; out < ctx.getNumOutputs() && out < 3; ++out) {
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, out);
    if (out < 2 && onnx::hasInputShape(ctx, out + 1))
      onnx::propagateShapeFromInputToOutput(ctx, out + 1, out);
  }
  if (ctx.getNumOutputs() < 3 || !onnx::hasInputShape(ctx, 2))
    return;
  const TensorShapeProto &w = onnx::getInputShape(ctx, 2);
  if (w.dim_size() < 1)
    fail_shape_inference("ConvGrad: W must have rank 1 or more");
  *onnx::getOutputShape(ctx, 2)->add_dim() = w.dim(0);
}

static std::vector<OpSchema> contribSchemas() {
  std::vector<OpSchema> v;
  {
    OpSchema s;
    s.SetName("FusedMatMul").SetDomain(kDomain).SinceVersion(1).SetLocation(__FILE__, __LINE__);
    s.SetDoc("Y = alpha * op(A) @ op(B) with MatMul's batch broadcasting (onnxruntime)")
        .Attr("alpha", "scale of the product", AttributeProto::FLOAT, 1.0f)
        .Attr("transA", "swap the last two axes of A", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("transB", "swap the last two axes of B", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("transBatchA", "move axis 0 of A behind its batch axes", AttributeProto::INT,
              static_cast<int64_t>(0))
        .Attr("transBatchB", "move axis 0 of B behind its batch axes", AttributeProto::INT,
              static_cast<int64_t>(0))
        .Input(0, "A", "left operand", "T")
        .Input(1, "B", "right operand", "T")
        .Output(0, "Y", "the scaled product", "T")
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeAndShapeInferenceFunction(inferFusedMatMul);
    v.push_back(std::move(s));
  }
  {
    OpSchema s;
    s.SetName("ConvGrad").SetDomain(kDomain).SinceVersion(1).SetLocation(__FILE__, __LINE__);
    // onnxruntime leaves the attributes unchecked; they are Conv's.
    s.SetDoc("gradient of Conv with Conv's attributes (onnxruntime training)")
        .AllowUncheckedAttributes()
        .Input(0, "dY", "gradient of Y", "T")
        .Input(1, "X", "forward input", "T")
        .Input(2, "W", "forward weights", "T")
        .Output(0, "dX", "gradient of X", "T", OpSchema::Optional)
        .Output(1, "dW", "gradient of W", "T", OpSchema::Optional)
        .Output(2, "dB", "gradient of B", "T", OpSchema::Optional)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeAndShapeInferenceFunction(inferConvGrad);
    v.push_back(std::move(s));
  }
  return v;
}

void mpc::registerContribSchemas() {
  static const bool registered = [] {
    mpc::addVersion1Schemas(kDomain, contribSchemas());
    return true;
  }();
  (void)registered;
}
