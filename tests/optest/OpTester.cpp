//===- OpTester.cpp - One node through a named backend ----------------------===//
#include "OpTester.h"

#include "mpc/IR/Graph.h"
#include "mpc/IR/Tensor.h"
#include "mpc/Runtime/CpuBackend.h"
#include "mpc/Runtime/Executor.h"
#include "mpc/Support/Diagnostics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

using namespace mpc;
using namespace mpc::optest;

//===----------------------------------------------------------------------===//
// The device registry
//===----------------------------------------------------------------------===//

namespace {
/// One registry row: a device name and how to make its backend. A new
/// backend adds a row here (docs/testing.md section 6).
struct DeviceRow {
  const char *name;
  llvm::Expected<std::unique_ptr<Backend>> (*create)();
};

llvm::Expected<std::unique_ptr<Backend>> createCpu() {
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
}

const DeviceRow kDevices[] = {
    {"cpu", createCpu},
    {"cuda", createCudaBackend},
};

const DeviceRow *findDevice(llvm::StringRef name) {
  for (const DeviceRow &d : kDevices)
    if (name == d.name)
      return &d;
  return nullptr;
}

/// A backend for a known device, or why there is none: the build lacks
/// it, or it cannot run on this machine.
llvm::Expected<std::unique_ptr<Backend>> makeBackend(llvm::StringRef name) {
  const DeviceRow *row = findDevice(name);
  if (!row) {
    std::string known;
    for (const DeviceRow &d : kDevices)
      known += (known.empty() ? "" : ", ") + quoteName(d.name);
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "unknown device " + quoteName(name) + " (known: " + known +
                                       ")");
  }
  auto backend = row->create();
  if (!backend) {
    llvm::consumeError(backend.takeError());
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "device " + quoteName(name) +
                                       " is not available in this build");
  }
  if (llvm::Error e = (*backend)->checkAvailable())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "device " + quoteName(name) + " cannot run here: " +
                                       llvm::toString(std::move(e)));
  return std::move(*backend);
}

/// One backend per device for the whole test binary, made on first use (a
/// device backend's context, handles and streams are made once, as in
/// `mpc run`); or why there is none. Every OpTester::run makes its own
/// executor on it.
llvm::Expected<Backend &> sharedBackend(llvm::StringRef name) {
  static std::map<std::string, std::unique_ptr<Backend>, std::less<>> backends;
  static std::map<std::string, std::string, std::less<>> reasons;
  auto it = backends.find(name);
  if (it != backends.end())
    return *it->second;
  auto why = reasons.find(name);
  if (why == reasons.end()) {
    auto b = makeBackend(name);
    if (b)
      return *backends.emplace(name.str(), std::move(*b)).first->second;
    why = reasons.emplace(name.str(), llvm::toString(b.takeError())).first;
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why->second);
}

std::vector<std::string> &selection() {
  static std::vector<std::string> devices = [] {
    std::vector<std::string> out;
    if (const char *env = std::getenv("MPC_TEST_DEVICES")) {
      llvm::SmallVector<llvm::StringRef, 4> parts;
      llvm::StringRef(env).split(parts, ',', -1, false);
      for (llvm::StringRef p : parts)
        out.push_back(p.trim().str());
      if (!out.empty())
        return out;
    }
    for (const DeviceRow &d : kDevices)
      if (unavailableReason(d.name).empty())
        out.push_back(d.name);
    return out;
  }();
  return devices;
}
} // namespace

std::vector<std::string> optest::knownDevices() {
  std::vector<std::string> out;
  for (const DeviceRow &d : kDevices)
    out.push_back(d.name);
  return out;
}

std::string optest::unavailableReason(llvm::StringRef device) {
  auto b = sharedBackend(device);
  if (b)
    return "";
  return llvm::toString(b.takeError());
}

llvm::Expected<std::unique_ptr<Backend>> optest::createDevice(llvm::StringRef device) {
  return makeBackend(device);
}

const std::vector<std::string> &optest::selectedDevices() { return selection(); }

void optest::selectDevices(std::vector<std::string> devices) {
  selection() = std::move(devices);
}

//===----------------------------------------------------------------------===//
// The op tester
//===----------------------------------------------------------------------===//

struct OpTester::Impl {
  std::string opType, domain;
  int64_t opset;
  std::vector<Attribute> attrs;
  /// Inputs in order; `present` false for an omitted optional one,
  /// `constant` true for an initializer.
  struct In {
    HostTensor tensor;
    bool present = true;
    bool constant = false;
  };
  std::vector<In> inputs;
  std::vector<bool> outputMask{true};
};

OpTester::OpTester(std::string opType, int64_t opset, std::string domain)
    : impl(std::make_unique<Impl>()) {
  impl->opType = std::move(opType);
  impl->domain = std::move(domain);
  impl->opset = opset;
}
OpTester::~OpTester() = default;
OpTester::OpTester(OpTester &&) = default;

