"""Running commands from mpc's Python scripts: the CUDA host suites (tests/cuda_host) and the
GPU bundle's checks (tools/gpu_error_check.py), which the bundle carries with tools/.

- `clean_env(extra)`: this process's environment without the MPC_* switches (a developer's
  MPC_CHECK_LAUNCH_ATTRS or MPC_CUDA_FAIL_NODE would change what mpc prints) and without
  LD_DEBUG*, plus `extra`.
- `run(cmd, env=None, timeout=120)`: the command's CompletedProcess, output captured as text;
  every argument is passed through str(); `env` defaults to clean_env().
- `run_unittests(rest)`: runs this module's caller's unittest cases with the command line's
  remaining arguments, prints 'N passed, N failed' last and returns the exit status.
"""

import os
import subprocess
import sys
import unittest


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MPC_", "LD_DEBUG"))}
    env.update(extra or {})
    return env


def run(cmd, env=None, timeout=120, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, env=clean_env() if env is None else env, **kw)


def run_unittests(rest):
    r = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=1).result
    failed = len(r.failures) + len(r.errors)
    print(f"{r.testsRun - failed} passed, {failed} failed")
    return 1 if failed else 0
