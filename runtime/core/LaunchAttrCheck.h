//===- LaunchAttrCheck.h - Report attribute reads at launch -----*- C++ -*-===//
//
// Kernels read their attributes from the parameter struct their registry
// row parsed when the node was prepared, never from the node while
// launching. With MPC_CHECK_LAUNCH_ATTRS=1 in the environment, the executor
// wraps its launches in a LaunchAttrScope, and every attribute a kernel
// reads inside one is reported once per (op, attribute) on stderr:
//
//   mpc: check: Transpose reads attribute 'perm' at launch (node 't0')
//
// The launch-read test (tests/runtime_exec/test_launch_attrs.py) runs the
// shipped models, the conformance node models and a training graph this way.
// Off (the default), a scope costs one test of a cached flag.
//
//===----------------------------------------------------------------------===//
#ifndef MPC_RUNTIME_CORE_LAUNCHATTRCHECK_H
#define MPC_RUNTIME_CORE_LAUNCHATTRCHECK_H

namespace mpc {

/// While alive (and the check is on), attribute reads are reported.
class LaunchAttrScope {
public:
  LaunchAttrScope();
  ~LaunchAttrScope();
  LaunchAttrScope(const LaunchAttrScope &) = delete;
  LaunchAttrScope &operator=(const LaunchAttrScope &) = delete;

private:
  bool active;
};

} // namespace mpc

#endif // MPC_RUNTIME_CORE_LAUNCHATTRCHECK_H
