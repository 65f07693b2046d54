//===- HostTensor.cpp - Host tensors and conversions ------------------------===//
//
// Element sizes, shape printing, host copies of IR tensors and dtype
// conversion with ONNX Cast semantics (kernels::castValue, the scalar cast
// every backend's Cast kernel goes through).
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/HostTensor.h"
#include "llvm/ADT/STLExtras.h"
#include "mpc/Runtime/DTypeDispatch.h"
#include "mpc/Runtime/Kernels/Storage.h"
#include "mpc/IR/Tensor.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"
#include <sys/resource.h>
#include <unistd.h>
#include <cstdio>
#include <cinttypes>

using namespace mpc;

size_t mpc::runtimeElementSize(DType t) {
  switch (t) {
  case DType::F32: case DType::I32: case DType::U32: return 4;
  case DType::F64: case DType::I64: case DType::U64: return 8;
  case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
  case DType::I8: case DType::U8: case DType::Bool: return 1;
  default: return 0;
  }
}

HostTensor::HostTensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.resize(size_t(numElements()) * runtimeElementSize(t));
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

double HostTensor::getAsDouble(int64_t i) const {
  double v = 0;
  dispatchAll(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, bool>::value)
      v = data<bool>()[i] ? 1 : 0;
    else
      v = double(static_cast<std::conditional_t<std::is_integral<T>::value, T, float>>(
          data<T>()[i]));
  });
  if (dtype == DType::F64)
    v = data<double>()[i];
  return v;
}

std::string mpc::formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t mpc::maxTensorBytes() {
  static const uint64_t limit = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : uint64_t(1) << 40;
  }();
  return limit;
}

uint64_t mpc::availableHostBytes() {
  static const uint64_t limit = [] {
    uint64_t kib = 0;
    if (FILE *f = std::fopen("/proc/meminfo", "r")) {
      char line[256];
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
          break;
      std::fclose(f);
    }
    uint64_t bytes = kib ? std::min(kib * 1024, maxTensorBytes()) : maxTensorBytes();
    // An address-space limit (ulimit -v) makes allocations fail before the
    // machine runs out; a container's memory limit (cgroup v2) kills first.
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
      uint64_t mapped = 0; // pages of address space in use (/proc/self/statm)
      if (FILE *f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%" SCNu64, &mapped) != 1)
          mapped = 0;
        std::fclose(f);
      }
      mapped *= uint64_t(sysconf(_SC_PAGE_SIZE));
      bytes = std::min<uint64_t>(bytes, as.rlim_cur > mapped ? as.rlim_cur - mapped : 0);
    }
    auto readNumber = [](const char *file, uint64_t &v) {
      FILE *f = std::fopen(file, "r");
      if (!f)
        return false;
      bool ok = std::fscanf(f, "%" SCNu64, &v) == 1; // "max" reads as no number
      std::fclose(f);
      return ok;
    };
    uint64_t cgMax = 0, cgNow = 0;
    if (readNumber("/sys/fs/cgroup/memory.max", cgMax) &&
        readNumber("/sys/fs/cgroup/memory.current", cgNow))
      bytes = std::min(bytes, cgMax > cgNow ? cgMax - cgNow : 0);
    return bytes;
  }();
  return limit;
}

bool mpc::shapeStridesOverflow(llvm::ArrayRef<int64_t> shape) {
  int64_t product = 1;
  for (int64_t d : shape)
    if (d > 0 && __builtin_mul_overflow(product, d, &product))
      return true;
  return false;
}

llvm::Expected<uint64_t> mpc::checkedTensorBytes(llvm::ArrayRef<int64_t> shape, DType dtype,
                                                 const llvm::Twine &what) {
  uint64_t bytes = runtimeElementSize(dtype);
  bool overflow = false;
  for (int64_t d : shape) {
    if (d < 0)
      return inputError("{0}: shape {1} has a negative dimension", what.str(),
                        formatShape(shape));
    overflow |= __builtin_mul_overflow(bytes, uint64_t(d), &bytes);
  }
  // A zero dimension makes the tensor empty, but its strides are still
  // products of the other dimensions: [3, 2^62, 0] overflowed them in the
  // kernels (onnxruntime refuses such a shape too).
  if (llvm::is_contained(shape, 0) && shapeStridesOverflow(shape))
    return inputError("{0}: shape {1}: its nonzero dimensions multiply past 2^63 (even with "
                      "no element, its strides do not fit in int64)",
                      what.str(), formatShape(shape));
  // A zero dimension makes the tensor empty whatever the others; a product
  // that wrapped to 0 does not (4 bytes x 2^62 elements).
  if (llvm::is_contained(shape, 0) || runtimeElementSize(dtype) == 0)
    return 0;
  if (overflow)
    return inputError("{0}: shape {1} of {2} needs more than 2^64 bytes", what.str(),
                      formatShape(shape), dtypeName(dtype));
  if (bytes > maxTensorBytes())
    return inputError("{0}: shape {1} of {2} needs {3} bytes, more than this machine's memory "
                      "({4} bytes)",
                      what.str(), formatShape(shape), dtypeName(dtype), bytes, maxTensorBytes());
  return bytes;
}

llvm::Expected<HostTensor> mpc::hostTensorFromIR(const Tensor &t) {
  if (runtimeElementSize(t.dtype) == 0)
    return inputError("tensor '{0}': element type {1} is not supported by the runtime",
                      t.name, dtypeName(t.dtype));
  Tensor copy;
  const Tensor *src = &t;
  if (t.isExternal()) {
    copy = t;
    if (auto e = copy.materialize())
      return std::move(e);
    src = &copy;
  }
  auto need = checkedTensorBytes(t.dims, t.dtype, "tensor " + quoteName(t.name));
  if (!need)
    return need.takeError();
  if (src->bytes().size() != *need)
    return inputError("tensor '{0}': has {1} bytes of data, expected {2}", t.name,
                      src->bytes().size(), *need);
  HostTensor h(t.dtype, t.dims);
  std::copy(src->bytes().begin(), src->bytes().end(), h.bytes.begin());
  return h;
}

llvm::Expected<HostTensor> mpc::castHostTensor(const HostTensor &t, DType to) {
  if (runtimeElementSize(to) == 0)
    return inputError("cannot convert to element type {0}", dtypeName(to));
  HostTensor out(to, t.shape);
  int64_t n = t.numElements();
  dispatchAll(t.dtype, [&](auto from) {
    using From = decltype(from);
    dispatchAll(to, [&](auto target) {
      using To = decltype(target);
      const From *in = t.data<From>();
      To *o = out.data<To>();
      for (int64_t i = 0; i < n; ++i)
        o[i] = kernels::castValue<To>(in[i]);
    });
  });
  return out;
}
