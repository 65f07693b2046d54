//===- OpTesterTest.cpp - The op tester and its device registry -----------===//
//
// The registry's answers for known, unbuilt and unknown devices (the exact
// lines the suites print), one node per selected device against
// hand-computed values (attributes, optional inputs, several outputs), and a
// kernel error coming back as the executor's message naming the node.
//
//===----------------------------------------------------------------------===//
#include "OpTester.h"

using namespace mpc;
using namespace mpc::optest;

namespace {

TEST(DeviceRegistry, KnowsCpuAndCuda) {
  EXPECT_EQ(knownDevices(), (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(unavailableReason("cpu"), "");
  EXPECT_EQ(unavailableReason("tpu"), "unknown device 'tpu' (known: 'cpu', 'cuda')");
  // Where CUDA cannot run (a build without the backend, or no GPU) that is a
  // reason, not an error, and it says which.
  auto cuda = createDevice("cuda");
  if (cuda)
    GTEST_SKIP() << "this machine runs the CUDA backend";
  std::string why = llvm::toString(cuda.takeError());
  EXPECT_TRUE(why == "device 'cuda' is not available in this build" ||
              llvm::StringRef(why).startswith("device 'cuda' cannot run here: no CUDA device"))
      << why;
  EXPECT_EQ(unavailableReason("cuda"), why);
}

class OpTesterTest : public DeviceTest {};

TEST_P(OpTesterTest, GemmWithAttributesAndBias) {
  // Y = 2 * A^T B + 0.5 C with A [2,3] transposed, B [2,2], C [2] broadcast.
  OpTester t("Gemm", 13);
  t.attrInt("transA", 1).attrFloat("alpha", 2.0f).attrFloat("beta", 0.5f);
  t.input<float>({2, 3}, {1, 2, 3, 4, 5, 6})
      .input<float>({2, 2}, {1, 0, 0, 1})
      .input<float>({2}, {10, 20});
  std::vector<HostTensor> out = runOrFail(t, device());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{3, 2}));
  // A^T = [[1,4],[2,5],[3,6]].
  EXPECT_EQ(valuesOf<float>(out[0]),
            (std::vector<float>{7, 18, 9, 20, 11, 22}));
}

TEST_P(OpTesterTest, AbsentOptionalInputAndSeveralOutputs) {
  // Clip with no min and max = 1; TopK with two outputs.
  OpTester clip("Clip", 13);
  clip.input<float>({3}, {-5, 0.5, 7}).absentInput().constantInput(tensorOf<float>({}, {1}));
  EXPECT_EQ(runOutput<float>(clip, device()), (std::vector<float>{-5, 0.5, 1}));
  OpTester topk("TopK", 11);
  topk.input<float>({4}, {3, 9, 1, 7}).constantInput(tensorOf<int64_t>({1}, {2})).outputs(2);
  std::vector<HostTensor> out = runOrFail(topk, device());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(valuesOf<float>(out[0]), (std::vector<float>{9, 7}));
  EXPECT_EQ(valuesOf<int64_t>(out[1]), (std::vector<int64_t>{1, 3}));
}

TEST_P(OpTesterTest, OmittedOutputIsEmpty) {
  OpTester pool("MaxPool", 12);
  pool.attrInts("kernel_shape", {2}).input<float>({1, 1, 4}, {1, 5, 2, 3});
  pool.outputMask({true, false});
  std::vector<HostTensor> out = runOrFail(pool, device());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(valuesOf<float>(out[0]), (std::vector<float>{5, 5, 3}));
  EXPECT_EQ(out[1].dtype, DType::Undefined);
}

TEST_P(OpTesterTest, KernelErrorNamesTheNode) {
  OpTester gather("Gather", 13);
  gather.input<float>({3}, {1, 2, 3}).input<int64_t>({1}, {3});
  auto out = gather.run(device());
  ASSERT_FALSE(bool(out));
  std::string msg = llvm::toString(out.takeError());
  if (isNoKernelError(msg))
    GTEST_SKIP() << msg;
  EXPECT_EQ(msg, "node 'node' (Gather): index 3 out of range for [3]");
}

TEST_P(OpTesterTest, ComparatorUsesTheOutputsDType) {
  HostTensor h = tensorOf<Half>({2}, {Half(1.0f), Half(2.0f)});
  // One f16 ulp at 2 is 2^-9: within rtol 2^-10 * 2 = 2^-9, twice that is not.
  EXPECT_TRUE(allCloseTensor(h, {1.0, 2.0 + std::ldexp(1.0, -9)}));
  EXPECT_FALSE(allCloseTensor(h, {1.0, 2.0 + std::ldexp(1.0, -8)}));
  HostTensor i = tensorOf<int32_t>({1}, {3});
  EXPECT_FALSE(allCloseTensor(i, {3.0 + 1e-9})) << "integers compare exactly";
}

OPTEST_INSTANTIATE_DEVICES(OpTesterTest);

} // namespace
