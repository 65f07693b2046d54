//===- ProtoIO.cpp - ONNX Tensor/Sequence/OptionalProto files -------------===//
//
// TensorProto data comes as raw_data or as the typed repeated fields (values
// truncated to the element size, little-endian). A SequenceProto must hold
// tensors; a file that parses but carries fields SequenceProto does not have
// (a TensorProto given for a sequence input) is refused rather than read as
// an empty sequence. An OptionalProto holds nothing (elem_type UNDEFINED), a
// tensor or a sequence of tensors; the same leftover check applies.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/ProtoIO.h"
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Support/Diagnostics.h"
#include "onnx/onnx-data_pb.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <cstring>

using namespace mpc;

/// A host tensor from a TensorProto; `what` names it in errors.
static llvm::Expected<HostTensor> tensorFromProto(const onnx::TensorProto &p,
                                                  const std::string &what) {
  if (!isKnownDType(p.data_type()) || runtimeElementSize(DType(p.data_type())) == 0)
    return inputError("{0}: unsupported element type {1}", what, p.data_type());
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return inputError("{0}: external tensor data is not supported", what);
  DType dt = DType(p.data_type());
  std::vector<int64_t> shape(p.dims().begin(), p.dims().end());
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d && n > (uint64_t(1) << 40) / uint64_t(d)))
      return inputError("{0}: shape {1} is too large for memory", what, formatShape(shape));
    n *= uint64_t(d);
  }
  HostTensor t;
  t.dtype = dt;
  t.shape = shape;
  size_t es = runtimeElementSize(dt);
  if (p.has_raw_data()) {
    if (p.raw_data().size() != n * es)
      return inputError("{0}: has {1} bytes of data, shape {2} needs {3}", what,
                        p.raw_data().size(), formatShape(shape), n * es);
    t.bytes.assign(p.raw_data().begin(), p.raw_data().end());
    return std::move(t);
  }
  auto fill = [&](const auto &field) -> llvm::Error {
    if (uint64_t(field.size()) != n)
      return inputError("{0}: has {1} values, shape {2} needs {3}", what, field.size(),
                        formatShape(shape), n);
    t.bytes.resize(n * es); // no larger than the values the file holds
    for (uint64_t i = 0; i < n; ++i) {
      auto v = field.Get(int(i));
      std::memcpy(t.bytes.data() + i * es, &v, es); // little-endian truncation
    }
    return llvm::Error::success();
  };
  llvm::Error err = llvm::Error::success();
  switch (dt) {
  case DType::F32: err = fill(p.float_data()); break;
  case DType::F64: err = fill(p.double_data()); break;
  case DType::I64: err = fill(p.int64_data()); break;
  case DType::U32: case DType::U64: err = fill(p.uint64_data()); break;
  default: err = fill(p.int32_data()); break;
  }
  if (err)
    return std::move(err);
  return std::move(t);
}

static llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, false, false);
  if (!buf)
    return inputError("cannot read '{0}': {1}", path, buf.getError().message());
  return std::move(*buf);
}

llvm::Expected<NamedTensor> mpc::readTensorPb(llvm::StringRef path) {
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  onnx::TensorProto p;
  if (!p.ParseFromArray((*buf)->getBufferStart(), int((*buf)->getBufferSize())))
    return inputError("{0}: not a valid ONNX TensorProto", path);
  auto t = tensorFromProto(p, path.str());
  if (!t)
    return t.takeError();
  return NamedTensor{p.name(), std::move(*t)};
}

/// The tensors of a SequenceProto; `what` names it in errors.
static llvm::Error sequenceFromProto(const onnx::SequenceProto &p, const std::string &what,
                                     NamedSequence &s) {
  bool others = p.sparse_tensor_values_size() || p.sequence_values_size() || p.map_values_size() ||
                p.optional_values_size();
  bool tensors = p.elem_type() == onnx::SequenceProto::TENSOR ||
                 (p.elem_type() == onnx::SequenceProto::UNDEFINED && !p.tensor_values_size());
  if (!tensors || others)
    return inputError("{0}: a sequence of {1}; only sequences of tensors are supported", what,
                      onnx::SequenceProto::DataType_Name(p.elem_type()));
  for (int i = 0; i < p.tensor_values_size(); ++i) {
    auto t = tensorFromProto(p.tensor_values(i), what + ": element " + std::to_string(i));
    if (!t)
      return t.takeError();
    if (i && t->dtype != s.elem)
      return inputError("{0}: element {1} is {2}, element 0 is {3}", what, i, dtypeName(t->dtype),
                        dtypeName(s.elem));
    s.elem = t->dtype;
    s.items.push_back(std::move(*t));
  }
  return llvm::Error::success();
}

