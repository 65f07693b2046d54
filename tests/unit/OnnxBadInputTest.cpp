//===- OnnxBadInputTest.cpp - Import errors --------------------------------===//
//
// Every malformed input is an Error with one line naming what is wrong and
// where, never a crash: each case checks the expected message substring.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"
#include "mpc/IO/Onnx.h"
#include "gtest/gtest.h"

using namespace mpc;
using namespace mpc::test;
using onnx::TensorProto;

namespace {

std::string importError(llvm::StringRef bytes, llvm::StringRef dir = ".") {
  auto m = importOnnxBytes(bytes, dir);
  if (m) {
    ADD_FAILURE() << "imported unexpectedly";
    return "";
  }
  std::string msg = llvm::toString(m.takeError());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  return msg;
}

std::string importError(const onnx::ModelProto &p, llvm::StringRef dir = ".") {
  return importError(serialize(p), dir);
}

#define EXPECT_CONTAINS(haystack, needle)                                                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                                 \
      << "message: " << (haystack) << "\nexpected to contain: " << (needle)

/// tinyModel() plus a float initializer `w` stored externally at `location`.
onnx::ModelProto withExternal(const std::string &location) {
  onnx::ModelProto p = tinyModel();
  TensorProto *t = p.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(TensorProto::EXTERNAL);
  auto *e = t->add_external_data();
  e->set_key("location");
  e->set_value(location);
  return p;
}

} // namespace

TEST(OnnxBadInput, NotAProtobuf) {
  EXPECT_CONTAINS(importError("this is not an onnx model"), "not a valid ONNX model");
}

TEST(OnnxBadInput, TruncatedFile) {
  onnx::ModelProto p = tinyModel();
  *p.mutable_graph()->add_initializer() = floatTensor("w", {64}, std::vector<float>(64, 1));
  std::string bytes = serialize(p);
  EXPECT_CONTAINS(importError(llvm::StringRef(bytes).take_front(bytes.size() / 2)),
                  "not a valid ONNX model");
}

TEST(OnnxBadInput, FileErrorsNameThePath) {
  TempDir dir;
  dir.write("junk.onnx", "this is not an onnx model");
  auto m = importOnnxFile(dir.file("junk.onnx"));
  ASSERT_FALSE(bool(m));
  std::string msg = llvm::toString(m.takeError());
  EXPECT_CONTAINS(msg, dir.file("junk.onnx") + ": not a valid ONNX model");
  auto missing = importOnnxFile(dir.file("missing.onnx"));
  ASSERT_FALSE(bool(missing));
  EXPECT_CONTAINS(llvm::toString(missing.takeError()), "cannot read");
  auto folder = importOnnxFile(dir.path());
  ASSERT_FALSE(bool(folder));
  EXPECT_CONTAINS(llvm::toString(folder.takeError()), "is a directory");
}

TEST(OnnxBadInput, UnsupportedIrVersion) {
  onnx::ModelProto p = tinyModel();
  p.set_ir_version(99);
  EXPECT_CONTAINS(importError(p), "unsupported IR version 99");
  p.set_ir_version(2);
  EXPECT_CONTAINS(importError(p), "unsupported IR version 2");
  p.set_ir_version(15);
  EXPECT_CONTAINS(importError(p), "unsupported IR version 15 (mpc reads 3 to 14)");
  // onnx 1.23 writes IR version 14 by default: read (the GPU machine's onnx, 2026-11-26).
  p.set_ir_version(14);
  auto v14 = importOnnxBytes(serialize(p), ".");
  EXPECT_TRUE(bool(v14)) << (v14 ? "" : llvm::toString(v14.takeError()));
  p.clear_graph();
  p.set_ir_version(8);
  EXPECT_CONTAINS(importError(p), "the model has no graph");
}

TEST(OnnxBadInput, Cycle) {
  onnx::ModelProto p = tinyModel();
  onnx::GraphProto &g = *p.mutable_graph();
  addNode(g, "Add", {"x", "b"}, {"a"});
  addNode(g, "Neg", {"a"}, {"b"});
  EXPECT_CONTAINS(importError(p), "graph 'tiny': the nodes form a cycle");
}

TEST(OnnxBadInput, UndefinedInput) {
  onnx::ModelProto p = tinyModel();
  addNode(*p.mutable_graph(), "Neg", {"nope"}, {"z"}, "neg1");
  EXPECT_CONTAINS(importError(p), "node 'neg1' (Neg) uses 'nope', which is not defined");
}

