"""The `--device NAME` option of the Python op suites (docs/testing.md section 6).

A suite that runs nodes through `mpc run` takes `--device NAME` and passes it on as
`mpc run --device NAME`. Before running anything it probes the device with a one-node model:

  - the probe runs: the suite runs on the device;
  - mpc refuses the device itself (exit 1 and the one line `mpc: error: --device NAME: REASON`,
    what `mpc run` says for a build without that backend or a machine without the device): the
    suite prints `skipped: device 'NAME' is not available: REASON` and exits with 77, the skip
    code ctest is told about;
  - anything else (a crash, another message, a wrong result): the suite fails, so an unavailable
    device can never hide a broken one.
"""

import os
import subprocess
import sys
import tempfile

SKIP = 77


def add_device_option(parser):
    parser.add_argument("--device", default="cpu",
                        help="backend to run the nodes on (passed to `mpc run --device`)")


def probe(mpc, device):
    """None when `device` runs a one-node model; the reason from mpc's refusal line when mpc
    says the device is not available; raises RuntimeError on any other outcome."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    with tempfile.TemporaryDirectory(prefix="mpc_device_") as tmp:
        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "probe",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        path = os.path.join(tmp, "probe.onnx")
        onnx.save(model, path)
        x = os.path.join(tmp, "x.npy")
        np.save(x, np.array([-1.0, 0.5, 2.0], dtype=np.float32))
        out = os.path.join(tmp, "out")
        r = subprocess.run([mpc, "run", path, "--device", device, "--input", f"x={x}",
                            "--outputs", out], capture_output=True, text=True, timeout=120)
        lines = r.stderr.strip().splitlines()
        prefix = f"mpc: error: --device {device}: "
        if r.returncode == 1 and len(lines) == 1 and lines[0].startswith(prefix):
            return lines[0][len(prefix):]
        if r.returncode != 0:
            raise RuntimeError(f"probe of device '{device}' failed (exit {r.returncode}): "
                               f"{r.stderr.strip()}")
        y = np.load(os.path.join(out, "y.npy"))
        if not np.array_equal(y, np.array([0.0, 0.5, 2.0], dtype=np.float32)):
            raise RuntimeError(f"probe of device '{device}' computed Relu wrong: {y}")
        return None


def skip_unless_available(mpc, device):
    """Exits with SKIP (one line on stdout) when `device` is not available; exits 1 when the
    probe fails in any other way; returns when the suite can run on `device`."""
    try:
        reason = probe(mpc, device)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    if reason is not None:
        print(f"skipped: device '{device}' is not available: {reason}")
        sys.exit(SKIP)
