//===- OpRegistryTest.cpp - The op registry against the other op tables ----===//
//
// Every op on a default AMP list, with a gradient rule or with a CPU kernel
// has a registry row; every row is on exactly one AMP list or in the
// documented unlisted set; rows do not overlap. The executor prepares each
// node once through the backend (not the CPU table) and hands the parsed
// attributes to the kernels, on both the launch and the folding path.
//
//===----------------------------------------------------------------------===//
#include "mpc/Passes/AmpLists.h"
#include "mpc/Passes/TrainGraph.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Runtime/OpRegistry.h"
#include "mpc/Text/Text.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"
#include "../runtime/ModelText.h"
#include "../../runtime/ops/ShapeHelpers.h"
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using namespace mpc;

namespace {
/// "Op" for the default domain, else "domain::Op" (the AMP lists' keys).
std::string qualified(llvm::StringRef domain, llvm::StringRef opType) {
  if (domain.empty() || domain == "ai.onnx")
    return opType.str();
  return (domain + "::" + opType).str();
}

/// The rows of (domain, type) at any opset.
std::vector<const OpDef *> rowsOf(llvm::StringRef qualifiedOp) {
  std::vector<const OpDef *> out;
  for (const OpDef &d : opRegistry())
    if (qualified(d.domain, d.opType) == qualifiedOp)
      out.push_back(&d);
  return out;
}

const AmpClass kLists[] = {AmpClass::Allow, AmpClass::Infer, AmpClass::Deny, AmpClass::Clear};
} // namespace

TEST(OpRegistry, EveryAmpListedOpHasARow) {
  for (DType t : {DType::F16, DType::BF16}) {
    AmpLists lists = AmpLists::defaults(t);
    for (AmpClass c : kLists)
      for (const std::string &op : lists.entries(c))
        EXPECT_FALSE(rowsOf(op).empty()) << op << " is on the " << ampClassName(c).str()
                                         << " list but has no registry row";
  }
}

TEST(OpRegistry, EveryGradientRuleHasARow) {
  std::vector<std::string> ops = gradientRuleOps();
  EXPECT_GT(ops.size(), 10u);
  for (const std::string &op : ops)
    EXPECT_FALSE(rowsOf(op).empty()) << op << " has a gradient rule but no registry row";
}

TEST(OpRegistry, EveryCpuKernelIsCoveredByARow) {
  for (const CpuKernel &k : cpuKernelTable()) {
    const OpDef *lo = findOp(k.opType, k.domain, k.minOpset);
    const OpDef *hi = findOp(k.opType, k.domain, k.maxOpset);
    EXPECT_TRUE(lo && hi) << qualified(k.domain, k.opType) << " (opset " << k.minOpset
                          << "-" << k.maxOpset << ") has a CPU kernel but no registry row";
    if (lo)
      EXPECT_FALSE(lo->runByExecutor()) << k.opType;
  }
}

TEST(OpRegistry, EveryRowIsOnExactlyOneListOrDocumentedUnlisted) {
  std::set<std::string> unlisted;
  for (const AmpUnlistedOp &u : ampUnlistedOps()) {
    EXPECT_TRUE(unlisted.insert(u.op).second) << u.op << " is in the unlisted set twice";
    EXPECT_FALSE(rowsOf(u.op).empty()) << u.op << " is in the unlisted set but has no row";
    EXPECT_FALSE(llvm::StringRef(u.reason).empty()) << u.op;
  }
  for (DType t : {DType::F16, DType::BF16}) {
    AmpLists lists = AmpLists::defaults(t);
    std::map<std::string, int> onLists;
    for (AmpClass c : kLists)
      for (const std::string &op : lists.entries(c))
        ++onLists[op];
    for (const OpDef &d : opRegistry()) {
      std::string op = qualified(d.domain, d.opType);
      int n = onLists.count(op) ? onLists[op] : 0;
      if (unlisted.count(op))
        EXPECT_EQ(n, 0) << op << " is in the unlisted set and on a " << dtypeName(t).str()
                        << " list";
      else
        EXPECT_EQ(n, 1) << op << " is on " << n << " " << dtypeName(t).str()
                        << " lists and not in the unlisted set (passes/amp/AmpLists.cpp)";
    }
  }
}

TEST(OpRegistry, UnlistedReasonsAreInTheGeneratedOpsTable) {
  // docs/ops.md (docs/gen_ops.py) shows each unlisted op's reason.
  std::ifstream in(std::string(MPC_SOURCE_DIR) + "/docs/ops.md");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  for (const AmpUnlistedOp &u : ampUnlistedOps()) {
    std::string row = std::string("| ") + u.op + " | unlisted | " + u.reason + " |";
    EXPECT_NE(doc.find(row), std::string::npos)
        << "docs/ops.md lacks \"" << row << "\": regenerate it with docs/gen_ops.py";
  }
}

