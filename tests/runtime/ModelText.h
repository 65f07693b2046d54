//===- ModelText.h - A verified model from mpc's text form, for tests -*- C++ -*-===//
#ifndef MPC_TESTS_RUNTIME_MODELTEXT_H
#define MPC_TESTS_RUNTIME_MODELTEXT_H

#include "mpc/Text/Text.h"
#include "mpc/Verify/Verifier.h"
#include "gtest/gtest.h"
#include <memory>

namespace mpc {
namespace test {

/// The model `text` describes, verified; null (and a test failure) when it
/// does not parse or verify.
inline std::unique_ptr<Model> parseVerified(llvm::StringRef text) {
  auto m = parseModelText(text, "test.mpc");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  if (llvm::Error e = verifyModel(**m)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return std::move(*m);
}

} // namespace test
} // namespace mpc

#endif // MPC_TESTS_RUNTIME_MODELTEXT_H
