//===- OpTester.h - One node through a named backend, for kernel tests -*- C++ -*-===//
//
// The op tester builds a one-node model (op type, domain, opset, attributes,
// inputs given as host tensors), runs it with the Executor on the backend a
// device name picks, and returns the outputs as host tensors. The backend is
// driven only through the Backend interface (prepare/launch/runPlan, copies),
// so a kernel test written against the tester runs unchanged on every backend
// the registry below knows. docs/testing.md section 6 describes how to run the
// op tests for a device and how a new backend joins the registry.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_OPTEST_OPTESTER_H
#define MPC_TESTS_OPTEST_OPTESTER_H

#include "TestUtil.h"

#include "mpc/IR/Attribute.h"
#include "mpc/IR/DType.h"
#include "mpc/Runtime/Backend.h"
#include "mpc/Runtime/HostTensor.h"

#include "gtest/gtest.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace mpc {
namespace optest {

//===----------------------------------------------------------------------===//
// The device registry
//===----------------------------------------------------------------------===//

/// Every device name the tests know, in registry order: "cpu" always,
/// "cuda" whether or not this build has it (it is then reported as
/// unavailable, never as a failure).
std::vector<std::string> knownDevices();

/// Why `device` cannot run tests here ("device 'cuda' is not available in
/// this build"), or "" when it can. Unknown names are unavailable too.
std::string unavailableReason(llvm::StringRef device);

/// A fresh backend for `device`; an error carrying unavailableReason() when
/// there is none. (OpTester::run uses one backend per device for the whole
/// binary, made on first use.)
llvm::Expected<std::unique_ptr<Backend>> createDevice(llvm::StringRef device);

/// The devices the parameterised suites are instantiated for: the ones the
/// test binary's `--device` options named (OpTestMain.cpp), else those of the
/// MPC_TEST_DEVICES environment variable (comma-separated), else every
/// known device that is available here.
const std::vector<std::string> &selectedDevices();
/// Sets the selection (OpTestMain.cpp, before the suites are instantiated).
void selectDevices(std::vector<std::string> devices);

//===----------------------------------------------------------------------===//
// Host tensors from and to typed vectors
//===----------------------------------------------------------------------===//

template <typename T> struct DTypeOf;
#define MPC_OPTEST_DTYPE(T, D)                                                          \
  template <> struct DTypeOf<T> {                                                      \
    static constexpr DType value = DType::D;                                           \
  };
MPC_OPTEST_DTYPE(float, F32)
MPC_OPTEST_DTYPE(double, F64)
MPC_OPTEST_DTYPE(Half, F16)
MPC_OPTEST_DTYPE(BFloat16, BF16)
MPC_OPTEST_DTYPE(int8_t, I8)
MPC_OPTEST_DTYPE(uint8_t, U8)
MPC_OPTEST_DTYPE(int16_t, I16)
MPC_OPTEST_DTYPE(uint16_t, U16)
MPC_OPTEST_DTYPE(int32_t, I32)
MPC_OPTEST_DTYPE(uint32_t, U32)
MPC_OPTEST_DTYPE(int64_t, I64)
MPC_OPTEST_DTYPE(uint64_t, U64)
MPC_OPTEST_DTYPE(bool, Bool)
#undef MPC_OPTEST_DTYPE

/// A host tensor of `shape` holding `values` (their count must match).
template <typename T>
HostTensor tensorOf(std::vector<int64_t> shape, const std::vector<T> &values) {
  HostTensor t(DTypeOf<T>::value, std::move(shape));
  EXPECT_EQ(size_t(t.numElements()), values.size()) << "tensorOf: element count";
  if (!values.empty() && size_t(t.numElements()) == values.size())
    std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(T));
  return t;
}
/// bool vectors are packed: one byte per element.
template <>
inline HostTensor tensorOf<bool>(std::vector<int64_t> shape, const std::vector<bool> &values) {
  HostTensor t(DType::Bool, std::move(shape));
  EXPECT_EQ(size_t(t.numElements()), values.size()) << "tensorOf: element count";
  for (size_t i = 0; i < values.size() && i < t.bytes.size(); ++i)
    t.bytes[i] = values[i] ? 1 : 0;
  return t;
}

