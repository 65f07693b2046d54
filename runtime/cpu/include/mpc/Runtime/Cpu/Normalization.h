//===- Normalization.h - Layer, batch, instance and group norm --*- C++ -*-===//
//
// Normalizations with fp32 statistics (fp64 for double): two-pass mean and
// variance, the affine transform in fp32 and one rounding per output, for
// fp32/fp64 and fp16/bf16 storage.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPU_NORMALIZATION_H
#define MPC_RUNTIME_CPU_NORMALIZATION_H

#include "mpc/Runtime/Float16.h"
#include "mpc/Runtime/Kernels/Storage.h"

#include <cstdint>

namespace mpc {
namespace cpu {

/// ONNX LayerNormalization on x viewed as [outer, inner] (inner = product of
/// the dimensions from `axis` on). scale and the optional bias have inner
/// elements (expand a broadcast scale first); P may be T or float (fp32
/// parameters for 16-bit data). mean and invStdDev, when given, receive the
/// outer per-row statistics (the optional outputs, fp32 or fp64). y may
/// alias x.
template <typename T, typename P>
void layerNormalization(const T *x, const P *scale, const P *bias, T *y,
                        int64_t outer, int64_t inner, float epsilon,
                        kernels::AccumType<T> *mean = nullptr,
                        kernels::AccumType<T> *invStdDev = nullptr);

/// ONNX RMSNormalization on x viewed as [outer, inner]: each row is divided
/// by sqrt(mean(x^2) + epsilon), accumulated in fp32 (fp64 for double), and
/// multiplied by scale (inner elements, P = T or float). y may alias x.
template <typename T, typename P>
void rmsNormalization(const T *x, const P *scale, T *y, int64_t outer, int64_t inner,
                      float epsilon);

/// ONNX BatchNormalization in inference mode on x [batch, channels,
/// spatial]: y = (x - mean) / sqrt(var + epsilon) * scale + bias with the
/// running statistics; parameters of type P (T or float).
template <typename T, typename P>
void batchNormalization(const T *x, const P *scale, const P *bias,
                        const P *mean, const P *var, T *y, int64_t batch,
                        int64_t channels, int64_t spatial, float epsilon);

/// ONNX InstanceNormalization on x [batch, channels, spatial] with scale and
/// bias per channel.
template <typename T>
void instanceNormalization(const T *x, const T *scale, const T *bias, T *y,
                           int64_t batch, int64_t channels, int64_t spatial,
                           float epsilon);

/// ONNX GroupNormalization on x [batch, channels, spatial]: statistics over
/// each group of channels / numGroups channels. scale and bias have one
/// entry per channel (opset 21) or, with perGroupAffine, one per group
/// (opset 18).
template <typename T>
void groupNormalization(const T *x, const T *scale, const T *bias, T *y,
                        int64_t batch, int64_t channels, int64_t spatial,
                        int64_t numGroups, float epsilon,
                        bool perGroupAffine = false);

} // namespace cpu
} // namespace mpc

#endif // MPC_RUNTIME_CPU_NORMALIZATION_H