llvm::Expected<NamedSequence> mpc::readSequencePb(llvm::StringRef path) {
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  onnx::SequenceProto p;
  if (!p.ParseFromArray((*buf)->getBufferStart(), int((*buf)->getBufferSize())))
    return inputError("{0}: not a valid ONNX SequenceProto", path);
  // TensorProto's fields overlap SequenceProto's (a float tensor's data_type
  // reads as elem_type TENSOR) but not all of them: leftovers mean the file
  // is something else.
  if (!p.unknown_fields().empty())
    return inputError("{0}: not an ONNX SequenceProto (a TensorProto?)", path);
  NamedSequence s;
  s.name = p.name();
  if (auto e = sequenceFromProto(p, path.str(), s))
    return std::move(e);
  return std::move(s);
}

llvm::Expected<NamedSequence> mpc::readOptionalPb(llvm::StringRef path) {
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  onnx::OptionalProto p;
  if (!p.ParseFromArray((*buf)->getBufferStart(), int((*buf)->getBufferSize())) ||
      !p.unknown_fields().empty())
    return inputError("{0}: not a valid ONNX OptionalProto", path);
  NamedSequence s;
  s.name = p.name();
  s.optional = true;
  bool others = p.has_sparse_tensor_value() || p.has_map_value() || p.has_optional_value();
  switch (p.elem_type()) {
  case onnx::OptionalProto::UNDEFINED:
    if (others || p.has_tensor_value() || p.has_sequence_value())
      break;
    s.hasValue = false; // empty: the declared type says of what
    return std::move(s);
  case onnx::OptionalProto::TENSOR: {
    if (others || p.has_sequence_value())
      break;
    auto t = tensorFromProto(p.tensor_value(), path.str());
    if (!t)
      return t.takeError();
    s.elem = t->dtype;
    s.items.push_back(std::move(*t));
    return std::move(s);
  }
  case onnx::OptionalProto::SEQUENCE:
    if (others || p.has_tensor_value())
      break;
    s.ofSequence = true;
    if (auto e = sequenceFromProto(p.sequence_value(), path.str(), s))
      return std::move(e);
    return std::move(s);
  default:
    break;
  }
  return inputError("{0}: an optional {1}; only optional tensors and sequences of tensors "
                    "are supported",
                    path, onnx::OptionalProto::DataType_Name(p.elem_type()));
}

llvm::Expected<NamedSequence> mpc::readSequenceNpz(llvm::StringRef path) {
  auto members = readNpzFile(path);
  if (!members)
    return members.takeError();
  NamedSequence s;
  s.items.resize(members->size());
  std::vector<bool> seen(members->size(), false);
  for (NamedTensor &m : *members) {
    llvm::StringRef name = m.name;
    size_t idx;
    if (!name.consume_front("arr_") || name.getAsInteger(10, idx) || idx >= seen.size() ||
        seen[idx])
      return inputError("{0}: member '{1}' is not one of arr_0 ... arr_{2} (a sequence "
                        ".npz is what numpy.savez(FILE, *arrays) writes)",
                        path, m.name, members->size() - 1);
    seen[idx] = true;
    s.items[idx] = std::move(m.tensor);
  }
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (i && s.items[i].dtype != s.elem)
      return inputError("{0}: arr_{1} is {2}, arr_0 is {3}", path, i,
                        dtypeName(s.items[i].dtype), dtypeName(s.elem));
    s.elem = s.items[i].dtype;
  }
  return std::move(s);
}

static void tensorToProto(const HostTensor &t, onnx::TensorProto &tp) {
  for (int64_t d : t.shape)
    tp.add_dims(d);
  tp.set_data_type(int(t.dtype));
  tp.set_raw_data(t.bytes.data(), t.bytes.size());
}

/// Fills a SequenceProto with the tensors of `s`.
static void sequenceToProto(const NamedSequence &s, onnx::SequenceProto &p) {
  p.set_elem_type(onnx::SequenceProto::TENSOR);
  for (const HostTensor &t : s.items)
    tensorToProto(t, *p.add_tensor_values());
}

std::string mpc::serializeSequencePb(const NamedSequence &s) {
  onnx::SequenceProto p;
  p.set_name(s.name);
  sequenceToProto(s, p);
  return p.SerializeAsString();
}

std::string mpc::serializeOptionalPb(const NamedSequence &s) {
  onnx::OptionalProto p;
  p.set_name(s.name);
  // An empty optional has elem_type UNDEFINED (as onnx.numpy_helper writes it).
  if (!s.hasValue) {
    p.set_elem_type(onnx::OptionalProto::UNDEFINED);
  } else if (s.ofSequence) {
    p.set_elem_type(onnx::OptionalProto::SEQUENCE);
    sequenceToProto(s, *p.mutable_sequence_value());
  } else {
    p.set_elem_type(onnx::OptionalProto::TENSOR);
    tensorToProto(s.items.at(0), *p.mutable_tensor_value());
  }
  return p.SerializeAsString();
}