/// The elements of `t` as T; a test failure (and an empty vector) when its
/// dtype is not T's.
template <typename T> std::vector<T> valuesOf(const HostTensor &t) {
  if (t.dtype != DTypeOf<T>::value) {
    ADD_FAILURE() << "output dtype " << dtypeName(t.dtype).str() << ", expected "
                  << dtypeName(DTypeOf<T>::value).str();
    return {};
  }
  std::vector<T> v(size_t(t.numElements()));
  if (!v.empty())
    std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}
template <> inline std::vector<bool> valuesOf<bool>(const HostTensor &t) {
  if (t.dtype != DType::Bool) {
    ADD_FAILURE() << "output dtype " << dtypeName(t.dtype).str() << ", expected bool";
    return {};
  }
  std::vector<bool> v(size_t(t.numElements()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.bytes[i] != 0;
  return v;
}

//===----------------------------------------------------------------------===//
// The op tester
//===----------------------------------------------------------------------===//

/// One node to run: op type, domain and the opset its domain is imported
/// at, attributes, inputs (absent optional ones allowed) and the number of
/// outputs (omitted optional outputs allowed).
class OpTester {
public:
  OpTester(std::string opType, int64_t opset, std::string domain = "");
  ~OpTester();
  OpTester(OpTester &&);

  OpTester &attr(Attribute a);
  OpTester &attrInt(llvm::StringRef name, int64_t v);
  OpTester &attrFloat(llvm::StringRef name, float v);
  OpTester &attrString(llvm::StringRef name, llvm::StringRef v);
  OpTester &attrInts(llvm::StringRef name, std::vector<int64_t> v);
  OpTester &attrFloats(llvm::StringRef name, std::vector<float> v);

  OpTester &input(HostTensor t);
  template <typename T>
  OpTester &input(std::vector<int64_t> shape, const std::vector<T> &values) {
    return input(tensorOf<T>(std::move(shape), values));
  }
  /// An omitted optional input (an empty name in ONNX).
  OpTester &absentInput();
  /// A constant input (an initializer of the one-node model) rather than a
  /// graph input: for operands an op requires to be known while planning
  /// (Reshape's shape, axes inputs). The executor reads it on the host; the
  /// node itself still runs on the device.
  OpTester &constantInput(HostTensor t);

  /// The node has `n` outputs, all returned (default 1).
  OpTester &outputs(unsigned n);
  /// Outputs 0..mask.size()-1, those with mask[i] false omitted (their
  /// entry in the result is an empty tensor).
  OpTester &outputMask(std::vector<bool> mask);

  /// Runs the node on `device`; the outputs in order, or why it failed
  /// (the executor's message, naming the node).
  llvm::Expected<std::vector<HostTensor>> run(llvm::StringRef device) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

/// Runs `t` on `device`, failing the test (and returning no outputs) when
/// it does not run. A node `device` has no kernel for (the executor's "backend
/// has no kernel for it") runs on the CPU instead, as `mpc run`'s fallback
/// would, and is counted in noKernelSummary(), unless setNoKernelFallback(false)
/// (the test binaries' `--no-fallback`) makes it a failure.
std::vector<HostTensor> runOrFail(const OpTester &t, llvm::StringRef device);

/// Runs `t` on `device` where it must fail, and returns the error's message
/// ("" and a test failure when it ran). A node `device` has no kernel for
/// fails on the CPU instead (counted as runOrFail counts it), unless
/// setNoKernelFallback(false) keeps the refusal as the message.
std::string runExpectingError(const OpTester &t, llvm::StringRef device);

/// Whether `message` is the executor's refusal of a node the backend has no
/// kernel for.
bool isNoKernelError(llvm::StringRef message);
void setNoKernelFallback(bool on);
/// "cuda: 12 cases ran on the cpu for want of a kernel: Conv f32 x4, ..." (one
/// line per device, op and type sorted), or "" when every case ran where asked.
std::string noKernelSummary();

/// The first output of `t` on `device` as T (empty and a failure when the
/// run fails or the dtype differs).
template <typename T>
std::vector<T> runOutput(const OpTester &t, llvm::StringRef device, unsigned k = 0) {
  std::vector<HostTensor> out = runOrFail(t, device);
  if (out.size() <= k) {
    ADD_FAILURE() << "no output " << k;
    return {};
  }
  return valuesOf<T>(out[k]);
}

//===----------------------------------------------------------------------===//
// Comparison with per-dtype tolerances (TestUtil.h states the table)
//===----------------------------------------------------------------------===//

/// The tolerance of a runtime dtype: TestUtil.h's TypeTraits<T>::kTol for
/// the float storage types, exact (all zero) for everything else.
test::Tolerance toleranceOf(DType t);

/// Compares a host tensor with a float64 reference under toleranceOf(its
/// dtype) (or `tol`), with optional per-element accumulation scales.
::testing::AssertionResult allCloseTensor(const HostTensor &got, const std::vector<double> &ref,
                                          const std::vector<double> &scales = {});
::testing::AssertionResult allCloseTensor(const HostTensor &got, const std::vector<double> &ref,
                                          const std::vector<double> &scales,
                                          test::Tolerance tol);

//===----------------------------------------------------------------------===//
// Device-parameterised suites
//===----------------------------------------------------------------------===//

/// A suite run once per selected device: TEST_P bodies call device().
class DeviceTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override;
  const std::string &device() const { return GetParam(); }
};

/// A device and a storage type: the float suites run each case for f32,
/// f16, bf16 and f64 on every selected device.
struct DeviceType {
  std::string device;
  DType dtype;
};
std::ostream &operator<<(std::ostream &os, const DeviceType &p);

class DeviceTypeTest : public ::testing::TestWithParam<DeviceType> {
protected:
  void SetUp() override;
  const std::string &device() const { return GetParam().device; }
};

/// The cross product of the selected devices and `types`.
std::vector<DeviceType> deviceTypeParams(std::vector<DType> types);
/// The four float storage types the kernel tests cover.
std::vector<DType> floatTypes();

/// Test-name suffixes: "cpu", "cpu_f16".
struct DeviceName {
  std::string operator()(const ::testing::TestParamInfo<std::string> &i) const;
  std::string operator()(const ::testing::TestParamInfo<DeviceType> &i) const;
};

template <typename T> struct TypeTag {
  using type = T;
};
/// Calls f(TypeTag<T>()) for the storage type T of `t` (a float type).
template <typename F> void dispatchFloat(DType t, F &&f) {
  switch (t) {
  case DType::F32:
    return f(TypeTag<float>());
  case DType::F16:
    return f(TypeTag<Half>());
  case DType::BF16:
    return f(TypeTag<BFloat16>());
  case DType::F64:
    return f(TypeTag<double>());
  default:
    ADD_FAILURE() << "not a float storage type: " << dtypeName(t).str();
  }
}

} // namespace optest
} // namespace mpc

