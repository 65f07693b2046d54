//===- EinsumOps.cpp - Einsum nodes on CUDA ---------------------------------===//
//
// The equation is parsed once (shapes::einsumPlan, the CPU kernel's parse)
// and lowered by planEinsum (EinsumPlan.h): one operand is one gather into
// the output; two operands are gathered into dense [batch, m, k] and
// [batch, k, n] operands in the workspace, multiplied by one strided-batch
// cuBLASLt product into an fp32 D (LtProduct.h; the operands keep the
// storage type unless a gather sums a label, which widens both to fp32 so
// the sum is rounded once), and D is gathered into the output. An equation
// the planner refuses, or a product with no contracted elements, gives a
// null op: the node runs on the CPU.
//
//===----------------------------------------------------------------------===//
#include "../ops/ShapeHelpers.h"
#include "CudaOp.h"
#include "EinsumLaunch.h"
#include "LtProduct.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cuda/EinsumPlan.h"
#include "mpc/Runtime/OpParams.h"
#include "mpc/Support/Diagnostics.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class EinsumOp final : public CudaOp {
public:
  EinsumLowering plan;
  /// The product operands' type: the storage type or f32.
  DType operandType = DType::F32;
  LtProduct product;
  size_t aBytes = 0, bBytes = 0, dBytes = 0;

  size_t workspaceBytes() const override {
    return plan.product ? aBytes + bBytes + dBytes + product.workspace : 0;
  }

  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    int32_t type = int32_t(call.inputs[0].dtype);
    auto gather = [&](int32_t from, int32_t to, const void *src, void *dst,
                      const EinsumGather &g) {
      return launchEinsumGather(from, to, src, dst, g, ctx.geometry(g.count()), s);
    };
    if (!plan.product)
      return launchText(gather(type, type, call.inputs[0].data, call.outputs[0].data, plan.a));
    char *ws = static_cast<char *>(call.workspace);
    char *a = ws, *b = ws + aBytes, *d = b + bBytes, *scratch = d + dBytes;
    int32_t op = int32_t(operandType);
    if (cudaError_t e = gather(type, op, call.inputs[0].data, a, plan.a))
      return launchText(e);
    if (cudaError_t e = gather(type, op, call.inputs[1].data, b, plan.b))
      return launchText(e);
    std::string why = product.run(ctx, a, b, reinterpret_cast<float *>(d),
                                  unsigned(runtimeElementSize(operandType)), scratch,
                                  product.workspace, s);
    if (!why.empty())
      return why;
    return launchText(gather(int32_t(DType::F32), type, d, call.outputs[0].data, plan.out));
  }
};

} // namespace

CudaOpOrError cuda::prepareEinsumOp(const Node &n, const CudaKernel &,
                                    llvm::ArrayRef<TensorDesc> inputs, const CudaContext &ctx) {
  auto params = paramsOf<EinsumParams>(parseEinsum(n));
  if (!params)
    return params.takeError();
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorDesc &t : inputs)
    shapes.emplace_back(t.shape.begin(), t.shape.end());
  auto parsed = shapes::einsumPlan(n, params->equation, shapes);
  if (!parsed)
    return parsed.takeError();
  auto lowered = planEinsum(parsed->operands, parsed->output, parsed->sizes);
  if (!lowered) {
    llvm::consumeError(lowered.takeError()); // not planned: the CPU runs it
    return std::unique_ptr<CudaOp>();
  }
  auto op = std::make_unique<EinsumOp>();
  op->plan = *lowered;
  if (!op->plan.product)
    return std::unique_ptr<CudaOp>(std::move(op));
  const EinsumLowering &p = op->plan;
  if (p.out.count() == 0) { // nothing to write
    op->plan.product = false;
    op->plan.a = p.out;
    return std::unique_ptr<CudaOp>(std::move(op));
  }
  if (p.k == 0)
    return std::unique_ptr<CudaOp>();
  DType t = inputs[0].dtype;
  op->operandType = p.a.sumRank || p.b.sumRank ? DType::F32 : t;
  size_t eb = runtimeElementSize(op->operandType);
  op->aBytes = alignedBytes(size_t(p.batch * p.m * p.k) * eb);
  op->bBytes = alignedBytes(size_t(p.batch * p.k * p.n) * eb);
  op->dBytes = alignedBytes(size_t(p.batch * p.m * p.n) * sizeof(float));
  std::vector<int64_t> aShape = {p.batch, p.m, p.k}, bShape = {p.batch, p.k, p.n};
  MatmulProblem problem;
  problem.aShape = aShape;
  problem.bShape = bShape;
  problem.elementBytes = unsigned(eb);
  auto mm = planMatmul(problem);
  if (!mm)
    return inputError("{0}: {1}", describeNode(n), llvm::toString(mm.takeError()));
  std::string why = op->product.prepare(mm->gemm, op->operandType, ctx);
  if (!why.empty())
    return inputError("{0}: {1}", describeNode(n), why);
  return std::unique_ptr<CudaOp>(std::move(op));
}
