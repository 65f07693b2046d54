//===- DataParam.cuh - Data and parameter type dispatch ---------*- CUDA -*-===//
//
// Private to the .cu files of runtime/cuda whose nodes have a data type T
// and per-channel parameters of T or, with 16-bit data, fp32 (AMP keeps
// normalization parameters in fp32): training batch normalization and the
// instance/group normalizations.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CUDA_DATAPARAM_CUH
#define MPC_RUNTIME_CUDA_DATAPARAM_CUH

#include "GridStride.cuh"
#include <type_traits>

namespace mpc {
namespace cuda {

/// Calls fn(T(), P()) for the data type and the parameter type (fp32
/// parameters with 16-bit data, else the data's type).
template <typename Fn> cudaError_t dispatchDataParam(int32_t type, int32_t paramType, Fn &&fn) {
  return dispatchFloat(type, [&](auto tag) {
    using T = decltype(tag);
    if (!std::is_same<T, float>::value && paramType == kOnnxF32)
      return fn(tag, float());
    return fn(tag, tag);
  });
}

} // namespace cuda
} // namespace mpc

#endif // MPC_RUNTIME_CUDA_DATAPARAM_CUH
