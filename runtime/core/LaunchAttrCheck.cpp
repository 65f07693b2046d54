//===- LaunchAttrCheck.cpp - Report attribute reads at launch -------------===//
#include "LaunchAttrCheck.h"
#include "mpc/IR/AttrReadHook.h"
#include "mpc/IR/Graph.h"
#include "mpc/Support/Diagnostics.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

using namespace mpc;

static bool checkEnabled() {
  static const bool on = [] {
    const char *v = std::getenv("MPC_CHECK_LAUNCH_ATTRS");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

static std::mutex gMutex;
static int gDepth = 0; // nested scopes (control-flow bodies run inside a launch)

static void reportRead(const Node &n, llvm::StringRef attrName) {
  std::lock_guard<std::mutex> lock(gMutex);
  static std::set<std::string> seen;
  std::string key = n.qualifiedOpType() + " " + attrName.str();
  if (!seen.insert(key).second)
    return;
  std::fprintf(stderr, "mpc: check: %s reads attribute %s at launch (node %s)\n",
               n.qualifiedOpType().c_str(), quoteName(attrName).c_str(),
               quoteName(n.name).c_str());
}

LaunchAttrScope::LaunchAttrScope() : active(checkEnabled()) {
  if (!active)
    return;
  std::lock_guard<std::mutex> lock(gMutex);
  if (gDepth++ == 0)
    gAttrReadHook.store(reportRead);
}

LaunchAttrScope::~LaunchAttrScope() {
  if (!active)
    return;
  std::lock_guard<std::mutex> lock(gMutex);
  if (--gDepth == 0)
    gAttrReadHook.store(nullptr);
}
