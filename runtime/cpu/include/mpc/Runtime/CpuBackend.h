//===- CpuBackend.h - The reference CPU backend and its kernel table -*- C++ -*-===//
//
// One table row per kernel: op type, domain, opset range, supported dtypes of
// the type-determining operand and a run function. Everything else about an
// op (shape function, in-place policy, parsed attributes, cost class) is the
// op registry's (OpRegistry.h); the executor prepares each node once, and the
// CPU backend's handle for it is its kernel row. CpuCaps is derived from the
// same rows, so the compiler's painting and the runtime cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CPUBACKEND_H
#define MPC_RUNTIME_CPUBACKEND_H

#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/HostTensor.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Target/BackendCaps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <vector>

namespace mpc {

/// A set of DTypes as a bit mask over the ONNX type numbers.
using DTypeSet = uint32_t;
constexpr DTypeSet dtypeBit(DType t) { return DTypeSet(1) << unsigned(t); }
constexpr DTypeSet kFloatTypes = dtypeBit(DType::F32) | dtypeBit(DType::F16) |
                                 dtypeBit(DType::BF16) | dtypeBit(DType::F64);
constexpr DTypeSet kIntTypes = dtypeBit(DType::I8) | dtypeBit(DType::I16) |
                               dtypeBit(DType::I32) | dtypeBit(DType::I64);
constexpr DTypeSet kNumericTypes = kFloatTypes | kIntTypes;
constexpr DTypeSet kAllTypes = kNumericTypes | dtypeBit(DType::Bool) |
                               dtypeBit(DType::U8) | dtypeBit(DType::U16) |
                               dtypeBit(DType::U32) | dtypeBit(DType::U64);

/// Runs the node on host buffers. A data-dependent error is recorded
/// (recordKernelError) or, for the kernels that still do, returned; the CPU
/// backend records a returned error as KernelErrorCode::Message.
using RunFn = llvm::Error (*)(const KernelCall &call);

/// One kernel table row.
struct CpuKernel {
  const char *opType;
  const char *domain;
  int64_t minOpset, maxOpset;
  /// Supported dtypes of input 0 (of output 0 for ops without inputs).
  DTypeSet dtypes;
  RunFn run;
  /// The run function's name and where the row is defined.
  const char *runName = nullptr;
  SourceLocation where;
};

/// The whole table.
llvm::ArrayRef<CpuKernel> cpuKernelTable();

/// The row for a node at its model's opset, or null.
const CpuKernel *findCpuKernel(const Node &n);

/// The row for an op type/domain/opset, or null.
const CpuKernel *findCpuKernel(llvm::StringRef opType, llvm::StringRef domain,
                               int64_t opset);

/// The run function of the node's row (any dtype), or null: the host kernel
/// the CPU backend, and any device backend, folds values with
/// (Backend::hostKernel).
HostKernelFn cpuHostKernel(const Node &n);

/// BackendCaps::supportsLowPrecision for a backend whose kernels `runs`
/// (node, input dtypes) decides: the node as the AMP painting would leave it,
/// its fp32 operands in `t`. Ops the executor runs itself take any type.
bool supportsPainted(const Node &n, DType t,
                     llvm::function_ref<bool(const Node &, llvm::ArrayRef<DType>)> runs);

/// The capabilities derived from the CPU table: a 16-bit type is supported
/// where the node's row lists it.
class CpuCaps final : public BackendCaps {
public:
  std::string name() const override { return "cpu"; }
  bool supportsLowPrecision(const Node &n, DType t) const override;
};

/// The reference CPU backend: aligned host allocations, synchronous kernels.
class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int numThreads = 0);
  llvm::StringRef name() const override { return "cpu"; }
  llvm::Error checkAvailable() const override { return llvm::Error::success(); }
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override;
  void release(DeviceBuffer buffer) override;
  void copyToDevice(void *dst, const void *src, size_t bytes, Stream) override;
  void copyToHost(void *dst, const void *src, size_t bytes, Stream) override;
  ~CpuBackend() override;
  bool hasKernel(const Node &node) const override { return findCpuKernel(node) != nullptr; }
  bool supportsOp(const Node &node, llvm::ArrayRef<DType> inputDTypes) const override;
  PreparedKernel prepare(const Node &node, llvm::ArrayRef<TensorDesc> inputs) override;
  HostKernelFn hostKernel(const Node &node) const override { return cpuHostKernel(node); }
  void launch(const KernelCall &call, Stream) override;
  /// One launch per call, stopping at the first recorded error (the CPU
  /// stream is synchronous, so the record is current after each launch).
  void runPlan(const LaunchPlan &plan, Stream) override;
  void synchronize(Stream) override {}
  llvm::Error takeMessageError(const KernelErrorRecord *record) override;
  const BackendCaps &caps() const override { return cpuCaps; }
  size_t peakAllocatedBytes() const override { return peakBytes; }
  size_t allocatedBytes() const override { return currentBytes; }
  bool isHostMemory() const override { return true; }

private:
  CpuCaps cpuCaps;
  /// The errors behind KernelErrorCode::Message records, by record.
  KernelMessages messages;
  size_t currentBytes = 0, peakBytes = 0;
};

} // namespace mpc

#endif // MPC_RUNTIME_CPUBACKEND_H