TEST(OnnxBadInput, UndefinedOutput) {
  onnx::ModelProto p = tinyModel();
  addValue(p.mutable_graph()->mutable_output(), "ghost", TensorProto::FLOAT, {});
  EXPECT_CONTAINS(importError(p), "output 'ghost' is not defined");
}

TEST(OnnxBadInput, DuplicateValueNames) {
  onnx::ModelProto p = tinyModel();
  addNode(*p.mutable_graph(), "Neg", {"x"}, {"y"}, "again");
  EXPECT_CONTAINS(importError(p), "node 'again' (Neg) defines 'y', which is already defined");

  onnx::ModelProto q = tinyModel();
  addValue(q.mutable_graph()->mutable_input(), "x", TensorProto::FLOAT, {});
  EXPECT_CONTAINS(importError(q), "value name 'x' is defined twice");

  // A body may not redefine a name its enclosing graph defines.
  onnx::ModelProto r = tinyModel();
  addValue(r.mutable_graph()->mutable_input(), "c", TensorProto::BOOL, {});
  auto *ifNode = addNode(*r.mutable_graph(), "If", {"c"}, {"z"});
  auto *body = addAttr(*ifNode, "then_branch", onnx::AttributeProto::GRAPH)->mutable_g();
  body->set_name("body");
  addNode(*body, "Neg", {"x"}, {"y"});
  addValue(body->mutable_output(), "y", TensorProto::FLOAT, {});
  EXPECT_CONTAINS(importError(r), "defines 'y', which is already defined");
}

TEST(OnnxBadInput, DuplicateOpsetDomain) {
  onnx::ModelProto p = tinyModel();
  addOpset(p, "", 18);
  EXPECT_CONTAINS(importError(p), "opset_import lists domain '' twice");
}

TEST(OnnxBadInput, WrongElementCount) {
  onnx::ModelProto p = tinyModel();
  *p.mutable_graph()->add_initializer() = floatTensor("w", {4}, {1, 2, 3});
  EXPECT_CONTAINS(importError(p), "initializer 'w': has 3 values, its shape needs 4");

  onnx::ModelProto q = tinyModel();
  TensorProto *t = q.mutable_graph()->add_initializer();
  t->set_name("r");
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(4);
  t->set_raw_data(std::string(8, '\0'));
  EXPECT_CONTAINS(importError(q), "initializer 'r': raw data has 8 bytes, its shape needs 16 (f32 [4])");

  onnx::ModelProto n = tinyModel();
  *n.mutable_graph()->add_initializer() = floatTensor("neg", {-1}, {});
  EXPECT_CONTAINS(importError(n), "negative dimension -1");
}

// A shape whose element count overflows 64 bits (found by the fuzzer: it
// overflowed Tensor::numElements) is refused at import.
TEST(OnnxBadInput, ShapeTooLarge) {
  onnx::ModelProto p = tinyModel();
  TensorProto *t = p.mutable_graph()->add_initializer();
  t->set_name("huge");
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(int64_t(1) << 40);
  t->add_dims(int64_t(1) << 40);
  EXPECT_CONTAINS(importError(p), "initializer 'huge': shape is too large");
}

TEST(OnnxBadInput, UnknownElementType) {
  onnx::ModelProto p = tinyModel();
  p.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(99);
  EXPECT_CONTAINS(importError(p), "input 'x': unknown element type 99");
}

TEST(OnnxBadInput, ExternalLocationAbsolute) {
  EXPECT_CONTAINS(importError(withExternal("/etc/passwd")),
                  "external data location '/etc/passwd' must be a relative path inside the "
                  "model's folder");
}

TEST(OnnxBadInput, ExternalLocationWithDotDot) {
  TempDir dir;
  EXPECT_CONTAINS(importError(withExternal("sub/../../w.bin"), dir.path()),
                  "external data location 'sub/../../w.bin' escapes the model's folder");
  EXPECT_CONTAINS(importError(withExternal("../w.bin"), dir.path()), "escapes the model's folder");
}

TEST(OnnxBadInput, ExternalSymlinkOutsideTheFolder) {
  TempDir outside, dir;
  outside.write("secret.bin", std::string(16, 'x'));
  ASSERT_FALSE(llvm::sys::fs::create_link(outside.file("secret.bin"), dir.file("link.bin")));
  EXPECT_CONTAINS(importError(withExternal("link.bin"), dir.path()),
                  "external data location 'link.bin' resolves outside the model's folder");
  // A symlink that stays inside the folder is fine.
  dir.write("real.bin", std::string(16, '\0'));
  ASSERT_FALSE(llvm::sys::fs::create_link(dir.file("real.bin"), dir.file("inside.bin")));
  auto m = importOnnxBytes(serialize(withExternal("inside.bin")), dir.path());
  EXPECT_TRUE(bool(m)) << llvm::toString(m.takeError());
}

