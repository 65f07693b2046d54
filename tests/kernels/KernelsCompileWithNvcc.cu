//===- KernelsCompileWithNvcc.cu - The op bodies as device code -----------===//
//
// Built by nvcc only, when CMake finds it (tests/kernels/CMakeLists.txt):
// includes every header of runtime/kernels and instantiates each element-wise
// body of ElementwiseOps.def in a __global__ function, for every storage type
// the CPU backend runs it with (float, double, Half, BFloat16 and the
// integers of its row kind), plus the bodies outside the table (attribute
// variants, activation slopes, casts). A body that calls host-only code, or
// is not MPC_HD, fails this build. The object is never linked or run: no
// GPU is needed.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/ActivationGrad.h"
#include "mpc/Runtime/Kernels/BinaryOps.h"
#include "mpc/Runtime/Kernels/BroadcastPlan.h"
#include "mpc/Runtime/Kernels/CopyPlan.h"
#include "mpc/Runtime/Kernels/HostDevice.h"
#include "mpc/Runtime/Kernels/MathFunctions.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/Runtime/Kernels/StorageTypes.h"
#include "mpc/Runtime/Kernels/UnaryOps.h"

namespace mpc {
namespace kernels {
namespace nvcccheck {

template <typename Op, typename T, typename Out>
__global__ void unaryBody(Op op, const T *in, Out *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = store<Out>(op(load(in[i])));
}

template <typename Op, typename T, typename Out>
__global__ void binaryBody(Op op, const T *a, const T *b, Out *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = store<Out>(op(load(a[i]), load(b[i])));
}

#define MPC_DEVICE_UNARY(T, OP, OUT)                                           \
  template __global__ void unaryBody<OP, T, OUT(T)>(OP, const T *, OUT(T) *, int);
#define MPC_DEVICE_BINARY(T, OP, OUT)                                          \
  template __global__ void binaryBody<OP, T, OUT(T)>(OP, const T *, const T *, \
                                                     OUT(T) *, int);
#define MPC_UNARY_FLOAT(OP) MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_SIGNED(OP) MPC_SIGNED_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_ARITHMETIC(OP)                                               \
  MPC_ARITHMETIC_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_INTEGER(OP) MPC_INTEGER_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_SAME_TYPE)
#define MPC_UNARY_PREDICATE(OP) MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, OP, MPC_BOOL_TYPE)
#define MPC_BINARY_SIGNED(OP) MPC_SIGNED_STORAGE_TYPES(MPC_DEVICE_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_INTEGER(OP) MPC_INTEGER_STORAGE_TYPES(MPC_DEVICE_BINARY, OP, MPC_SAME_TYPE)
#define MPC_BINARY_COMPARE(OP) MPC_SIGNED_STORAGE_TYPES(MPC_DEVICE_BINARY, OP, MPC_BOOL_TYPE)
#include "mpc/Runtime/Kernels/ElementwiseOps.def"

// Bodies outside the table: Gelu's two variants and ThresholdedRelu's
// siblings the table reaches through attributes.
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, GeluErf, MPC_SAME_TYPE)
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_UNARY, GeluTanh, MPC_SAME_TYPE)

#undef MPC_DEVICE_UNARY
#undef MPC_DEVICE_BINARY

// The gradient ops' slopes (ReluGrad, SigmoidGrad, TanhGrad, ErfGrad, GeluGrad).
template <typename T>
__global__ void activationGradBody(ActivationGrad kind, const T *dy, const T *v, T *dx, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    dx[i] = store<T>(load(dy[i]) * activationSlope(kind, load(v[i])));
}
#define MPC_DEVICE_ACTIVATION_GRAD(T, OP, OUT)                                 \
  template __global__ void activationGradBody<T>(ActivationGrad, const T *, const T *, T *, int);
MPC_FLOAT_STORAGE_TYPES(MPC_DEVICE_ACTIVATION_GRAD, , )
#undef MPC_DEVICE_ACTIVATION_GRAD

// Cast (castValue) between every pair of storage types.
template <typename From, typename To>
__global__ void castBody(const From *in, To *out, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    out[i] = castValue<To>(in[i]);
}

template <typename... Ts> struct AllCasts {
  template <typename From> static void from() {
    const void *kernels[] = {reinterpret_cast<const void *>(&castBody<From, Ts>)...};
    (void)kernels;
  }
  static void all() {
    void (*froms[])() = {&from<Ts>...};
    (void)froms;
  }
};

void instantiateCasts() {
  AllCasts<bool, float, double, Half, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t,
           uint16_t, uint32_t, uint64_t>::all();
}

} // namespace nvcccheck
} // namespace kernels
} // namespace mpc
