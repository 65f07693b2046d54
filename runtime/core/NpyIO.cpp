//===- NpyIO.cpp - numpy .npy / .npz reading and writing --------------------===//
//
// A small parser for the .npy header dict, a zip central-directory reader
// for .npz (stored members only) and an atomic .npy writer.
//
//===----------------------------------------------------------------------===//
#include "mpc/Runtime/NpyIO.h"
#include "mpc/Support/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Path.h"
#include <cstring>
#include "llvm/Support/raw_ostream.h"
#include <unistd.h>

using namespace mpc;

static llvm::Optional<DType> dtypeFromDescr(llvm::StringRef d) {
  if (d.size() < 3 || (d[0] != '<' && d[0] != '|' && d[0] != '='))
    return llvm::None;
  llvm::StringRef k = d.drop_front();
  return llvm::StringSwitch<llvm::Optional<DType>>(k)
      .Case("f4", DType::F32)
      .Case("f2", DType::F16)
      .Case("f8", DType::F64)
      .Case("i1", DType::I8)
      .Case("i2", DType::I16)
      .Case("i4", DType::I32)
      .Case("i8", DType::I64)
      .Case("u1", DType::U8)
      .Case("u2", DType::U16)
      .Case("u4", DType::U32)
      .Case("u8", DType::U64)
      .Case("b1", DType::Bool)
      .Default(llvm::None);
}

static const char *descrOf(DType t) {
  switch (t) {
  case DType::F32: return "<f4";
  case DType::F16: return "<f2";
  case DType::F64: return "<f8";
  case DType::I8: return "|i1";
  case DType::I16: return "<i2";
  case DType::I32: return "<i4";
  case DType::I64: return "<i8";
  case DType::U8: return "|u1";
  case DType::U16: return "<u2";
  case DType::U32: return "<u4";
  case DType::U64: return "<u8";
  case DType::Bool: return "|b1";
  default: return nullptr;
  }
}

/// The value text of `'key': value` in the header dict.
static llvm::StringRef headerField(llvm::StringRef header, llvm::StringRef key) {
  size_t p = header.find(("'" + key + "'").str());
  if (p == llvm::StringRef::npos)
    return "";
  llvm::StringRef rest = header.drop_front(p + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return "";
  rest = rest.ltrim();
  if (rest.startswith("(")) {
    size_t e = rest.find(')');
    return e == llvm::StringRef::npos ? "" : rest.take_front(e + 1);
  }
  size_t e = rest.find_first_of(",}");
  return rest.take_front(e).trim();
}

static uint64_t physicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? uint64_t(pages) * uint64_t(size) : UINT64_MAX;
}

llvm::Expected<HostTensor> mpc::parseNpy(llvm::StringRef bytes, llvm::StringRef what) {
  auto bad = [&](const llvm::Twine &msg) {
    return inputError("{0}: not a valid .npy file: {1}", what, msg.str());
  };
  if (bytes.size() < 10 || !bytes.startswith("\x93NUMPY"))
    return bad("bad magic");
  unsigned major = uint8_t(bytes[6]);
  size_t headerLen, start;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = 0;
    for (int i = 3; i >= 0; --i)
      headerLen = (headerLen << 8) | uint8_t(bytes[8 + i]);
    start = 12;
  } else {
    return bad("unknown version " + llvm::Twine(major));
  }
  if (start + headerLen > bytes.size())
    return bad("truncated header");
  llvm::StringRef header = bytes.substr(start, headerLen);
  llvm::StringRef descr = headerField(header, "descr").trim("'\" ");
  llvm::StringRef order = headerField(header, "fortran_order");
  llvm::StringRef shapeText = headerField(header, "shape");
  if (descr.empty() || order.empty() || shapeText.empty())
    return bad("missing descr, fortran_order or shape");
  auto dt = dtypeFromDescr(descr);
  if (!dt)
    return inputError("{0}: unsupported .npy dtype '{1}'", what, descr);
  if (order != "False")
    return inputError("{0}: Fortran-order arrays are not supported", what);
  std::vector<int64_t> shape;
  llvm::StringRef dims = shapeText.trim("() ");
  while (!dims.empty()) {
    auto [tok, rest] = dims.split(',');
    tok = tok.trim();
    if (!tok.empty()) {
      int64_t d;
      if (tok.getAsInteger(10, d) || d < 0)
        return bad("bad shape " + shapeText);
      shape.push_back(d);
    }
    dims = rest;
  }
  // Overflow-safe size: each factor bounded by the file size so far.
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d && n > UINT64_MAX / 16 / uint64_t(d))
      return inputError("{0}: shape {1} is too large for memory", what, formatShape(shape));
    n *= uint64_t(d);
  }
  uint64_t need = n * runtimeElementSize(*dt);
  if (need > physicalMemory())
    return inputError("{0}: shape {1} ({2} bytes) is too large for memory", what,
                      formatShape(shape), need);
  if (bytes.size() - start - headerLen != need)
    return bad("data has " + llvm::Twine(bytes.size() - start - headerLen) +
               " bytes, shape " + formatShape(shape) + " needs " + llvm::Twine(need));
  HostTensor t(*dt, shape);
  if (need) // an empty tensor has no buffer, and memcpy takes no null pointer
    std::memcpy(t.bytes.data(), bytes.data() + start + headerLen, need);
  return t;
}

static llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return inputError("cannot read '{0}': {1}", path, buf.getError().message());
  return std::move(*buf);
}

llvm::Expected<HostTensor> mpc::readNpyFile(llvm::StringRef path) {
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  return parseNpy((*buf)->getBuffer(), path);
}

static uint32_t le32(const char *p) {
  return uint8_t(p[0]) | uint32_t(uint8_t(p[1])) << 8 | uint32_t(uint8_t(p[2])) << 16 |
         uint32_t(uint8_t(p[3])) << 24;
}
static uint16_t le16(const char *p) { return uint8_t(p[0]) | uint16_t(uint8_t(p[1])) << 8; }

llvm::Expected<std::vector<NamedTensor>> mpc::readNpzFile(llvm::StringRef path) {
  auto buf = readFile(path);
  if (!buf)
    return buf.takeError();
  llvm::StringRef z = (*buf)->getBuffer();
  auto bad = [&](const llvm::Twine &msg) {
    return inputError("{0}: not a valid .npz file: {1}", path, msg.str());
  };
  // End of central directory: the last "PK\5\6" within the final 64 KiB + 22.
  size_t eocd = llvm::StringRef::npos;
  for (size_t i = z.size() >= 22 ? z.size() - 22 : 0;; --i) {
    if (z.size() >= 22 && le32(z.data() + i) == 0x06054b50) {
      eocd = i;
      break;
    }
    if (i == 0 || z.size() - i > 65557)
      break;
  }
  if (eocd == llvm::StringRef::npos)
    return bad("no zip directory");
  uint16_t count = le16(z.data() + eocd + 10);
  uint64_t cd = le32(z.data() + eocd + 16);
  std::vector<NamedTensor> out;
  for (unsigned e = 0; e < count; ++e) {
    if (cd + 46 > z.size() || le32(z.data() + cd) != 0x02014b50)
      return bad("corrupt zip directory");
    const char *h = z.data() + cd;
    uint16_t method = le16(h + 10), nameLen = le16(h + 28), extraLen = le16(h + 30),
             commentLen = le16(h + 32);
    uint64_t csize = le32(h + 20), usize = le32(h + 24), local = le32(h + 42);
    if (cd + 46 + nameLen > z.size())
      return bad("corrupt zip directory");
    std::string name = z.substr(cd + 46, nameLen).str();
    if (method != 0)
      return inputError("{0}: member '{1}' is compressed; write the inputs with "
                        "numpy.savez, not savez_compressed",
                        path, name);
    if (csize == 0xffffffffu || usize == 0xffffffffu || local == 0xffffffffu)
      return inputError("{0}: member '{1}' needs zip64, which is not supported", path,
                        name);
    if (local + 30 > z.size() || le32(z.data() + local) != 0x04034b50)
      return bad("corrupt member " + quoteName(name));
    uint64_t data = local + 30 + le16(z.data() + local + 26) + le16(z.data() + local + 28);
    if (data + csize > z.size())
      return bad("truncated member " + quoteName(name));
    llvm::StringRef stem = name;
    stem.consume_back(".npy");
    auto t = parseNpy(z.substr(data, csize), (path + ":" + name).str());
    if (!t)
      return t.takeError();
    out.push_back(NamedTensor{stem.str(), std::move(*t)});
    cd += 46 + nameLen + extraLen + commentLen;
  }
  return out;
}

std::string mpc::serializeNpy(const HostTensor &in) {
  HostTensor widened;
  const HostTensor *t = &in;
  if (in.dtype == DType::BF16) {
    widened = llvm::cantFail(castHostTensor(in, DType::F32));
    t = &widened;
  }
  std::string shape = "(";
  for (int64_t d : t->shape)
    shape += std::to_string(d) + ", ";
  if (t->shape.size() > 1)
    shape.resize(shape.size() - 2);
  else if (t->shape.size() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = std::string("{'descr': '") + descrOf(t->dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char *>(t->bytes.data()), t->bytes.size());
  return out;
}

llvm::Error mpc::writeNpyFile(llvm::StringRef path, const HostTensor &t) {
  if (!descrOf(t.dtype == DType::BF16 ? DType::F32 : t.dtype))
    return inputError("cannot write '{0}': element type {1} has no .npy form", path,
                      dtypeName(t.dtype));
  // A temporary file in the same folder, then a rename: complete or absent.
  if (llvm::Error err =
          llvm::writeFileAtomically((path + ".tmp-%%%%%%").str(), path, serializeNpy(t)))
    return inputError("cannot write '{0}': {1}", path, llvm::toString(std::move(err)));
  return llvm::Error::success();
}
