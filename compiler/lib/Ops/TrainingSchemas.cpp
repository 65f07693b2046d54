//===- TrainingSchemas.cpp - libonnx schemas of the ai.mpc.training ops ----===//
//
// Registers the gradient operators of docs/training.md ("Gradient operators",
// domain ai.mpc.training, version 1) with libonnx's OpSchemaRegistry, so the
// checker, strict shape inference and lookupSignature() know them. Called
// explicitly (registerTrainingSchemas), never from a global constructor.
//
//===----------------------------------------------------------------------===//
#include "SchemaRegistry.h"
#include "mpc/Ops/OpSignature.h"
#include "mpc/Ops/GemmBiasAct.h"
#include "mpc/Ops/OptimizerStep.h"
#include "onnx/defs/schema.h"
#include "onnx/defs/shape_inference.h"
#include "onnx/defs/tensor_proto_util.h"

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;

static const char *const kDomain = "ai.mpc.training";

const std::vector<std::string> &mpc::schemaFloatTypes() {
  static const std::vector<std::string> types = {"tensor(float16)", "tensor(float)",
                                                 "tensor(double)", "tensor(bfloat16)"};
  return types;
}

static const std::vector<std::string> &floatTypes() { return mpc::schemaFloatTypes(); }

void mpc::addVersion1Schemas(const char *domain, std::vector<OpSchema> schemas) {
  auto &ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
  if (!ranges.Map().count(domain))
    ranges.AddDomainToVersion(domain, 1, 1);
  for (OpSchema &s : schemas)
    if (!onnx::OpSchemaRegistry::Schema(s.Name(), 1, domain))
      onnx::RegisterSchema(std::move(s));
}

/// Output `out` takes the element type and (when known) shape of input `in`.
static void sameAs(InferenceContext &ctx, size_t in, size_t out) {
  if (ctx.getNumOutputs() <= out || ctx.getNumInputs() <= in)
    return;
  onnx::propagateElemTypeFromInputToOutput(ctx, in, out);
  if (onnx::hasInputShape(ctx, in))
    onnx::propagateShapeFromInputToOutput(ctx, in, out);
}

/// A schema with the domain, version and location filled in.
static OpSchema base(const char *name, int line) {
  OpSchema s;
  s.SetName(name).SetDomain(kDomain).SinceVersion(1).SetLocation(__FILE__, line);
  return s;
}

/// dY:T, <second>:T -> dX:T with dX shaped like input 1.
static OpSchema unaryGrad(const char *name, const char *second, const char *doc, int line) {
  OpSchema s = base(name, line);
  s.SetDoc(doc)
      .Input(0, "dY", "gradient of the forward output", "T")
      .Input(1, second, "forward input or output", "T")
      .Output(0, "dX", "gradient of the forward input", "T")
      .TypeConstraint("T", floatTypes(), "float types")
      .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
        if (onnx::hasInputShape(ctx, 1))
          onnx::propagateShapeFromInputToOutput(ctx, 1, 0);
        else if (onnx::hasInputShape(ctx, 0))
          onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
      });
  return s;
}

/// LSTMGrad and GRUGrad (X at input kX, W and R after it): dX, dW, dR shaped
/// like X, W, R; dB [dirs, 2 * R.dim(1)] (8H, 6H); the state gradients
/// [dirs, batch, H]. Every output is typed like X.
template <size_t kX> static void inferRecurrentGrad(InferenceContext &ctx) {
  const char *op = kX == 3 ? "LSTMGrad" : "GRUGrad";
  const size_t kW = kX + 1, kR = kX + 2;
  for (size_t i = 0; i < 3; ++i)
    sameAs(ctx, kX + i, i);
  for (size_t out = 3; out < ctx.getNumOutputs(); ++out)
    onnx::propagateElemTypeFromInputToOutput(ctx, kX, out);
  if (ctx.getNumOutputs() <= 3 || !onnx::hasInputShape(ctx, kX) ||
      !onnx::hasInputShape(ctx, kW) || !onnx::hasInputShape(ctx, kR))
    return;
  const auto &x = onnx::getInputShape(ctx, kX), &w = onnx::getInputShape(ctx, kW),
             &r = onnx::getInputShape(ctx, kR);
  if (x.dim_size() != 3 || w.dim_size() != 3 || r.dim_size() != 3)
    fail_shape_inference(op, ": X, W and R must have rank 3");
  auto *db = onnx::getOutputShape(ctx, 3);
  *db->add_dim() = w.dim(0);
  if (r.dim(1).has_dim_value())
    db->add_dim()->set_dim_value(2 * r.dim(1).dim_value());
  else
    db->add_dim();
  for (size_t out = 4; out < ctx.getNumOutputs(); ++out) {
    auto *shape = onnx::getOutputShape(ctx, out);
    *shape->add_dim() = w.dim(0);
    *shape->add_dim() = x.dim(1);
    *shape->add_dim() = r.dim(2);
  }
}

