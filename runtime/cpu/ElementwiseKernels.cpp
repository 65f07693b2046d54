//===- ElementwiseKernels.cpp - CPU table rows for element-wise ops ---------===//
//
// Unary, binary, bitwise, comparison, logical, Where, Cast and CastLike glue
// over the colleague's compiled loops (mpc/Runtime/Cpu/Elementwise.h,
// Cpu/Cast.h).
// The rows of ElementwiseOps.def become table rows here; the parsed
// attributes become functor fields in makeOp (mpc/Runtime/ElementwiseFunctors.h,
// shared with the CUDA backend).
//
//===----------------------------------------------------------------------===//
#include "CpuKernels.h"
#include "mpc/Runtime/Cpu/Cast.h"
#include "mpc/Runtime/Cpu/Broadcast.h"
#include "mpc/Runtime/Cpu/CopyPlans.h"
#include "mpc/Runtime/Cpu/Elementwise.h"
#include "mpc/Runtime/ElementwiseFunctors.h"
#include <cmath>
#include <cstring>
#include <limits>

using namespace mpc;
using namespace mpc::cpuk;
namespace k = mpc::kernels;

static const ElementwiseParams &ew(const KernelCall &c) {
  return paramsOf<ElementwiseParams>(c);
}

namespace {
/// The storage types of a row kind of ElementwiseOps.def.
enum class RowTypes { Float, Signed, Arithmetic, Integer };

/// Calls fn(T()) for the types of kind K.
template <RowTypes K, typename Fn> void dispatchRow(DType t, Fn &&fn) {
  if constexpr (K == RowTypes::Float)
    dispatchFloat(t, fn);
  else if constexpr (K == RowTypes::Signed)
    dispatchSigned(t, fn);
  else if constexpr (K == RowTypes::Arithmetic)
    dispatchArithmetic(t, fn);
  else
    dispatchInteger(t, fn);
}

/// Unary rows with the same input and output type.
template <typename Op, RowTypes K> struct Unary {
  static llvm::Error run(const KernelCall &c) {
    Op op = k::makeOp<Op>(c.params);
    const TensorRef &x = c.inputs[0];
    dispatchRow<K>(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      k::applyUnary<T, T, Op>(op, x.as<T>(), c.outputs[0].as<T>(), x.numElements());
    });
    return llvm::Error::success();
  }
};

template <typename Op> struct Predicate {
  static llvm::Error run(const KernelCall &c) {
    Op op = k::makeOp<Op>(c.params);
    const TensorRef &x = c.inputs[0];
    dispatchFloat(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      k::applyUnary<T, bool, Op>(op, x.as<T>(), c.outputs[0].as<bool>(),
                                 x.numElements());
    });
    return llvm::Error::success();
  }
};

/// Binary rows; Out is the same type (Compare = false) or bool.
template <typename Op, bool Compare, RowTypes K = RowTypes::Signed> struct Binary {
  static llvm::Error run(const KernelCall &c) {
    Op op = k::makeOp<Op>(c.params);
    if constexpr (!Compare)
      if (c.inputs.size() != 2)
        return runVariadic(op, c);
    const TensorRef &a = c.inputs[0], &b = c.inputs[1];
    k::BroadcastPlan plan = k::makeBroadcastPlan(a.shape, b.shape);
    dispatchRow<K>(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      using Out = std::conditional_t<Compare, bool, T>;
      k::applyBinary<T, Out, Op>(op, a.as<T>(), b.as<T>(), c.outputs[0].as<Out>(), plan);
    });
    return llvm::Error::success();
  }

  /// Variadic Max/Min: one input is a copy; more fold left to right, each
  /// step broadcasting the running result with the next input.
  static llvm::Error runVariadic(const Op &op, const KernelCall &c) {
    const TensorRef &out = c.outputs[0];
    dispatchRow<K>(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      const TensorRef &first = c.inputs[0];
      std::vector<T> acc(first.as<T>(), first.as<T>() + first.numElements());
      llvm::SmallVector<int64_t, 6> accShape(first.shape.begin(), first.shape.end());
      for (size_t i = 1; i < c.inputs.size(); ++i) {
        const TensorRef &in = c.inputs[i];
        llvm::SmallVector<int64_t, 6> shape;
        k::broadcastShapes(accShape, in.shape, shape);
        int64_t n = 1;
        for (int64_t d : shape)
          n *= d;
        std::vector<T> next(static_cast<size_t>(n));
        k::BroadcastPlan plan = k::makeBroadcastPlan(accShape, in.shape);
        k::applyBinary<T, T, Op>(op, acc.data(), in.as<T>(), next.data(), plan);
        acc = std::move(next);
        accShape = shape;
      }
      std::copy(acc.begin(), acc.end(), out.as<T>());
    });
    return llvm::Error::success();
  }
};
} // namespace