OpTester &OpTester::attr(Attribute a) {
  impl->attrs.push_back(std::move(a));
  return *this;
}
OpTester &OpTester::attrInt(llvm::StringRef name, int64_t v) {
  return attr(Attribute::makeInt(name.str(), v));
}
OpTester &OpTester::attrFloat(llvm::StringRef name, float v) {
  return attr(Attribute::makeFloat(name.str(), v));
}
OpTester &OpTester::attrString(llvm::StringRef name, llvm::StringRef v) {
  return attr(Attribute::makeString(name.str(), v.str()));
}
OpTester &OpTester::attrInts(llvm::StringRef name, std::vector<int64_t> v) {
  return attr(Attribute::makeInts(name.str(), std::move(v)));
}
OpTester &OpTester::attrFloats(llvm::StringRef name, std::vector<float> v) {
  Attribute a;
  a.name = name.str();
  a.kind = AttrKind::Floats;
  a.floats = std::move(v);
  return attr(std::move(a));
}

OpTester &OpTester::input(HostTensor t) {
  impl->inputs.push_back({std::move(t), true, false});
  return *this;
}
OpTester &OpTester::absentInput() {
  impl->inputs.push_back({HostTensor(), false, false});
  return *this;
}
OpTester &OpTester::constantInput(HostTensor t) {
  impl->inputs.push_back({std::move(t), true, true});
  return *this;
}
OpTester &OpTester::outputs(unsigned n) {
  impl->outputMask.assign(n, true);
  return *this;
}
OpTester &OpTester::outputMask(std::vector<bool> mask) {
  impl->outputMask = std::move(mask);
  return *this;
}

namespace {
/// The IR tensor holding `t`'s bytes (for an initializer).
Tensor irTensorOf(const HostTensor &t) {
  Tensor out(t.dtype, t.shape);
  out.setBytes(t.bytes);
  return out;
}
} // namespace

llvm::Expected<std::vector<HostTensor>> OpTester::run(llvm::StringRef device) const {
  auto backend = sharedBackend(device);
  if (!backend)
    return backend.takeError();
  Model model;
  model.opsets.push_back({impl->domain, impl->opset});
  if (!impl->domain.empty())
    model.opsets.push_back({"", 21});
  model.graph = std::make_unique<Graph>(model);
  Graph &g = *model.graph;
  g.name = "optest";
  Node *node = g.createNode(impl->opType, impl->domain);
  node->name = "node";
  std::vector<NamedTensor> feeds;
  for (size_t i = 0; i < impl->inputs.size(); ++i) {
    const Impl::In &in = impl->inputs[i];
    if (!in.present) {
      node->addInput(nullptr);
      continue;
    }
    std::string name = "x" + std::to_string(i);
    Value *v = in.constant ? g.addInitializer(name, irTensorOf(in.tensor))
                           : g.addInput(name, Type::tensor(in.tensor.dtype, in.tensor.shape));
    node->addInput(v);
    if (!in.constant)
      feeds.push_back({name, in.tensor});
  }
  for (const Attribute &a : impl->attrs)
    node->setAttr(a.copyWithoutGraphs());
  node->resizeOutputs(unsigned(impl->outputMask.size()));
  for (size_t k = 0; k < impl->outputMask.size(); ++k)
    if (impl->outputMask[k])
      g.addOutput(node->setOutput(unsigned(k), "y" + std::to_string(k), Type()));
  auto exec = Executor::create(model, *backend);
  if (!exec)
    return exec.takeError();
  auto out = (*exec)->run(feeds);
  if (!out)
    return out.takeError();
  std::vector<HostTensor> result(impl->outputMask.size());
  size_t next = 0;
  for (size_t k = 0; k < impl->outputMask.size(); ++k)
    if (impl->outputMask[k])
      result[k] = std::move((*out)[next++].tensor);
  return result;
}

namespace {
bool gNoKernelFallback = true;
// device -> "Op type" -> cases run on the CPU instead.
std::map<std::string, std::map<std::string, int>> gNoKernel;
} // namespace

bool optest::isNoKernelError(llvm::StringRef message) {
  return message.contains("backend has no kernel for it");
}

void optest::setNoKernelFallback(bool on) { gNoKernelFallback = on; }

std::string optest::noKernelSummary() {
  std::string s;
  for (auto &[device, ops] : gNoKernel) {
    int total = 0;
    std::string list;
    for (auto &[op, n] : ops) {
      total += n;
      list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(n);
    }
    s += device + ": " + std::to_string(total) +
         " cases ran on the cpu for want of a kernel: " + list + "\n";
  }
  return s;
}