/// Instantiates a DeviceTest suite for every selected device.
#define OPTEST_INSTANTIATE_DEVICES(Suite)                                               \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite,                                             \
                           ::testing::ValuesIn(::mpc::optest::selectedDevices()),      \
                           ::mpc::optest::DeviceName())
/// Instantiates a DeviceTypeTest suite for every selected device and each
/// float storage type.
#define OPTEST_INSTANTIATE_FLOAT_TYPES(Suite)                                           \
  INSTANTIATE_TEST_SUITE_P(                                                            \
      Devices, Suite,                                                                  \
      ::testing::ValuesIn(::mpc::optest::deviceTypeParams(::mpc::optest::floatTypes())), \
      ::mpc::optest::DeviceName())

/// A DeviceTypeTest case whose body is a template over the storage type T
/// with the device name in `device`: the device-parameterised form of a
/// TYPED_TEST over the float types.
#define OPTEST_TYPED_P(Suite, Name)                                                     \
  template <typename T> static void Suite##_##Name##_body(const std::string &device);  \
  TEST_P(Suite, Name) {                                                                \
    ::mpc::optest::dispatchFloat(GetParam().dtype, [&](auto tag) {                     \
      Suite##_##Name##_body<typename decltype(tag)::type>(GetParam().device);          \
    });                                                                                \
  }                                                                                    \
  template <typename T> static void Suite##_##Name##_body(const std::string &device)

#endif // MPC_TESTS_OPTEST_OPTESTER_H
