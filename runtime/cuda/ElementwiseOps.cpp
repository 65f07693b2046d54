//===- ElementwiseOps.cpp - Unary, binary and cast nodes on CUDA ------------===//
//
// The element-wise family: the functor bytes of the node's body (makeOpBlob:
// the registry's parse and the makeOp the CPU loops use), the broadcast plan of a binary node,
// the target type of a cast; launch queues one grid-stride kernel.
//
//===----------------------------------------------------------------------===//
#include "CudaLaunch.h"
#include "CudaOp.h"
#include "DataLaunch.h"
#include "mpc/IR/Graph.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"

using namespace mpc;
using namespace mpc::cuda;

namespace {

class UnaryOp final : public CudaOp {
public:
  UnaryOp(UnaryOpId op, OpBlob functor) : op(op), functor(functor) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    return launchText(launchUnary(op, functor, int32_t(x.dtype), x.data, call.outputs[0].data,
                                  x.numElements(), ctx.geometry(x.numElements()), s));
  }

private:
  UnaryOpId op;
  OpBlob functor;
};

class BinaryOp final : public CudaOp {
public:
  BinaryOp(BinaryOpId op, OpBlob functor, kernels::BroadcastPlan plan)
      : op(op), functor(functor), plan(std::move(plan)) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &a = call.inputs[0];
    return launchText(launchBinary(op, functor, int32_t(a.dtype), a.data, call.inputs[1].data,
                                   call.outputs[0].data, plan, ctx.geometry(plan.numElements),
                                   s));
  }

private:
  BinaryOpId op;
  OpBlob functor;
  kernels::BroadcastPlan plan;
};

/// Max or Min of one or of three to kMaxNaryInputs operands: one kernel
/// folding the binary body over every operand per output element, so no
/// operand is read after the output (which may share its buffer) is written.
class VariadicOp final : public CudaOp {
public:
  VariadicOp(BinaryOpId op, OpBlob functor, const kernels::NaryPlan &plan)
      : op(op), functor(functor), plan(plan) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    if (plan.numElements == 0)
      return "";
    return launchText(launchVariadic(op, functor, int32_t(call.inputs[0].dtype),
                                     naryInputsOf(call, plan),
                                     call.outputs[0].data, plan,
                                     ctx.geometry(plan.numElements), s));
  }

private:
  BinaryOpId op;
  OpBlob functor;
  kernels::NaryPlan plan;
};

class CastOp final : public CudaOp {
public:
  explicit CastOp(int32_t to) : to(to) {}
  std::string launch(const KernelCall &call, cudaStream_t s,
                     const CudaContext &ctx) const override {
    const TensorRef &x = call.inputs[0];
    return launchText(launchCast(int32_t(x.dtype), to, x.data, call.outputs[0].data,
                                 x.numElements(), ctx.geometry(x.numElements()), s));
  }

private:
  int32_t to;
};

} // namespace

/// Variadic Max/Min (cudaVariadicRow): every operand of the first one's
/// type, broadcast together; otherwise no op (the node runs on the CPU).
static CudaOpOrError prepareVariadic(const Node &n, const CudaKernel &row,
                                     llvm::ArrayRef<TensorDesc> inputs) {
  if (!cudaVariadicRow(row, inputs.size()))
    return std::unique_ptr<CudaOp>();
  std::vector<std::vector<int64_t>> shapes;
  llvm::SmallVector<int64_t, 6> out;
  for (const TensorDesc &d : inputs) {
    llvm::SmallVector<int64_t, 6> next;
    if (d.dtype != inputs[0].dtype || !kernels::broadcastShapes(out, d.shape, next))
      return std::unique_ptr<CudaOp>();
    out = next;
    shapes.emplace_back(d.shape.begin(), d.shape.end());
  }
  kernels::NaryPlan plan;
  if (!kernels::naryPlan(shapes, out, plan))
    return std::unique_ptr<CudaOp>();
  llvm::Expected<OpBlob> blob = makeOpBlob(n, row);
  if (!blob)
    return blob.takeError();
  return std::make_unique<VariadicOp>(BinaryOpId(row.op), *blob, plan);
}

CudaOpOrError cuda::prepareElementwiseOp(const Node &n, const CudaKernel &row,
                                         llvm::ArrayRef<TensorDesc> inputs,
                                         const CudaContext &) {
  switch (row.kind) {
  case CudaKernelKind::Unary:
  case CudaKernelKind::Predicate: {
    llvm::Expected<OpBlob> blob = makeOpBlob(n, row);
    if (!blob)
      return blob.takeError();
    return std::make_unique<UnaryOp>(UnaryOpId(row.op), *blob);
  }
  case CudaKernelKind::Binary:
  case CudaKernelKind::Compare: {
    llvm::SmallVector<int64_t, 6> out;
    if (inputs.size() != 2)
      return prepareVariadic(n, row, inputs);
    if (!kernels::broadcastShapes(inputs[0].shape, inputs[1].shape, out))
      return std::unique_ptr<CudaOp>();
    llvm::Expected<OpBlob> blob = makeOpBlob(n, row);
    if (!blob)
      return blob.takeError();
    return std::make_unique<BinaryOp>(BinaryOpId(row.op), *blob,
                                      kernels::makeBroadcastPlan(inputs[0].shape,
                                                                 inputs[1].shape));
  }
  case CudaKernelKind::Cast:
    return std::make_unique<CastOp>(n.opType == "CastLike" ? int32_t(inputs[1].dtype)
                                                           : int32_t(n.intAttr("to", 0)));
  default:
    return std::unique_ptr<CudaOp>();
  }
}
