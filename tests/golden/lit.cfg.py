# -*- Python -*-
# lit configuration of mpc's golden suite (docs/testing.md section 3): every `.mpc` file
# under tests/golden/ is a test; its `// RUN:` lines run `mpc rewrite` on the
# file itself (the text parser skips `//` comments) and check the printed
# model and the decision log with FileCheck.
#
# Normally loaded from the build folder's lit.site.cfg.py, which CMake fills
# in. Loaded directly (lit run on the source tree), it needs the build folder:
#   lit -sv --param mpc_build=<build folder> tests/golden/amp-color
import os

import lit.formats

config.name = "mpc-golden"
config.suffixes = [".mpc"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
# bash, not lit's internal shell: the tests use `2>&1 >/dev/null` (the
# internal shell sends both streams to /dev/null there) and `$?`.
config.test_format = lit.formats.ShTest(execute_external=True)
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py.in"]

if not getattr(config, "mpc_tool", None):
    # No site config: find the build folder from --param mpc_build=DIR.
    build = lit_config.params.get("mpc_build")
    if not build:
        lit_config.fatal("run lit on the build folder's tests/golden, or pass "
                         "--param mpc_build=<build folder>")
    build = os.path.abspath(build)
    config.mpc_tool = os.path.join(build, "tools", "mpc")
    config.test_exec_root = os.path.join(build, "tests", "golden-lit")
    tools_dir = "/usr/lib/llvm-14/bin"
    config.filecheck = os.path.join(tools_dir, "FileCheck")
    config.not_tool = os.path.join(tools_dir, "not")
    config.split_file = os.path.join(tools_dir, "split-file")
    config.count_tool = os.path.join(tools_dir, "count")
    config.llvm_tools_dir = tools_dir

for tool in (config.mpc_tool, config.filecheck, config.not_tool, config.split_file,
             config.count_tool):
    if not os.path.exists(tool):
        lit_config.fatal("missing tool: %s (build the 'mpc' target first; FileCheck, "
                         "not, count and split-file come from Debian's llvm-14-tools)" % tool)

# A word in command position only: `not` inside a quoted message or a path
# (`--check-prefix=NOT`, `/not/`) is left alone.
def _tool(name):
    return r"(?<![\w./=-])" + name + r"(?![\w./-])"

config.substitutions.append(("%mpc", config.mpc_tool))
config.substitutions.append((_tool("FileCheck"), config.filecheck))
config.substitutions.append((_tool("split-file"), config.split_file))
config.substitutions.append((_tool("not"), config.not_tool))
config.substitutions.append((_tool("count"), config.count_tool))

# A clean, fixed environment: lit passes only a few variables through, so no
# MPC_* variable of the caller's shell can change a result (mpc rejects
# unknown MPC_ variables and honours the known ones).
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["LC_ALL"] = "C"
for var in list(config.environment):
    if var.startswith("MPC_"):
        del config.environment[var]
