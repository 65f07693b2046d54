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
#include <string>

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

/// Creates an InputError from a formatv() format string.
template <typename... Ts> llvm::Error inputError(const char *fmt, Ts &&...vals) {
  return llvm::make_error<InputError>(llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

/// "node 'name' (OpType)" for messages; "node #<order> (OpType)" when unnamed.
std::string describeNode(const Node &n);
/// The same for a node not (yet) in the IR: its name, its position in its
/// graph and its op type as Node::qualifiedOpType gives it.
std::string describeNode(llvm::StringRef name, uint64_t order, llvm::StringRef qualifiedOpType);

} // namespace mpc

#endif // MPC_SUPPORT_DIAGNOSTICS_H
