//===- OnnxTestUtil.h - Building ModelProtos in tests -----------*- C++ -*-===//
//
// Small builders for hand-written ONNX protos and temporary folders, shared
// by the import/export tests.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_TESTS_UNIT_ONNXTESTUTIL_H
#define MPC_TESTS_UNIT_ONNXTESTUTIL_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace mpc {
namespace test {

/// Sets a tensor type; each dim is a number, "?" (unknown) or a symbolic name.
inline void setTensorType(onnx::TypeProto &tp, int elem, std::vector<std::string> dims,
                          bool withShape = true) {
  auto *tt = tp.mutable_tensor_type();
  tt->set_elem_type(elem);
  if (!withShape)
    return;
  auto *shape = tt->mutable_shape();
  for (const std::string &d : dims) {
    auto *dim = shape->add_dim();
    if (d == "?")
      continue;
    if (!d.empty() && (isdigit(static_cast<unsigned char>(d[0]))))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

inline onnx::ValueInfoProto *
addValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> *list, const std::string &name,
         int elem, std::vector<std::string> dims) {
  auto *vi = list->Add();
  vi->set_name(name);
  setTensorType(*vi->mutable_type(), elem, std::move(dims));
  return vi;
}

inline onnx::NodeProto *addNode(onnx::GraphProto &g, const std::string &op,
                                std::vector<std::string> ins, std::vector<std::string> outs,
                                const std::string &name = "", const std::string &domain = "") {
  auto *n = g.add_node();
  n->set_op_type(op);
  for (const std::string &i : ins)
    n->add_input(i);
  for (const std::string &o : outs)
    n->add_output(o);
  if (!name.empty())
    n->set_name(name);
  if (!domain.empty())
    n->set_domain(domain);
  return n;
}

inline onnx::AttributeProto *addAttr(onnx::NodeProto &n, const std::string &name,
                                     onnx::AttributeProto::AttributeType type) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}

inline void addOpset(onnx::ModelProto &p, const std::string &domain, int64_t version) {
  auto *o = p.add_opset_import();
  o->set_domain(domain);
  o->set_version(version);
}

/// A float tensor given as float_data.
inline onnx::TensorProto floatTensor(const std::string &name, std::vector<int64_t> dims,
                                     std::vector<float> vals) {
  onnx::TensorProto t;
  if (!name.empty())
    t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    t.add_dims(d);
  for (float v : vals)
    t.add_float_data(v);
  return t;
}

/// The smallest valid model: y = Relu(x).
inline onnx::ModelProto tinyModel() {
  onnx::ModelProto p;
  p.set_ir_version(8);
  addOpset(p, "", 17);
  auto *g = p.mutable_graph();
  g->set_name("tiny");
  addValue(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {"4"});
  addNode(*g, "Relu", {"x"}, {"y"});
  addValue(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {"4"});
  return p;
}

inline std::string serialize(const onnx::ModelProto &p) {
  std::string s;
  p.SerializeToString(&s);
  return s;
}

/// A fresh temporary folder, removed with its files (not recursively into
/// subfolders other than one level) when the object dies.
class TempDir {
public:
  TempDir() {
    llvm::SmallString<128> p;
    if (!llvm::sys::fs::createUniqueDirectory("mpc-unit", p))
      dir = std::string(p);
    llvm::SmallString<128> real;
    if (!llvm::sys::fs::real_path(dir, real))
      dir = std::string(real);
  }
  ~TempDir() { removeTree(dir); }
  const std::string &path() const { return dir; }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  void write(llvm::StringRef name, llvm::StringRef bytes) const {
    std::error_code ec;
    llvm::raw_fd_ostream os(file(name), ec);
    os << bytes;
  }

private:
  std::string dir;
  static void removeTree(const std::string &d) {
    std::error_code ec;
    std::vector<std::string> entries;
    for (llvm::sys::fs::directory_iterator it(d, ec), e; it != e && !ec; it.increment(ec))
      entries.push_back(it->path());
    for (const std::string &p : entries) {
      llvm::sys::fs::file_status st;
      if (!llvm::sys::fs::status(p, st, /*follow=*/false) &&
          st.type() == llvm::sys::fs::file_type::directory_file)
        removeTree(p);
      else
        llvm::sys::fs::remove(p);
    }
    llvm::sys::fs::remove(d);
  }
};

} // namespace test
} // namespace mpc

#endif // MPC_TESTS_UNIT_ONNXTESTUTIL_H
