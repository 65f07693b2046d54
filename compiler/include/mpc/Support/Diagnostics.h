//===- Diagnostics.h - Errors about the input model -------------*- C++ -*-===//
//
// Errors caused by the input (bad model, bad flag, bad environment) are
// llvm::Error values carrying one line that names what is wrong and where.
// Bugs are asserts, never Errors.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_SUPPORT_DIAGNOSTICS_H
#define MPC_SUPPORT_DIAGNOSTICS_H

#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include <cstdint>
#include <string>
#include <utility>

namespace mpc {

class Node;

/// An error about the user's input. The message is one lower-case line.
class InputError : public llvm::ErrorInfo<InputError> {
public:
  static char ID;
  explicit InputError(std::string msg) : message(std::move(msg)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }
  const std::string &getMessage() const { return message; }

private:
  std::string message;
};

/// `name` made safe to print inside quotes on one line: backslash, both
/// quote characters, control characters (newline, tab, ...), invalid UTF-8
/// and the Unicode line, paragraph and bidirectional-override characters are
/// escaped (\\, \', \", \n, \t, \r, \xNN); other text, UTF-8 included, is
/// kept. Names come from the model or the command line and must not be able
/// to forge a second line or a closing quote in a message.
std::string escapeName(llvm::StringRef name);
/// A whole message made one line: control characters (newline, carriage
/// return, tab, ...), invalid UTF-8 and the Unicode line, paragraph and
/// bidirectional-override characters escaped as escapeName does; quotes and
/// backslashes kept. What the CLI applies to every error and warning it
/// prints, so that text quoted from elsewhere (a library's message holding a
/// name from the model) cannot add a line either.
std::string oneLine(llvm::StringRef message);
/// escapeName(name) in single quotes: how every node, value, graph,
/// attribute, op and file name is written in messages.
std::string quoteName(llvm::StringRef name);

namespace detail {
/// Bit i set when the format string writes argument i as '{i}' (quoted).
uint64_t quotedArgs(const char *fmt);
/// An argument of inputError, escaped (escapeName) when it is quoted.
template <typename T> struct MessageArg {
  const T &value;
  bool escape;
};
template <typename... Ts, size_t... I>
std::string formatMessage(const char *fmt, std::index_sequence<I...>, const Ts &...vals) {
  uint64_t quoted = quotedArgs(fmt);
  return llvm::formatv(fmt, MessageArg<Ts>{vals, I < 64 && ((quoted >> I) & 1) != 0}...).str();
}
} // namespace detail

/// Creates an InputError from a formatv() format string. An argument written
/// between single quotes ('{0}', a name) is escaped with escapeName (wherever
/// else it also appears), so a name holding a newline or a quote cannot split
/// or forge the message.
template <typename... Ts> llvm::Error inputError(const char *fmt, Ts &&...vals) {
  return llvm::make_error<InputError>(
      detail::formatMessage(fmt, std::index_sequence_for<Ts...>(), vals...));
}

/// formatv() for messages and logs, escaping the quoted arguments ('{0}') as
/// inputError does.
template <typename... Ts> std::string formatQuoted(const char *fmt, Ts &&...vals) {
  return detail::formatMessage(fmt, std::index_sequence_for<Ts...>(), vals...);
}

/// "node 'name' (OpType)" for messages; "node #<order> (OpType)" when unnamed.
std::string describeNode(const Node &n);
/// The same for a node not (yet) in the IR: its name, its position in its
/// graph and its op type as Node::qualifiedOpType gives it.
std::string describeNode(llvm::StringRef name, uint64_t order, llvm::StringRef qualifiedOpType);

} // namespace mpc

template <typename T> struct llvm::format_provider<mpc::detail::MessageArg<T>> {
  static void format(const mpc::detail::MessageArg<T> &a, llvm::raw_ostream &os,
                     llvm::StringRef style) {
    std::string text = style.empty()
                           ? llvm::formatv("{0}", a.value).str()
                           : llvm::formatv(("{0:" + style + "}").str().c_str(), a.value).str();
    os << (a.escape ? mpc::escapeName(text) : text);
  }
};

#endif // MPC_SUPPORT_DIAGNOSTICS_H