TEST(OpRegistry, RowsDoNotOverlapAndRecordWhereTheyAre) {
  llvm::ArrayRef<OpDef> rows = opRegistry();
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpDef &a = rows[i];
    EXPECT_LE(a.minOpset, a.maxOpset) << a.opType;
    std::string where = a.where.text();
    EXPECT_TRUE(llvm::StringRef(where).startswith("runtime/ops/") ||
                llvm::StringRef(where).startswith(
                    "runtime/kernels/include/mpc/Runtime/Kernels/ElementwiseOps.def:"))
        << a.opType << " at " << where;
    for (size_t j = i + 1; j < rows.size(); ++j) {
      const OpDef &b = rows[j];
      if (qualified(a.domain, a.opType) != qualified(b.domain, b.opType))
        continue;
      EXPECT_TRUE(a.maxOpset < b.minOpset || b.maxOpset < a.minOpset)
          << a.opType << ": two rows cover one opset";
    }
  }
}

TEST(OpRegistry, FactsOfKnownOps) {
  const OpDef *gemm = findOp("Gemm", "", 17);
  ASSERT_TRUE(gemm);
  EXPECT_EQ(gemm->cost, CostClass::Gemm);
  EXPECT_TRUE(gemm->parse);
  EXPECT_EQ(findOp("Gemm", "", 6), nullptr); // rows start at opset 7
  const OpDef *reshape = findOp("Reshape", "ai.onnx", 14);
  ASSERT_TRUE(reshape);
  EXPECT_EQ(reshape->inPlace, InPlace::Data);
  EXPECT_EQ(reshape->cost, CostClass::Data);
  ASSERT_TRUE(findOp("NonZero", "", 13));
  EXPECT_TRUE(findOp("NonZero", "", 13)->valueDependentShape);
  EXPECT_EQ(findOp("Add", "", 14)->inPlace, InPlace::Operands);
  EXPECT_EQ(findOp("Acos", "", 6), nullptr);
  EXPECT_TRUE(findOp("Acos", "", 7));
  EXPECT_EQ(findOp("MaxPool", "", 12)->cost, CostClass::Window);
  EXPECT_TRUE(findOp("ConvGrad", "ai.mpc.training", 1));
  EXPECT_TRUE(findOp("FusedMatMul", "com.microsoft", 1));
}

TEST(OpRegistry, RowWithoutCpuKernelIsRepresentable) {
  // The executor's own ops have rows and no kernel on any backend.
  const OpDef *loop = findOp("Loop", "", 17);
  ASSERT_TRUE(loop);
  EXPECT_TRUE(loop->runByExecutor());
  EXPECT_TRUE(loop->valueDependentShape);
  EXPECT_EQ(findCpuKernel("Loop", "", 17), nullptr);
}

namespace {
/// The CPU backend, except that it has no kernel for `refused` and counts
/// prepares and launches: what the executor asks of a backend.
class CountingBackend final : public Backend {
public:
  explicit CountingBackend(std::string refused = "") : refused(std::move(refused)) {}
  llvm::StringRef name() const override { return "counting"; }
  llvm::Error checkAvailable() const override { return llvm::Error::success(); }
  llvm::Expected<DeviceBuffer> allocate(size_t bytes, BufferKind kind) override {
    return cpu.allocate(bytes, kind);
  }
  void release(DeviceBuffer b) override { cpu.release(b); }
  void copyToDevice(void *d, const void *s, size_t n, Stream st) override {
    cpu.copyToDevice(d, s, n, st);
  }
  void copyToHost(void *d, const void *s, size_t n, Stream st) override {
    cpu.copyToHost(d, s, n, st);
  }
  bool hasKernel(const Node &n) const override {
    return n.opType != refused && cpu.hasKernel(n);
  }
  bool supportsOp(const Node &n, llvm::ArrayRef<DType> dts) const override {
    return n.opType != refused && cpu.supportsOp(n, dts);
  }
  PreparedKernel prepare(const Node &n, llvm::ArrayRef<TensorDesc> in) override {
    ++prepares;
    return n.opType == refused ? PreparedKernel() : cpu.prepare(n, in);
  }
  HostKernelFn hostKernel(const Node &n) const override { return cpu.hostKernel(n); }
  void launch(const KernelCall &call, Stream st) override {
    ++launches;
    if (!call.kernel)
      ADD_FAILURE() << "launch without a prepared kernel";
    else
      cpu.launch(call, st);
  }
  void synchronize(Stream st) override { cpu.synchronize(st); }
  const BackendCaps &caps() const override { return cpu.caps(); }
  size_t peakAllocatedBytes() const override { return cpu.peakAllocatedBytes(); }

  CpuBackend cpu;
  std::string refused;
  unsigned prepares = 0, launches = 0;
};

std::unique_ptr<Model> parse(llvm::StringRef text) { return test::parseVerified(text); }

// Gemm with transB, alpha and beta, then Softmax over axis 0: the parsed
// attributes must reach the kernels. x = [[1, 2]], w = [[1, 0], [0, 1],
// [1, 1]] (transposed: 2x3), c = [1, 1, 1]: 2 * x * w^T + 0.5 * c =
// 2 * [1, 2, 3] + 0.5 = [2.5, 4.5, 6.5].
const char kGemmModel[] = R"(
graph @g(%x: f32[1,2]) -> (%y: f32[1,3], %s: f32[1,3]) {
  init %w: f32[3,2] = [1, 0, 0, 1, 1, 1]
  init %c: f32[3] = [1, 1, 1]
  %y = Gemm(%x, %w, %c) {transB = 1, alpha = 2.0, beta = 0.5} : f32[1,3]
  %s = Softmax(%y) {axis = 0} : f32[1,3]
  return %y, %s
})";
} // namespace

