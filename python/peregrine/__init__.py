"""Peregrine: an inference engine for ONNX models, with a Python API shaped like ONNX Runtime's.

Code written against ``onnxruntime`` switches by changing the session class::

    import peregrine
    sess = peregrine.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    (logits,) = sess.run(None, {sess.get_inputs()[0].name: image})

See ``InferenceSession`` for what is zero-copy, how shapes that change between runs are
planned, and which ONNX Runtime options are read.
"""

from ._peregrine import InvalidArgument, InvalidGraph, NotImplemented, PeregrineError
from ._session import (
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    ModelMetadata,
    NodeArg,
    RunOptions,
    SessionOptions,
    get_all_providers,
    get_available_providers,
    get_device,
)
from ._lab import compare, profile

__version__ = "0.1.0"

# ONNX Runtime's name for errors a model raises while it runs.
Fail = PeregrineError


def get_version_string() -> str:
    return __version__


__all__ = [
    "ExecutionMode",
    "Fail",
    "GraphOptimizationLevel",
    "InferenceSession",
    "InvalidArgument",
    "InvalidGraph",
    "ModelMetadata",
    "NodeArg",
    "NotImplemented",
    "PeregrineError",
    "RunOptions",
    "SessionOptions",
    "compare",
    "get_all_providers",
    "get_available_providers",
    "get_device",
    "get_version_string",
    "profile",
]