/// The attributes LSTMGrad and GRUGrad share with their forward op `op`.
static void recurrentAttrs(OpSchema &s, const std::string &op) {
  s.Attr("activation_alpha", "as " + op + " (unused by the default activations)",
         AttributeProto::FLOATS, false)
      .Attr("activation_beta", "as " + op + " (unused by the default activations)",
            AttributeProto::FLOATS, false)
      .Attr("clip", "as " + op + "; not supported", AttributeProto::FLOAT, false)
      .Attr("direction", "forward, reverse or bidirectional", AttributeProto::STRING,
            std::string("forward"))
      .Attr("hidden_size", "as " + op, AttributeProto::INT, false)
      .Attr("layout", "as " + op + "; only 0", AttributeProto::INT, static_cast<int64_t>(0));
}

/// Output 0: the element type of input 0, the shape held by input 1 when constant.
static void shapeFromInput1(InferenceContext &ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  const onnx::TensorProto *shape = ctx.getInputData(1);
  if (!shape)
    return;
  auto *out = onnx::getOutputShape(ctx, 0);
  for (int64_t d : onnx::ParseData<int64_t>(shape))
    out->add_dim()->set_dim_value(d);
}

/// dY:T, shape:int64[r], <index inputs from 2>:Tind -> dX:T shaped `shape`.
static OpSchema indexGrad(const char *name, const char *doc, int line) {
  OpSchema s = base(name, line);
  s.SetDoc(doc)
      .Input(0, "dY", "gradient of the forward output", "T")
      .Input(1, "shape", "shape of the forward data", "tensor(int64)")
      .Output(0, "dX", "gradient of the data, shaped `shape`", "T")
      .TypeConstraint("T", floatTypes(), "float types")
      .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "index types")
      .TypeAndShapeInferenceFunction(shapeFromInput1);
  return s;
}