TEST(OnnxBadInput, ExternalFileMissingOrShort) {
  TempDir dir;
  EXPECT_CONTAINS(importError(withExternal("missing.bin"), dir.path()),
                  "external data file 'missing.bin' not found");
  dir.write("short.bin", std::string(8, '\0'));
  EXPECT_CONTAINS(importError(withExternal("short.bin"), dir.path()),
                  "external data file 'short.bin' is shorter than offset + length");
  onnx::ModelProto p = withExternal("short.bin");
  auto *len = p.mutable_graph()->mutable_initializer(0)->add_external_data();
  len->set_key("length");
  len->set_value("12");
  EXPECT_CONTAINS(importError(p, dir.path()), "external data length 12 does not match its shape");
  auto *off = p.mutable_graph()->mutable_initializer(0)->add_external_data();
  off->set_key("offset");
  off->set_value("-4");
  EXPECT_CONTAINS(importError(p, dir.path()), "external data offset '-4' is not a non-negative");
}

// The main graph's nodes are read straight from the wire bytes; a malformed
// one is a parse error like anywhere else, and it wins over an input error
// found before it (the undefined input of 'neg1').
TEST(OnnxBadInput, MalformedNodeInTheMainGraph) {
  onnx::ModelProto p = tinyModel();
  addNode(*p.mutable_graph(), "Neg", {"nope"}, {"z"}, "neg1");
  addNode(*p.mutable_graph(), "Abs", {"y"}, {"w"});
  std::string bytes = serialize(p);
  size_t at = bytes.find("Abs");
  ASSERT_NE(at, std::string::npos);
  bytes[at - 2] = '\x27'; // op_type's tag with wire type 7, which does not exist
  EXPECT_CONTAINS(importError(bytes), "not a valid ONNX model");
  bytes[at - 2] = '\x22'; // repaired: the input error
  EXPECT_CONTAINS(importError(bytes), "node 'neg1' (Neg) uses 'nope', which is not defined");
}

// A file whose wire import fails is parsed whole afterwards, from the same
// buffer: the buffer must outlive the failed import's model, which shared
// it. Files of 16 KiB and more are mapped (unmapped with their last owner:
// a crash), smaller ones read onto the heap (freed: a wrong message). Each
// size gives the input error, through the file entry the tools use.
TEST(OnnxBadInput, FailedFileImportKeepsItsBuffer) {
  TempDir dir;
  for (int64_t n : {16, 8192, 65536}) {
    onnx::ModelProto p = tinyModel();
    TensorProto *t = p.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(TensorProto::DOUBLE); // 8 bytes an element: twice the data given
    t->add_dims(n);
    t->set_raw_data(std::string(static_cast<size_t>(n) * 4, '\x01'));
    dir.write("m.onnx", serialize(p));
    auto m = importOnnxFile(dir.file("m.onnx"));
    ASSERT_FALSE(bool(m));
    EXPECT_EQ(llvm::toString(m.takeError()),
              dir.file("m.onnx") + ": graph 'tiny', initializer 'w': raw data has " +
                  std::to_string(n * 4) + " bytes, its shape needs " + std::to_string(n * 8) +
                  " (f64 [" + std::to_string(n) + "])");
  }
}

// External data missing or short, from a file large enough to be mapped.
TEST(OnnxBadInput, ExternalDataErrorsFromAMappedFile) {
  TempDir dir;
  onnx::ModelProto p = withExternal("w.bin");
  *p.mutable_graph()->add_initializer() = floatTensor("big", {8192}, std::vector<float>(8192, 1));
  dir.write("m.onnx", serialize(p));
  auto missing = importOnnxFile(dir.file("m.onnx"));
  ASSERT_FALSE(bool(missing));
  EXPECT_EQ(llvm::toString(missing.takeError()),
            dir.file("m.onnx") +
                ": graph 'tiny', initializer 'w': external data file 'w.bin' not found");
  dir.write("w.bin", std::string(8, '\0'));
  auto shortFile = importOnnxFile(dir.file("m.onnx"));
  ASSERT_FALSE(bool(shortFile));
  EXPECT_EQ(llvm::toString(shortFile.takeError()),
            dir.file("m.onnx") + ": graph 'tiny', initializer 'w': external data file 'w.bin' "
                                 "is shorter than offset + length");
}