TEST(OpRegistryExecutor, BackendWithoutTheKernelIsAskedNotTheCpuTable) {
  auto m = parse(R"(
graph @g(%x: f32[2]) -> (%y: f32[2]) {
  %y = Relu(%x) : f32[2] name="relu0"
  return %y
})");
  ASSERT_TRUE(m);
  CountingBackend b("Relu");
  auto ex = Executor::create(*m, b);
  ASSERT_FALSE(ex);
  std::string msg = llvm::toString(ex.takeError());
  EXPECT_NE(msg.find("unsupported op Relu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the counting backend has no kernel"), std::string::npos) << msg;
}

TEST(OpRegistryExecutor, NodesArePreparedOnceAndParamsReachTheKernels) {
  auto m = parse(kGemmModel);
  ASSERT_TRUE(m);
  CountingBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  EXPECT_EQ(b.prepares, 0u); // prepared once the shapes are known
  HostTensor x(DType::F32, {1, 2});
  x.data<float>()[0] = 1;
  x.data<float>()[1] = 2;
  for (int run = 0; run < 3; ++run) {
    auto out = (*ex)->run({{"x", x}});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    const float *y = (*out)[0].tensor.data<float>();
    EXPECT_FLOAT_EQ(y[0], 2.5f);
    EXPECT_FLOAT_EQ(y[1], 4.5f);
    EXPECT_FLOAT_EQ(y[2], 6.5f);
    // Softmax over axis 0 of a [1,3] tensor: every element is alone.
    const float *s = (*out)[1].tensor.data<float>();
    for (int i = 0; i < 3; ++i)
      EXPECT_FLOAT_EQ(s[i], 1.0f);
  }
  EXPECT_EQ(b.prepares, 2u); // once per node and shape signature, not per run
  EXPECT_EQ(b.launches, 6u);
}

TEST(OpRegistryExecutor, FoldedNodesUseTheParsedParams) {
  // With x an initializer, both nodes are evaluated while planning (on the
  // host kernels) and nothing is launched.
  std::string text = kGemmModel;
  text.replace(text.find("@g(%x: f32[1,2])"), 16, "@g()");
  text.replace(text.find("  init %w"), 0, "  init %x: f32[1,2] = [1, 2]\n");
  auto m = parse(text);
  ASSERT_TRUE(m);
  CountingBackend b;
  auto ex = Executor::create(*m, b);
  ASSERT_TRUE(bool(ex)) << llvm::toString(ex.takeError());
  auto out = (*ex)->run({});
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ((*ex)->numFoldedNodes(), 2u);
  EXPECT_EQ(b.launches, 0u);
  const float *y = (*out)[0].tensor.data<float>();
  EXPECT_FLOAT_EQ(y[0], 2.5f);
  EXPECT_FLOAT_EQ(y[2], 6.5f);
}

// Element counts of declared shapes saturate: a model may declare any int64
// dimension ([N, 64, 2^62], training mutation suite seed 72 under UBSan: the
// product overflowed in the shape estimator of train-graph).
TEST(ShapeHelpers, ElementCountsSaturate) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(mpc::shapes::numel({}), 1);
  EXPECT_EQ(mpc::shapes::numel({2, 3, 4}), 24);
  EXPECT_EQ(mpc::shapes::numel({64, int64_t(1) << 62}), kMax);
  EXPECT_EQ(mpc::shapes::numel({int64_t(1) << 62, 4, 0}), 0);
  int64_t outer, axisDim, inner;
  mpc::shapes::splitAt({2, 3, 4, 5}, 1, outer, axisDim, inner);
  EXPECT_EQ(outer, 2);
  EXPECT_EQ(axisDim, 3);
  EXPECT_EQ(inner, 20);
  mpc::shapes::splitAt({2, 3, 4}, -1, outer, axisDim, inner);
  EXPECT_EQ(outer, 1);
  EXPECT_EQ(axisDim, 1);
  EXPECT_EQ(inner, 24);
  mpc::shapes::splitAt({2, 3, 4}, 7, outer, axisDim, inner);
  EXPECT_EQ(outer, 24);
  EXPECT_EQ(axisDim, 1);
  EXPECT_EQ(inner, 1);
  EXPECT_EQ(mpc::shapes::mulSat(4, int64_t(1) << 62), kMax);
  EXPECT_EQ(mpc::shapes::mulSat(3, 5), 15);
  mpc::shapes::splitAt({int64_t(1) << 40, int64_t(1) << 40, 5}, 2, outer, axisDim, inner);
  EXPECT_EQ(outer, kMax);
  EXPECT_EQ(axisDim, 5);
  EXPECT_EQ(inner, 1);
}