static void convAttrs(OpSchema &s) {
  s.Attr("auto_pad", "as Conv", AttributeProto::STRING, std::string("NOTSET"))
      .Attr("dilations", "as Conv", AttributeProto::INTS, false)
      .Attr("group", "as Conv", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("kernel_shape", "as Conv", AttributeProto::INTS, false)
      .Attr("pads", "as Conv", AttributeProto::INTS, false)
      .Attr("strides", "as Conv", AttributeProto::INTS, false);
}

/// SGDStep, MomentumStep or AdamStep (mpc/Ops/OptimizerStep.h): param, grad
/// and states of T (f32 or f64), scalars of T, optional weight_decay and skip.
static OpSchema optimizerStep(const mpc::OptimizerStepLayout &l, const char *doc, int line) {
  OpSchema s = base(l.opType, line);
  s.SetDoc(doc)
      .Input(0, "param", "the parameter", "T")
      .Input(1, "grad", "its gradient, shaped like param", "T")
      .Output(0, "param_out", "the updated parameter", "T");
  int i = 2;
  for (const char *st : l.states) {
    s.Input(i++, st, "optimizer state, shaped like param", "T");
    s.Output(i - 2, std::string(st) + "_out", "the updated state", "T");
  }
  for (const char *sc : l.scalars)
    s.Input(i++, sc, "scalar hyper-parameter", "T");
  s.Input(i++, "weight_decay", "scalar; absent: no weight decay", "T", OpSchema::Optional)
      .Input(i++, "skip", "scalar; true or nonzero: every output equals its input",
             "B", OpSchema::Optional)
      .Output(int(l.copyOutput()), "param_copy",
              "the new param rounded to the copy_to type (nearest even, as Cast); with skip "
              "set, the input param rounded: the unchanged copy",
              "C", OpSchema::Optional)
      .Attr(mpc::kOptimizerCopyToAttr, "the data type of param_copy: float16 or bfloat16",
            AttributeProto::INT, false)
      .TypeConstraint("T", {"tensor(float)", "tensor(double)"}, "parameter types")
      .TypeConstraint("B", {"tensor(bool)", "tensor(float)"}, "skip flag types")
      .TypeConstraint("C", {"tensor(float16)", "tensor(bfloat16)"}, "weight copy types")
      .TypeAndShapeInferenceFunction([copy = l.copyOutput()](InferenceContext &ctx) {
        sameAs(ctx, 0, 0);
        for (size_t out = 1; out < ctx.getNumOutputs() && out < copy; ++out)
          sameAs(ctx, out + 1, out);
        if (ctx.getNumOutputs() <= copy)
          return;
        const AttributeProto *to = ctx.getAttribute(mpc::kOptimizerCopyToAttr);
        if (!to || (to->i() != onnx::TensorProto::FLOAT16 && to->i() != onnx::TensorProto::BFLOAT16))
          fail_type_inference("param_copy needs copy_to = float16 (10) or bfloat16 (16)");
        onnx::updateOutputElemType(ctx, copy, int32_t(to->i()));
        if (onnx::hasInputShape(ctx, 0))
          onnx::propagateShapeFromInputToOutput(ctx, 0, copy);
      });
  return s;
}

/// MultiTensorSGDStep, MultiTensorMomentumStep or MultiTensorAdamStep
/// (mpc/Ops/OptimizerStep.h): the kind's scalars, optional weight_decay and
/// skip, then N groups of (param, grad, states...) -> N groups of (param,
/// states...), each output typed and shaped like its group's param.
static OpSchema multiTensorStep(const mpc::OptimizerStepLayout &l, int line) {
  OpSchema s = base(l.multiOpType, line);
  s.SetDoc(std::string("the ") + l.opType + " update of N parameters in one node: the same "
           "scalars, weight decay and skip flag for every group of (param, grad, states); "
           "each group's results are those of " + l.opType + " on it");
  int i = 0;
  for (const char *sc : l.scalars)
    s.Input(i++, sc, "scalar hyper-parameter", "T");
  s.Input(i++, "weight_decay", "scalar; absent: no weight decay", "T", OpSchema::Optional)
      .Input(i++, "skip", "scalar; true or nonzero: every output equals its input", "B",
             OpSchema::Optional)
      .Input(i, "groups", "N groups of param, grad and the states, each shaped like its param",
             "T", OpSchema::Variadic, /*is_homogeneous=*/true, /*min_arity=*/int(l.groupInputs()))
      .Output(0, "outputs", "N groups of the new param and states", "T", OpSchema::Variadic,
              /*is_homogeneous=*/true, /*min_arity=*/int(l.groupOutputs()))
      .TypeConstraint("T", {"tensor(float)", "tensor(double)"}, "parameter types")
      .TypeConstraint("B", {"tensor(bool)", "tensor(float)"}, "skip flag types")
      .TypeAndShapeInferenceFunction([first = l.multiFirstGroup(), in = l.groupInputs(),
                                      out = l.groupOutputs(), op = l.multiOpType](
                                         InferenceContext &ctx) {
        size_t n = ctx.getNumInputs();
        if (n < first + in || (n - first) % in != 0)
          fail_shape_inference(op, ": ", n - std::min<size_t>(n, first),
                               " group input(s) are not whole groups of ", in);
        size_t groups = (n - first) / in;
        if (ctx.getNumOutputs() != groups * out)
          fail_shape_inference(op, ": ", groups, " group(s) need ", groups * out,
                               " outputs, not ", ctx.getNumOutputs());
        for (size_t g = 0; g < groups; ++g) {
          size_t param = first + g * in;
          // The param and then each state (inputs param+2...) in output order.
          for (size_t o = 0; o < out; ++o)
            sameAs(ctx, o == 0 ? param : param + 1 + o, g * out + o);
        }
      });
  return s;
}

/// MultiTensorUnscale: inv_scale, g_1..g_N -> found_inf, nonfinite[N],
/// u_1..u_N (docs/training.md, "Loss scaling").
static OpSchema multiTensorUnscaleSchema(int line) {
  OpSchema s = base("MultiTensorUnscale", line);
  s.SetDoc("loss-scaling unscale and overflow check of N gradients in one node: "
           "u_i = float(g_i) * inv_scale; nonfinite[i] = NaN where g_i holds an inf or NaN, "
           "else 0; found_inf = any of them")
      .Input(0, "inv_scale", "1 / loss scale, a float32 scalar", "tensor(float)")
      .Input(1, "gradients", "the scaled gradients", "T", OpSchema::Variadic,
             /*is_homogeneous=*/false, /*min_arity=*/1)
      .Output(0, "found_inf", "true when any gradient holds an inf or NaN", "tensor(bool)")
      .Output(1, "nonfinite", "one float32 entry per gradient: NaN where it holds an inf "
                              "or NaN, else 0",
              "tensor(float)")
      .Output(2, "unscaled", "the gradients widened to float32 times inv_scale",
              "tensor(float)", OpSchema::Variadic, /*is_homogeneous=*/true,
              /*min_arity=*/1)
      .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(bfloat16)"},
                      "gradient types")
      .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
        size_t grads = ctx.getNumInputs() - 1;
        if (ctx.getNumOutputs() != grads + 2)
          fail_shape_inference("MultiTensorUnscale: ", grads, " gradient(s) need ", grads + 2,
                               " outputs, not ", ctx.getNumOutputs());
        onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
        onnx::getOutputShape(ctx, 0);
        onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::FLOAT);
        onnx::getOutputShape(ctx, 1)->add_dim()->set_dim_value(int64_t(grads));
        for (size_t i = 0; i < grads; ++i) {
          onnx::updateOutputElemType(ctx, 2 + i, onnx::TensorProto::FLOAT);
          if (onnx::hasInputShape(ctx, 1 + i))
            onnx::propagateShapeFromInputToOutput(ctx, 1 + i, 2 + i);
        }
      });
  return s;
}

