//===- OpTestMain.cpp - main() of the device-parameterised kernel tests ---===//
//
// Takes the devices to test from `--device NAME` (repeatable; NAME may be a
// comma-separated list) before handing the remaining arguments to GoogleTest,
// so the suites are instantiated for exactly those devices. Without the
// option, MPC_TEST_DEVICES or every available device is used
// (OpTester.h, selectedDevices). When every named device is unavailable here
// the binary prints one line saying why and exits with 77, the skip code the
// ctest registrations declare, so "no CUDA in this build" is a skip, never a
// failure.
//
// A case whose node the device has no kernel for runs on the CPU instead and is
// counted; the counts are printed after the tests (OpTester.h, runOrFail).
// `--no-fallback` makes such a case a failure.
//
//===----------------------------------------------------------------------===//
#include "OpTester.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::vector<std::string> devices;
  std::vector<char *> rest;
  bool badUsage = false;
  int consumed = 0; // options taken here that are not --device

  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    llvm::StringRef value;
    if (arg == "--device") {
      if (i + 1 >= argc) {
        badUsage = true;
        break;
      }
      value = argv[++i];
    } else if (arg == "--no-fallback") {
      mpc::optest::setNoKernelFallback(false);
      ++consumed;
      continue;
    } else if (arg.consume_front("--device=")) {
      value = arg;
    } else {
      rest.push_back(argv[i]);
      continue;
    }
    llvm::SmallVector<llvm::StringRef, 4> parts;
    value.split(parts, ',', -1, false);
    for (llvm::StringRef p : parts)
      devices.push_back(p.trim().str());
  }
  if (badUsage || (devices.empty() && rest.size() + size_t(consumed) != size_t(argc))) {
    std::fprintf(stderr, "%s: error: --device needs a device name (known: cpu, cuda)\n",
                 argv[0]);
    return 2;
  }
  if (devices.empty() && std::getenv("MPC_TEST_DEVICES"))
    devices = mpc::optest::selectedDevices();
  if (!devices.empty()) {
    std::vector<std::string> available;
    std::string firstReason;
    std::vector<std::string> known = mpc::optest::knownDevices();
    for (const std::string &d : devices) {
      if (std::find(known.begin(), known.end(), d) == known.end()) {
        std::fprintf(stderr, "%s: error: unknown device '%s' (known: cpu, cuda)\n", argv[0],
                     d.c_str());
        return 2;
      }
      std::string why = mpc::optest::unavailableReason(d);
      if (why.empty())
        available.push_back(d);
      else if (firstReason.empty())
        firstReason = why;
    }
    if (available.empty()) {
      std::printf("skipped: %s\n", firstReason.c_str());
      return 77;
    }
    // Devices named but unavailable stay selected: their cases skip with the
    // reason, next to the ones that run.
    mpc::optest::selectDevices(devices);
  }
  int n = int(rest.size());
  rest.push_back(nullptr);
  ::testing::InitGoogleTest(&n, rest.data());
  int rc = RUN_ALL_TESTS();
  // What ran on the CPU for want of a device kernel, last, so a device run says
  // how much of it the device itself computed.
  std::fputs(mpc::optest::noKernelSummary().c_str(), stdout);
  return rc;
}
