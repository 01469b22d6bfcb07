"""Peregrine as an ONNX backend (onnx.backend.base.Backend), so onnx's backend test suite and
tools written for that interface can run models on it:

    import peregrine.backend as backend
    rep = backend.prepare(model_proto)
    outputs = rep.run([x])
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ._session import InferenceSession, SessionOptions


class PeregrineRep(BackendRep):
    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self._names = [i.name for i in session.get_inputs()]

    def run(self, inputs: Any, **kwargs: Any) -> Tuple[Any, ...]:
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feed = dict(zip(self._names, inputs))
        return tuple(self._session.run(None, feed))


class PeregrineBackend(Backend):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> PeregrineRep:
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r}: Peregrine runs on CPU only")
        options = SessionOptions()
        options.intra_op_num_threads = int(kwargs.get("threads", 1))
        if isinstance(model, onnx.ModelProto):
            model = model.SerializeToString()
        return PeregrineRep(InferenceSession(model, options))

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> Tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Sequence[Tuple[np.dtype, Tuple[int, ...]]]] = None,
                 **kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
        """One node as a model of its own (inputs in node order; types from the arrays)."""
        arrays = [np.asarray(x) for x in inputs]
        graph_inputs = [
            onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in zip(node.input, arrays) if name]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(name)
                         for name in node.output if name]
        graph = onnx.helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        model = onnx.helper.make_model(graph, opset_imports=[
            onnx.helper.make_opsetid(domain, int(opset))])
        feed = {name: a for name, a in zip(node.input, arrays) if name}
        return cls.prepare(model, device).run(feed)


prepare = PeregrineBackend.prepare
run_model = PeregrineBackend.run_model
run_node = PeregrineBackend.run_node
supports_device = PeregrineBackend.supports_device