/// GemmBiasAct (mpc/Ops/GemmBiasAct.h): Y = act(op(A) @ op(B) + bias), Y
/// typed by `to` (absent: like A), shaped [A's batch..., M, N].
static OpSchema gemmBiasActSchema(int line) {
  OpSchema s = base(mpc::kGemmBiasActOp, line);
  s.SetDoc("fused GEMM epilogue: Y = act(op(A) @ op(B) + bias), fp32 accumulation, the "
           "bias optional; "
           "act is none, relu, gelu (erf form) or gelu_tanh; Y in the type `to` "
           "(a folded Cast) or A's")
      .Attr("transA", "A is stored transposed (2-D A only)", AttributeProto::INT,
            static_cast<int64_t>(0))
      .Attr("transB", "B is stored transposed ([N, K])", AttributeProto::INT,
            static_cast<int64_t>(0))
      .Attr("activation", "none, relu, gelu or gelu_tanh", AttributeProto::STRING,
            std::string("none"))
      .Attr("to", "element type of Y (absent: A's)", AttributeProto::INT, false)
      .Attr("bias_after_rounding",
            "1: the product is rounded to A's type before the bias is added (MatMul + Add)",
            AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("bias_grad_of",
            "with output bias_grad: 0 sums A (stored [K, M], transA = 1) over k, 1 sums B "
            "(stored [K, N], transB = 0) over k",
            AttributeProto::INT, false)
      .Input(0, "A", "[..., M, K], [K], or [K, M] with transA", "T")
      .Input(1, "B", "[K, N] (or [N, K] with transB)", "T")
      .Input(2, "bias", "[N], typed like A or like Y; absent: no bias", "TB",
             OpSchema::Optional)
      .Output(0, "Y", "[..., M, N]", "TY")
      .Output(1, "bias_grad", "[M] or [N]: the operand bias_grad_of names summed over k; "
              "typed like Y", "TY", OpSchema::Optional)
      .TypeConstraint("T", {"tensor(float16)", "tensor(float)", "tensor(bfloat16)"},
                      "operand types")
      .TypeConstraint("TB", {"tensor(float16)", "tensor(float)", "tensor(bfloat16)"},
                      "bias type")
      .TypeConstraint("TY", {"tensor(float16)", "tensor(float)", "tensor(bfloat16)"},
                      "output type")
      .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
        for (size_t out = 0; out < std::min<size_t>(ctx.getNumOutputs(), 2); ++out) {
          if (const AttributeProto *to = ctx.getAttribute("to"))
            onnx::updateOutputElemType(ctx, out, static_cast<int32_t>(to->i()));
          else
            onnx::propagateElemTypeFromInputToOutput(ctx, 0, out);
        }
        if (!onnx::hasInputShape(ctx, 0) || !onnx::hasInputShape(ctx, 1))
          return;
        auto flag = [&](const char *name) {
          const AttributeProto *a = ctx.getAttribute(name);
          return a && a->i() != 0;
        };
        int ra = onnx::getInputShape(ctx, 0).dim_size();
        if (ra < 1 || onnx::getInputShape(ctx, 1).dim_size() != 2)
          fail_shape_inference("GemmBiasAct: A needs rank 1 or more and B rank 2");
        if (flag("transA") && ra != 2)
          fail_shape_inference("GemmBiasAct: transA needs a 2-D A");
        // MatMul's rule (a 1-D A is a row vector whose axis is dropped).
        mpc::inferTransposedMatMulShape(ctx, "GemmBiasAct", flag("transA"), flag("transB"),
                                        false, false);
      });
  return s;
}

