"""Small ONNX models built with onnx.helper for the Python API tests."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper


def save(model: onnx.ModelProto, path) -> str:
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def conv_net(dynamic: bool = True) -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm over an image of any batch and
    size (symbolic N, H, W), with metadata set."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(8).astype(np.float32)
    fc = rng.standard_normal((8, 5)).astype(np.float32)
    dims = ["N", 3, "H", "W"] if dynamic else [1, 3, 16, 16]
    nodes = [
        helper.make_node("Conv", ["image", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "conv_net",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       ["N" if dynamic else 1, 5])],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
         helper.make_tensor("b", TensorProto.FLOAT, b.shape, b),
         helper.make_tensor("fc", TensorProto.FLOAT, fc.shape, fc.ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="peregrine-tests", doc_string="a test model")
    model.model_version = 3
    helper.set_model_props(model, {"author": "tests", "classes": "5"})
    return model


def passthrough_net() -> onnx.ModelProto:
    """Outputs that alias memory someone else owns: an input (Identity) and a weight."""
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"]),
         helper.make_node("Identity", ["c"], ["weight"])],
        "passthrough",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("same", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("weight", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("c", TensorProto.FLOAT, c.shape, c.ravel())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def typed_net() -> onnx.ModelProto:
    """Int64, bool and string inputs: Add on int64, Not on bool, Identity on strings."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["i", "i"], ["i2"]),
         helper.make_node("Not", ["b"], ["nb"]),
         helper.make_node("Identity", ["s"], ["s2"])],
        "typed",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2]),
         helper.make_tensor_value_info("b", TensorProto.BOOL, [3]),
         helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("i2", TensorProto.INT64, [2, 2]),
         helper.make_tensor_value_info("nb", TensorProto.BOOL, [3]),
         helper.make_tensor_value_info("s2", TensorProto.STRING, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul_chain(n: int = 384, depth: int = 24) -> onnx.ModelProto:
    """A chain of square MatMuls: a run long enough to watch other Python threads run."""
    rng = np.random.default_rng(1)
    inits, nodes, prev = [], [], "x"
    for k in range(depth):
        w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        inits.append(helper.make_tensor(f"w{k}", TensorProto.FLOAT, w.shape, w.ravel()))
        nodes.append(helper.make_node("MatMul", [prev, f"w{k}"], [f"y{k}"]))
        prev = f"y{k}"
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [n, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def conv_model(tmp_path):
    return save(conv_net(), tmp_path / "conv_net.onnx")


@pytest.fixture
def passthrough_model(tmp_path):
    return save(passthrough_net(), tmp_path / "passthrough.onnx")


@pytest.fixture
def typed_model(tmp_path):
    return save(typed_net(), tmp_path / "typed.onnx")