/// Clip: bounds come from optional inputs 1 and 2 (opset >= 11) or attributes.
static llvm::Error runClip(const KernelCall &c) {
  k::Clip op;
  op.minValue = ew(c).alpha;
  op.maxValue = ew(c).beta;
  auto bound = [&](unsigned i, double &out) {
    if (!c.hasInput(i))
      return;
    dispatchSigned(c.inputs[i].dtype, [&](auto tag) {
      using T = decltype(tag);
      out = double(k::castValue<double>(*c.inputs[i].as<T>()));
    });
  };
  bound(1, op.minValue);
  bound(2, op.maxValue);
  const TensorRef &x = c.inputs[0];
  dispatchSigned(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    k::applyUnary<T, T, k::Clip>(op, x.as<T>(), c.outputs[0].as<T>(), x.numElements());
  });
  return llvm::Error::success();
}

llvm::Error cpuk::runWhere(const KernelCall &c) {
  const TensorRef &out = c.outputs[0];
  int64_t n = out.numElements();
  size_t bytes = static_cast<size_t>(n) * runtimeElementSize(out.dtype);
  // One condition for the whole tensor (a training step's skip guard):
  // a copy of the chosen operand when it has the output's shape.
  if (c.inputs[0].numElements() == 1) {
    const TensorRef &pick = c.inputs[0].as<bool>()[0] ? c.inputs[1] : c.inputs[2];
    if (pick.numElements() == n) {
      if (pick.data != out.data && bytes)
        std::memmove(out.data, pick.data, bytes);
      return llvm::Error::success();
    }
  }
  // The three-operand broadcast plan the CUDA launcher walks per element,
  // walked here per innermost row.
  kernels::SelectPlan plan;
  if (!kernels::selectPlan(c.inputs[0].shape, c.inputs[1].shape, c.inputs[2].shape, out.shape,
                           plan))
    return nodeError(*c.node, "cannot broadcast to " + formatShape(out.shape) +
                                  ": too many dimensions after merging");
  if (n == 0)
    return llvm::Error::success();
  int64_t inner = plan.rank ? plan.dims[plan.rank - 1] : 1, step[3] = {0, 0, 0};
  for (int k = 0; k < 3 && plan.rank; ++k)
    step[k] = plan.strides[k][plan.rank - 1];
  const bool *cond = c.inputs[0].as<bool>();
  dispatchAll(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = c.inputs[1].as<T>(), *y = c.inputs[2].as<T>();
    T *o = out.as<T>();
    for (int64_t r = 0; r < n; r += inner) {
      int64_t off[3];
      kernels::selectOffsets(plan, r, off);
      for (int64_t j = 0; j < inner; ++j)
        o[r + j] = cond[off[0] + j * step[0]] ? x[off[1] + j * step[1]] : y[off[2] + j * step[2]];
    }
  });
  return llvm::Error::success();
}

/// And, Or, Xor over the broadcast plan and Not, with the bodies the CUDA
/// launchers call (BinaryOps.h, UnaryOps.h).
llvm::Error cpuk::runLogical(const KernelCall &c) {
  const TensorRef &a = c.inputs[0], &b = c.inputs[1];
  k::BroadcastPlan plan = k::makeBroadcastPlan(a.shape, b.shape);
  const bool *pa = a.as<bool>(), *pb = b.as<bool>();
  bool *o = c.outputs[0].as<bool>();
  llvm::StringRef op = c.node->opType;
  if (op == "And")
    k::applyBinary<bool, bool, k::And>(k::And(), pa, pb, o, plan);
  else if (op == "Or")
    k::applyBinary<bool, bool, k::Or>(k::Or(), pa, pb, o, plan);
  else
    k::applyBinary<bool, bool, k::Xor>(k::Xor(), pa, pb, o, plan);
  return llvm::Error::success();
}