static std::vector<OpSchema> trainingSchemas() {
  std::vector<OpSchema> v;

  {
    OpSchema s = base("BiasGrad", __LINE__);
    s.SetDoc("dY summed over the axes along which `shape` was broadcast to dY, accumulated "
             "in fp32 (fp64 for double) and rounded once into dB's type: dY's, or float32 "
             "with `to` = 1 for a 16-bit dY (a folded widening Cast)")
        .Attr("to", "element type of dB: dY's (absent), or 1 (float32) for a 16-bit dY",
              AttributeProto::INT, false)
        .Input(0, "dY", "gradient of the broadcast result", "T")
        .Input(1, "shape", "shape of the operand before broadcasting", "tensor(int64)")
        // One type parameter, so the AMP painting converts dY and dB together;
        // not homogeneous, so a folded `to` may give dB float32 over a 16-bit dY
        // (the inference function checks the pair).
        .Output(0, "dB", "gradient of the operand, shaped `shape`: dY's type or `to`", "T",
                OpSchema::Single, /*is_homogeneous=*/false)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
          shapeFromInput1(ctx);
          const AttributeProto *to = ctx.getAttribute("to");
          if (!to)
            return;
          const onnx::TypeProto *dy = ctx.getInputType(0);
          int32_t in = dy && dy->has_tensor_type() ? dy->tensor_type().elem_type() : 0;
          int32_t want = static_cast<int32_t>(to->i());
          bool sixteen = in == onnx::TensorProto::FLOAT16 || in == onnx::TensorProto::BFLOAT16;
          if (in != 0 && want != in && !(sixteen && want == onnx::TensorProto::FLOAT))
            fail_type_inference("BiasGrad: to = ", want, " with dY of element type ", in,
                                ": `to` is dY's type, or 1 (float32) for a float16 or "
                                "bfloat16 dY");
          onnx::updateOutputElemType(ctx, 0, want);
        });
    v.push_back(std::move(s));
  }
  v.push_back(unaryGrad("ReluGrad", "X", "dY where X > 0, else 0", __LINE__));
  v.push_back(unaryGrad("SigmoidGrad", "Y", "dY*Y*(1-Y), Y the forward output", __LINE__));
  v.push_back(unaryGrad("TanhGrad", "Y", "dY*(1-Y^2), Y the forward output", __LINE__));
  v.push_back(unaryGrad("ErfGrad", "X", "dY*2/sqrt(pi)*exp(-X^2)", __LINE__));
  {
    OpSchema s = unaryGrad("GeluGrad", "X", "derivative of opset-20 Gelu", __LINE__);
    s.Attr("approximate", "none or tanh", AttributeProto::STRING, std::string("none"));
    v.push_back(std::move(s));
  }
  {
    OpSchema s = unaryGrad("SoftmaxGrad", "Y", "Y*(dY - sum_axis(dY*Y))", __LINE__);
    s.Attr("axis", "softmax axis", AttributeProto::INT, static_cast<int64_t>(-1));
    v.push_back(std::move(s));
  }
  {
    OpSchema s = unaryGrad("LogSoftmaxGrad", "Y", "dY - exp(Y)*sum_axis(dY)", __LINE__);
    s.Attr("axis", "log-softmax axis", AttributeProto::INT, static_cast<int64_t>(-1));
    v.push_back(std::move(s));
  }
  v.push_back(unaryGrad("GlobalAveragePoolGrad", "X",
                        "dY / spatial size, broadcast over X's spatial axes", __LINE__));
  {
    OpSchema s = unaryGrad("MaxPoolGrad", "X", "dY routed to the first maximum of each window",
                           __LINE__);
    s.Attr("auto_pad", "as MaxPool", AttributeProto::STRING, std::string("NOTSET"))
        .Attr("ceil_mode", "as MaxPool", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("dilations", "as MaxPool", AttributeProto::INTS, false)
        .Attr("kernel_shape", "as MaxPool", AttributeProto::INTS, true)
        .Attr("pads", "as MaxPool", AttributeProto::INTS, false)
        .Attr("storage_order", "as MaxPool", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("strides", "as MaxPool", AttributeProto::INTS, false);
    v.push_back(std::move(s));
  }
  {
    OpSchema s = unaryGrad("AveragePoolGrad", "X", "dY spread evenly over each window",
                           __LINE__);
    s.Attr("auto_pad", "as AveragePool", AttributeProto::STRING, std::string("NOTSET"))
        .Attr("ceil_mode", "as AveragePool", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("count_include_pad", "as AveragePool", AttributeProto::INT,
              static_cast<int64_t>(0))
        .Attr("dilations", "as AveragePool", AttributeProto::INTS, false)
        .Attr("kernel_shape", "as AveragePool", AttributeProto::INTS, true)
        .Attr("pads", "as AveragePool", AttributeProto::INTS, false)
        .Attr("strides", "as AveragePool", AttributeProto::INTS, false);
    v.push_back(std::move(s));
  }
  {
    OpSchema s = indexGrad("GatherGrad",
                           "gradient of Gather: dY scatter-added into zeros shaped `shape` "
                           "along `axis` (repeated indices add up; negative indices count "
                           "from the end)",
                           __LINE__);
    s.Attr("axis", "as Gather", AttributeProto::INT, static_cast<int64_t>(0))
        .Input(2, "indices", "forward indices", "Tind");
    v.push_back(std::move(s));
  }
  {
    OpSchema s = indexGrad("SliceGrad",
                           "gradient of Slice: dY placed where the forward Slice (same "
                           "starts, ends, axes and steps) read its input, zeros elsewhere",
                           __LINE__);
    s.Input(2, "starts", "as Slice", "Tind")
        .Input(3, "ends", "as Slice", "Tind")
        .Input(4, "axes", "as Slice", "Tind", OpSchema::Optional)
        .Input(5, "steps", "as Slice", "Tind", OpSchema::Optional);
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("LayerNormalizationGrad", __LINE__);
    s.SetDoc("gradient of opset-17 LayerNormalization from its saved Mean and InvStdDev")
        .Attr("axis", "first normalized axis", AttributeProto::INT, static_cast<int64_t>(-1))
        .Input(0, "dY", "gradient of Y", "T")
        .Input(1, "X", "forward input", "T")
        .Input(2, "Scale", "forward scale", "T")
        .Input(3, "Mean", "saved mean", "U")
        .Input(4, "InvStdDev", "saved inverse standard deviation", "U")
        .Output(0, "dX", "gradient of X", "T")
        .Output(1, "dScale", "gradient of Scale", "T", OpSchema::Optional)
        .Output(2, "dBias", "gradient of Bias", "T", OpSchema::Optional)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeConstraint("U", floatTypes(), "statistics types")
        .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
          sameAs(ctx, 1, 0);
          sameAs(ctx, 2, 1);
          sameAs(ctx, 2, 2);
        });
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("BatchNormalizationGrad", __LINE__);
    s.SetDoc("gradient of training-mode BatchNormalization (batch statistics of X)")
        .Attr("epsilon", "as BatchNormalization", AttributeProto::FLOAT, 1e-5f)
        .Input(0, "dY", "gradient of Y", "T")
        .Input(1, "X", "forward input", "T")
        .Input(2, "scale", "forward scale", "T1")
        .Output(0, "dX", "gradient of X", "T")
        .Output(1, "dScale", "gradient of scale", "T1", OpSchema::Optional)
        .Output(2, "dBias", "gradient of B", "T1", OpSchema::Optional)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeConstraint("T1", floatTypes(), "parameter types")
        .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
          sameAs(ctx, 1, 0);
          sameAs(ctx, 2, 1);
          sameAs(ctx, 2, 2);
        });
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("ConvGrad", __LINE__);
    s.SetDoc("gradient of Conv with the same attributes")
        .Input(0, "dY", "gradient of Y", "T")
        .Input(1, "X", "forward input", "T")
        .Input(2, "W", "forward weights", "T")
        .Output(0, "dX", "gradient of X", "T", OpSchema::Optional)
        .Output(1, "dW", "gradient of W", "T", OpSchema::Optional)
        .Output(2, "dB", "gradient of B", "T", OpSchema::Optional)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeAndShapeInferenceFunction([](InferenceContext &ctx) {
          sameAs(ctx, 1, 0);
          sameAs(ctx, 2, 1);
          if (ctx.getNumOutputs() <= 2)
            return;
          onnx::propagateElemTypeFromInputToOutput(ctx, 0, 2);
          if (!onnx::hasInputShape(ctx, 2))
            return;
          const auto &w = onnx::getInputShape(ctx, 2);
          if (w.dim_size() < 1)
            fail_shape_inference("ConvGrad: W must have rank >= 1");
          *onnx::getOutputShape(ctx, 2)->add_dim() = w.dim(0);
        });
    convAttrs(s);
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("LSTMGrad", __LINE__);
    recurrentAttrs(s, "LSTM");
    s.SetDoc("gradient of LSTM (sigmoid/tanh/tanh, no peepholes, layout 0) by "
             "backpropagation through time; the forward is recomputed from X, W, R, B and "
             "the initial states")
        .Attr("activations", "as LSTM; only Sigmoid, Tanh, Tanh", AttributeProto::STRINGS,
              false)
        .Attr("input_forget", "as LSTM; only 0", AttributeProto::INT, static_cast<int64_t>(0))
        .Input(0, "dY", "gradient of Y [seq, dirs, batch, H]", "T", OpSchema::Optional)
        .Input(1, "dY_h", "gradient of Y_h [dirs, batch, H]", "T", OpSchema::Optional)
        .Input(2, "dY_c", "gradient of Y_c [dirs, batch, H]", "T", OpSchema::Optional)
        .Input(3, "X", "forward input [seq, batch, input]", "T")
        .Input(4, "W", "forward input weights [dirs, 4H, input]", "T")
        .Input(5, "R", "forward recurrence weights [dirs, 4H, H]", "T")
        .Input(6, "B", "forward biases [dirs, 8H]", "T", OpSchema::Optional)
        .Input(7, "sequence_lens", "forward sequence lengths [batch]", "T1",
               OpSchema::Optional)
        .Input(8, "initial_h", "forward initial hidden state", "T", OpSchema::Optional)
        .Input(9, "initial_c", "forward initial cell state", "T", OpSchema::Optional)
        .Output(0, "dX", "gradient of X", "T", OpSchema::Optional)
        .Output(1, "dW", "gradient of W", "T", OpSchema::Optional)
        .Output(2, "dR", "gradient of R", "T", OpSchema::Optional)
        .Output(3, "dB", "gradient of B [dirs, 8H]", "T", OpSchema::Optional)
        .Output(4, "dinitial_h", "gradient of initial_h", "T", OpSchema::Optional)
        .Output(5, "dinitial_c", "gradient of initial_c", "T", OpSchema::Optional)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeConstraint("T1", {"tensor(int32)"}, "sequence length type")
        .TypeAndShapeInferenceFunction(inferRecurrentGrad<3>);
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("GRUGrad", __LINE__);
    recurrentAttrs(s, "GRU");
    s.SetDoc("gradient of GRU (sigmoid/tanh, layout 0, either linear_before_reset) by "
             "backpropagation through time; the forward is recomputed from X, W, R, B and "
             "the initial state")
        .Attr("activations", "as GRU; only Sigmoid, Tanh", AttributeProto::STRINGS, false)
        .Attr("linear_before_reset", "as GRU", AttributeProto::INT, static_cast<int64_t>(0))
        .Input(0, "dY", "gradient of Y [seq, dirs, batch, H]", "T", OpSchema::Optional)
        .Input(1, "dY_h", "gradient of Y_h [dirs, batch, H]", "T", OpSchema::Optional)
        .Input(2, "X", "forward input [seq, batch, input]", "T")
        .Input(3, "W", "forward input weights [dirs, 3H, input]", "T")
        .Input(4, "R", "forward recurrence weights [dirs, 3H, H]", "T")
        .Input(5, "B", "forward biases [dirs, 6H]", "T", OpSchema::Optional)
        .Input(6, "sequence_lens", "forward sequence lengths [batch]", "T1",
               OpSchema::Optional)
        .Input(7, "initial_h", "forward initial hidden state", "T", OpSchema::Optional)
        .Output(0, "dX", "gradient of X", "T", OpSchema::Optional)
        .Output(1, "dW", "gradient of W", "T", OpSchema::Optional)
        .Output(2, "dR", "gradient of R", "T", OpSchema::Optional)
        .Output(3, "dB", "gradient of B [dirs, 6H]", "T", OpSchema::Optional)
        .Output(4, "dinitial_h", "gradient of initial_h", "T", OpSchema::Optional)
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeConstraint("T1", {"tensor(int32)"}, "sequence length type")
        .TypeAndShapeInferenceFunction(inferRecurrentGrad<2>);
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("SoftmaxCrossEntropyLossGrad", __LINE__);
    s.SetDoc("gradient of SoftmaxCrossEntropyLoss (no weights) with respect to the scores")
        .Attr("reduction", "none, sum or mean", AttributeProto::STRING, std::string("mean"))
        .Attr("ignore_index", "label value that contributes nothing", AttributeProto::INT,
              false)
        .Input(0, "dLoss", "gradient of the loss", "T")
        .Input(1, "log_prob", "log-softmax of the scores", "T")
        .Input(2, "labels", "class labels", "Tind")
        .Output(0, "dScores", "gradient of the scores", "T")
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "label types")
        .TypeAndShapeInferenceFunction([](InferenceContext &ctx) { sameAs(ctx, 1, 0); });
    v.push_back(std::move(s));
  }
  {
    OpSchema s = base("MSELossGrad", __LINE__);
    s.SetDoc("dLoss*2*(pred-target)/N")
        .Attr("reduction", "none, sum or mean", AttributeProto::STRING, std::string("mean"))
        .Input(0, "dLoss", "gradient of the loss", "T")
        .Input(1, "pred", "predictions", "T")
        .Input(2, "target", "targets", "T")
        .Output(0, "dPred", "gradient of the predictions", "T")
        .TypeConstraint("T", floatTypes(), "float types")
        .TypeAndShapeInferenceFunction([](InferenceContext &ctx) { sameAs(ctx, 1, 0); });
    v.push_back(std::move(s));
  }
  {
    auto steps = mpc::optimizerStepLayouts();
    v.push_back(optimizerStep(steps[0], "fused SGD step: p - lr*(g + wd*p)", __LINE__));
    v.push_back(optimizerStep(steps[1], "fused momentum step: v' = momentum*v + (g + wd*p); "
                                        "p - lr*v'", __LINE__));
    v.push_back(optimizerStep(steps[2], "fused Adam step: m' = beta1*m + one_minus_beta1*g; "
                                        "v' = beta2*v + one_minus_beta2*g*g; p - lr*((m'/"
                                        "bias_correction1) / (sqrt(v'/bias_correction2) + "
                                        "epsilon)), g = grad + wd*p", __LINE__));
  }
  for (const mpc::OptimizerStepLayout &l : mpc::optimizerStepLayouts())
    v.push_back(multiTensorStep(l, __LINE__));
  v.push_back(multiTensorUnscaleSchema(__LINE__));
  v.push_back(gemmBiasActSchema(__LINE__));
  return v;
}

void mpc::registerTrainingSchemas() {
  // A function-local static: after the first call the check is one load
  // (std::call_once costs far more, and this runs once per signature lookup).
  static const bool registered = [] {
    mpc::addVersion1Schemas(kDomain, trainingSchemas());
    registerContribSchemas(); // onnxruntime's FusedMatMul and ConvGrad
    return true;
  }();
  (void)registered;
}