/// Counts a case `device` had no kernel for under its op and type, from the
/// executor's "unsupported op Conv (domain 'ai.onnx', opset 11, input type
/// f32) at ...".
static void countNoKernel(llvm::StringRef device, llvm::StringRef msg) {
  std::string key = msg.contains("unsupported op ")
                        ? msg.split("unsupported op ").second.split(' ').first.str()
                        : std::string("?");
  if (size_t at = msg.find("input type "); at != llvm::StringRef::npos)
    key += " " + msg.substr(at + 11).split(')').first.str();
  ++gNoKernel[device.str()][key];
}

std::vector<HostTensor> optest::runOrFail(const OpTester &t, llvm::StringRef device) {
  auto out = t.run(device);
  if (!out && device != "cpu" && gNoKernelFallback) {
    std::string msg = llvm::toString(out.takeError());
    if (!isNoKernelError(msg)) {
      ADD_FAILURE() << "run on " << device.str() << ": " << msg;
      return {};
    }
    countNoKernel(device, msg);
    out = t.run("cpu");
  }
  if (!out) {
    ADD_FAILURE() << "run on " << device.str() << ": " << llvm::toString(out.takeError());
    return {};
  }
  return std::move(*out);
}

std::string optest::runExpectingError(const OpTester &t, llvm::StringRef device) {
  auto out = t.run(device);
  if (out) {
    ADD_FAILURE() << "run on " << device.str() << ": ran, where it must fail";
    return "";
  }
  std::string msg = llvm::toString(out.takeError());
  if (device == "cpu" || !gNoKernelFallback || !isNoKernelError(msg))
    return msg;
  // The node fails where mpc run's fallback would run it: on the CPU.
  countNoKernel(device, msg);
  out = t.run("cpu");
  if (out) {
    ADD_FAILURE() << "run on cpu (for want of a " << device.str()
                  << " kernel): ran, where it must fail";
    return "";
  }
  return llvm::toString(out.takeError());
}

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

test::Tolerance optest::toleranceOf(DType t) {
  switch (t) {
  case DType::F32:
    return test::TypeTraits<float>::kTol;
  case DType::F16:
    return test::TypeTraits<Half>::kTol;
  case DType::BF16:
    return test::TypeTraits<BFloat16>::kTol;
  case DType::F64:
    return test::TypeTraits<double>::kTol;
  default:
    return {0, 0, 0};
  }
}

::testing::AssertionResult optest::allCloseTensor(const HostTensor &got,
                                                  const std::vector<double> &ref,
                                                  const std::vector<double> &scales) {
  return allCloseTensor(got, ref, scales, toleranceOf(got.dtype));
}

::testing::AssertionResult optest::allCloseTensor(const HostTensor &got,
                                                  const std::vector<double> &ref,
                                                  const std::vector<double> &scales,
                                                  test::Tolerance tol) {
  if (size_t(got.numElements()) != ref.size())
    return ::testing::AssertionFailure()
           << "size " << got.numElements() << " != reference size " << ref.size();
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double g = got.getAsDouble(int64_t(i));
    double s = scales.empty() ? 0.0 : scales[i];
    if (test::isClose(g, ref[i], tol, s))
      continue;
    if (++bad <= 5)
      os << "\n  [" << i << "] got " << g << ", expected " << ref[i] << " (diff "
         << std::fabs(g - ref[i]) << ", scale " << s << ")";
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << dtypeName(got.dtype).str() << ": " << bad << " of "
                                       << ref.size() << " elements out of tolerance"
                                       << os.str();
}

//===----------------------------------------------------------------------===//
// Device-parameterised suites
//===----------------------------------------------------------------------===//

namespace {
void skipUnavailable(const std::string &device) {
  std::string why = unavailableReason(device);
  if (!why.empty())
    GTEST_SKIP() << why;
}
} // namespace

void DeviceTest::SetUp() { skipUnavailable(device()); }
void DeviceTypeTest::SetUp() { skipUnavailable(device()); }

std::ostream &optest::operator<<(std::ostream &os, const DeviceType &p) {
  return os << p.device << "/" << dtypeName(p.dtype).str();
}

std::vector<DeviceType> optest::deviceTypeParams(std::vector<DType> types) {
  std::vector<DeviceType> out;
  for (const std::string &d : selectedDevices())
    for (DType t : types)
      out.push_back({d, t});
  return out;
}

std::vector<DType> optest::floatTypes() {
  return {DType::F32, DType::F16, DType::BF16, DType::F64};
}

namespace {
std::string shortName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  default:
    return dtypeName(t).str();
  }
}
/// gtest parameter names allow only alphanumerics and '_'.
std::string sanitize(std::string s) {
  for (char &c : s)
    if (!llvm::isAlnum(c))
      c = '_';
  return s;
}
} // namespace

std::string DeviceName::operator()(const ::testing::TestParamInfo<std::string> &i) const {
  return sanitize(i.param);
}
std::string DeviceName::operator()(const ::testing::TestParamInfo<DeviceType> &i) const {
  return sanitize(i.param.device + "_" + shortName(i.param.dtype));
}