llvm::Error cpuk::runNot(const KernelCall &c) {
  const TensorRef &x = c.inputs[0];
  k::applyUnary<bool, bool, k::Not>(k::Not(), x.as<bool>(), c.outputs[0].as<bool>(),
                                    x.numElements());
  return llvm::Error::success();
}

llvm::Error cpuk::runCast(const KernelCall &c) {
  const TensorRef &x = c.inputs[0], &y = c.outputs[0];
  int64_t n = x.numElements();
  dispatchAll(x.dtype, [&](auto from) {
    using From = decltype(from);
    dispatchAll(y.dtype, [&](auto to) {
      using To = decltype(to);
      cpu::castArray<From, To>(x.as<From>(), y.as<To>(), n);
    });
  });
  return llvm::Error::success();
}

// The element-wise kernel rows, built from ElementwiseOps.def. Each row
// covers its op's registry range (runtime/ops/OnnxOps.cpp: the first opset
// of ops added later; shape functions and in-place policy live there too).
#define UNARY_ROW(Op, Kind, Types)                                             \
  MPC_CPU_KERNEL(#Op, "", 1, Types, Unary<k::Op, RowTypes::Kind>::run),
#define MPC_UNARY_FLOAT(Op) UNARY_ROW(Op, Float, kFloatTypes)
#define MPC_UNARY_SIGNED(Op) UNARY_ROW(Op, Signed, kNumericTypes)
#define MPC_UNARY_ARITHMETIC(Op) UNARY_ROW(Op, Arithmetic, kArithmeticTypes)
#define MPC_UNARY_INTEGER(Op) UNARY_ROW(Op, Integer, kIntegerTypes)
#define MPC_UNARY_PREDICATE(Op)                                                \
  MPC_CPU_KERNEL(#Op, "", 1, kFloatTypes, Predicate<k::Op>::run),
// ONNX gives the binary arithmetic ops and the comparisons the unsigned
// integers too; PRelu and Pow take signed and float types only.
#define MPC_BINARY_SIGNED(Op)                                                  \
  MPC_CPU_KERNEL(#Op, "", 1, signedRowTypes(#Op),                              \
                 Binary<k::Op, false, RowTypes::Arithmetic>::run),
#define MPC_BINARY_INTEGER(Op)                                                 \
  MPC_CPU_KERNEL(#Op, "", 1, kIntegerTypes, Binary<k::Op, false, RowTypes::Integer>::run),
#define MPC_BINARY_COMPARE(Op)                                                 \
  MPC_CPU_KERNEL(#Op, "", 1, kArithmeticTypes, Binary<k::Op, true, RowTypes::Arithmetic>::run),

/// The types of a MPC_BINARY_SIGNED row's kernel (its loops cover the
/// unsigned types as well).
static DTypeSet signedRowTypes(llvm::StringRef op) {
  return op == "PRelu" || op == "Pow" ? kNumericTypes : kArithmeticTypes;
}

namespace mpc {
namespace cpuk {
std::vector<CpuKernel> elementwiseRows() {
  std::vector<CpuKernel> rows = {
#include "mpc/Runtime/Kernels/ElementwiseOps.def"
      MPC_CPU_KERNEL("And", "", 7, dtypeBit(DType::Bool), runLogical),
      MPC_CPU_KERNEL("Or", "", 7, dtypeBit(DType::Bool), runLogical),
      MPC_CPU_KERNEL("Xor", "", 7, dtypeBit(DType::Bool), runLogical),
      MPC_CPU_KERNEL("Not", "", 1, dtypeBit(DType::Bool), runNot),
      MPC_CPU_KERNEL("Where", "", 9, dtypeBit(DType::Bool), runWhere),
      MPC_CPU_KERNEL("Cast", "", 6, kAllTypes, runCast),
      MPC_CPU_KERNEL("CastLike", "", 15, kAllTypes, runCast),
  };
  for (CpuKernel &r : rows) {
    // Clip reads its bounds from inputs; replace the plain functor row.
    if (llvm::StringRef(r.opType) == "Clip") {
      r.run = runClip;
      r.runName = "runClip";
    }
    // ONNX BitShift admits unsigned types only.
    if (llvm::StringRef(r.opType) == "BitShift")
      r.dtypes = kUnsignedTypes;
    if (const OpDef *op = findOp(r.opType, "", kMaxOpsetVersion))
      r.minOpset = op->minOpset;
  }
  return rows;
}
} // namespace cpuk
} // namespace mpc
