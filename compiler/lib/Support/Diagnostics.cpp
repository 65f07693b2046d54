//===- Diagnostics.cpp - Errors about the input model ----------------------===//
#include "mpc/Support/Diagnostics.h"
#include "mpc/IR/Graph.h"
#include "llvm/ADT/StringExtras.h"

using namespace mpc;

char InputError::ID;

/// Length of the valid UTF-8 sequence at the start of `s` and its code point;
/// 0 when it is not one (overlong, surrogate, truncated, beyond U+10FFFF).
static unsigned utf8Sequence(llvm::StringRef s, uint32_t &cp) {
  auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  uint8_t c = b(0);
  unsigned len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (c >= 0xF5 || len == 0 || s.size() < len)
    return 0;
  cp = c & (0x7F >> len);
  for (unsigned i = 1; i < len; ++i) {
    if ((b(i) & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (b(i) & 0x3F);
  }
  bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

/// Code points that move text to another line or reorder it on a terminal.
static bool isLayoutControl(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x200E && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

/// escapeName's body; with `keepQuotes`, backslashes and quotes are kept.
static std::string escapeText(llvm::StringRef name, bool keepQuotes);

std::string mpc::escapeName(llvm::StringRef name) { return escapeText(name, false); }

std::string mpc::oneLine(llvm::StringRef message) { return escapeText(message, true); }

static std::string escapeText(llvm::StringRef name, bool keepQuotes) {
  std::string out;
  out.reserve(name.size());
  auto hex = [&](uint8_t c) {
    out += "\\x";
    out += llvm::hexdigit(c >> 4, /*LowerCase=*/true);
    out += llvm::hexdigit(c & 15, /*LowerCase=*/true);
  };
  for (size_t i = 0; i < name.size();) {
    uint8_t c = static_cast<uint8_t>(name[i]);
    if (c >= 0x80) {
      uint32_t cp = 0;
      unsigned len = utf8Sequence(name.substr(i), cp);
      if (len && !isLayoutControl(cp)) {
        out.append(name.data() + i, len);
        i += len;
      } else {
        for (unsigned k = 0, n = len ? len : 1; k < n; ++k)
          hex(static_cast<uint8_t>(name[i + k]));
        i += len ? len : 1;
      }
      continue;
    }
    ++i;
    if (keepQuotes && (c == '\\' || c == '\'' || c == '"')) {
      out += static_cast<char>(c);
      continue;
    }
    switch (c) {
    case '\\':
      out += "\\\\";
      continue;
    case '\'':
      out += "\\'";
      continue;
    case '"':
      out += "\\\"";
      continue;
    case '\n':
      out += "\\n";
      continue;
    case '\r':
      out += "\\r";
      continue;
    case '\t':
      out += "\\t";
      continue;
    default:
      if (c < 0x20 || c == 0x7F)
        hex(c);
      else
        out += static_cast<char>(c);
    }
  }
  return out;
}

std::string mpc::quoteName(llvm::StringRef name) { return "'" + escapeName(name) + "'"; }

uint64_t mpc::detail::quotedArgs(const char *fmt) {
  uint64_t bits = 0;
  llvm::StringRef s(fmt);
  for (size_t at = s.find("'{"); at != llvm::StringRef::npos; at = s.find("'{", at + 1)) {
    llvm::StringRef rest = s.substr(at + 2);
    size_t digits = rest.find_first_not_of("0123456789");
    if (digits == 0 || digits == llvm::StringRef::npos || digits > 2 ||
        !rest.substr(digits).startswith("}'"))
      continue;
    unsigned index = 0;
    if (!rest.substr(0, digits).getAsInteger(10, index) && index < 64)
      bits |= uint64_t(1) << index;
  }
  return bits;
}

std::string mpc::describeNode(const Node &n) {
  return describeNode(n.name, n.order(), n.qualifiedOpType());
}

std::string mpc::describeNode(llvm::StringRef name, uint64_t order,
                              llvm::StringRef qualifiedOpType) {
  std::string where =
      name.empty() ? llvm::formatv("node #{0}", order).str() : "node " + quoteName(name);
  // The op type is the file's text too: escaped like a name (a known op's
  // is unchanged).
  return llvm::formatv("{0} ({1})", where, escapeName(qualifiedOpType)).str();
}
