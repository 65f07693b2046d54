"""Hand-built training models following docs/training.md, for the loss-scaling tests.

mlp_training_model() builds a 2-layer MLP (Gemm -> Relu -> Gemm) with an MSE loss written with
Sub/Mul/ReduceMean, gradients written with standard ONNX ops (Gemm with transA/transB, ReduceSum
for the bias gradients, Where/Greater for the relu gradient), SGD with momentum and an int64
step counter. Nothing here depends on mpc: the model is what a builder following the contract
would write.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _const(name, value, dtype=np.float32):
    arr = np.array(value, dtype=dtype)
    return helper.make_node("Constant", [], [name], name=name + "/Constant",
                            value=numpy_helper.from_array(arr, name))


def mlp_training_model(batch=4, din=8, hidden=16, dout=4, lr=0.05, momentum=0.9, seed=7,
                       with_metadata=True, loss_grad_fp32=True, data_name="X"):
    """data_name: the algorithm's data input; docs/training.md says it is the inference
    input's name ("X"); another name gives a model mpc's importer accepts while it rejects
    an algorithm input that shadows an inference-graph input."""
    rng = np.random.default_rng(seed)
    W1 = (rng.standard_normal((din, hidden)) * 0.5).astype(np.float32)
    b1 = (rng.standard_normal(hidden) * 0.1).astype(np.float32)
    W2 = (rng.standard_normal((hidden, dout)) * 0.5).astype(np.float32)
    b2 = (rng.standard_normal(dout) * 0.1).astype(np.float32)
    params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}

    # Inference graph.
    inits = [numpy_helper.from_array(v, k) for k, v in params.items()]
    inits += [numpy_helper.from_array(np.zeros_like(v), k + ".momentum") for k, v in params.items()]
    inits.append(numpy_helper.from_array(np.array(0, dtype=np.int64), "step"))
    inf_nodes = [
        helper.make_node("Gemm", ["X", "W1", "b1"], ["h1"], name="fc1"),
        helper.make_node("Relu", ["h1"], ["a1"], name="relu1"),
        helper.make_node("Gemm", ["a1", "W2", "b2"], ["Y"], name="fc2"),
    ]
    graph = helper.make_graph(inf_nodes, "mlp",
                              [helper.make_tensor_value_info("X", F, [batch, din])],
                              [helper.make_tensor_value_info("Y", F, [batch, dout])], inits)

    # Algorithm graph: forward copy, loss, backward, optimizer.
    fp32_nodes = []
    nodes = [
        helper.make_node("Gemm", [data_name, "W1", "b1"], ["t/h1"], name="t/fc1"),
        helper.make_node("Relu", ["t/h1"], ["t/a1"], name="t/relu1"),
        helper.make_node("Gemm", ["t/a1", "W2", "b2"], ["t/Y"], name="t/fc2"),
        # loss = mean((Y - labels)^2)
        helper.make_node("Sub", ["t/Y", "labels"], ["loss/diff"], name="loss/Sub"),
        helper.make_node("Mul", ["loss/diff", "loss/diff"], ["loss/sq"], name="loss/Mul"),
        helper.make_node("ReduceMean", ["loss/sq"], ["loss"], name="loss/ReduceMean", keepdims=0),
    ]
    fp32_nodes += ["loss/Sub", "loss/Mul", "loss/ReduceMean"]
    n_elem = batch * dout
    grad_nodes = [
        _const("grad/seed", 1.0),
        _const("grad/two_over_n", 2.0 / n_elem),
        helper.make_node("Mul", ["grad/seed", "grad/two_over_n"], ["grad/dsq"], name="grad/dsq"),
        helper.make_node("Mul", ["loss/diff", "grad/dsq"], ["grad/dY"], name="grad/dY"),
    ]
    nodes += grad_nodes
    if loss_grad_fp32:
        fp32_nodes += ["grad/seed/Constant", "grad/dsq", "grad/dY"]
    nodes += [
        helper.make_node("Gemm", ["t/a1", "grad/dY"], ["grad/W2"], name="grad/fc2_W", transA=1),
        _const("grad/axes0", [0], np.int64),
        helper.make_node("ReduceSum", ["grad/dY", "grad/axes0"], ["grad/b2"], name="grad/fc2_b",
                         keepdims=0),
        helper.make_node("Gemm", ["grad/dY", "W2"], ["grad/a1"], name="grad/fc2_X", transB=1),
        _const("grad/zero", 0.0),
        helper.make_node("Greater", ["t/h1", "grad/zero"], ["grad/relu_mask"], name="grad/relu_mask"),
        helper.make_node("Where", ["grad/relu_mask", "grad/a1", "grad/zero"], ["grad/h1"],
                         name="grad/relu"),
        helper.make_node("Gemm", [data_name, "grad/h1"], ["grad/W1"], name="grad/fc1_W", transA=1),
        helper.make_node("ReduceSum", ["grad/h1", "grad/axes0"], ["grad/b1"], name="grad/fc1_b",
                         keepdims=0),
        _const("opt/lr", lr),
        _const("opt/mu", momentum),
    ]
    outputs = [helper.make_tensor_value_info("loss", F, [])]
    bindings = []
    for p, v in params.items():
        nodes += [
            helper.make_node("Mul", ["opt/mu", p + ".momentum"], [f"opt/{p}/mv"], name=f"opt/{p}/mv"),
            helper.make_node("Add", [f"opt/{p}/mv", "grad/" + p], [f"opt/{p}/v"], name=f"opt/{p}/v"),
            helper.make_node("Mul", ["opt/lr", f"opt/{p}/v"], [f"opt/{p}/dp"], name=f"opt/{p}/dp"),
            helper.make_node("Sub", [p, f"opt/{p}/dp"], [f"opt/{p}/new"], name=f"opt/{p}/new"),
        ]
        fp32_nodes += [f"opt/{p}/mv", f"opt/{p}/v", f"opt/{p}/dp", f"opt/{p}/new"]
        outputs.append(helper.make_tensor_value_info(f"opt/{p}/new", F, list(v.shape)))
        bindings.append((p, f"opt/{p}/new"))
    for p, v in params.items():
        outputs.append(helper.make_tensor_value_info(f"opt/{p}/v", F, list(v.shape)))
        bindings.append((p + ".momentum", f"opt/{p}/v"))
    nodes += [
        _const("opt/one", 1, np.int64),
        helper.make_node("Add", ["step", "opt/one"], ["opt/step/new"], name="opt/step"),
    ]
    fp32_nodes += ["opt/step"]
    outputs.append(helper.make_tensor_value_info("opt/step/new", TensorProto.INT64, []))
    bindings.append(("step", "opt/step/new"))
    alg = helper.make_graph(nodes, "mlp/train",
                            [helper.make_tensor_value_info(data_name, F, [batch, din]),
                             helper.make_tensor_value_info("labels", F, [batch, dout])],
                            outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    ti = model.training_info.add()
    ti.algorithm.CopyFrom(alg)
    for k, v in bindings:
        e = ti.update_binding.add()
        e.key, e.value = k, v
    if with_metadata:
        md = {
            "mpc.training.loss": "loss",
            "mpc.training.loss_grad_seed": "grad/seed",
            "mpc.training.gradients": "\n".join(f"{p}=grad/{p}" for p in params),
            "mpc.training.labels": "labels",
            "mpc.training.predictions": "Y",
            "mpc.training.loss_kind": "mse",
            "mpc.training.optimizer": f"sgd lr={lr} momentum={momentum}",
            "mpc.training.step_counter": "step",
            "mpc.training.fp32_nodes": "\n".join(fp32_nodes),
        }
        for k, v in md.items():
            helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props}, k: v})
    return model


def mlp_data(batch=4, din=8, dout=4, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, din)).astype(np.float32)
    labels = rng.standard_normal((batch, dout)).astype(np.float32)
    return {"X": X, "labels": labels}


if __name__ == "__main__":
    # ls_models.py OUT.onnx [--contract-names] [--no-metadata]: writes the MLP training model
    # (the algorithm input is "t/X" unless --contract-names asks for the inference input's name).
    import sys
    args = sys.argv[1:]
    m = mlp_training_model(data_name="X" if "--contract-names" in args else "t/X",
                           with_metadata="--no-metadata" not in args)
    onnx.checker.check_model(m, full_check=True)
    outs = [a for a in args if not a.startswith("--")]
    onnx.save(m, outs[0] if outs else "/tmp/mlp_train.onnx")
