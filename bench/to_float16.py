#!/usr/bin/env python3
"""A float32 ONNX model stored in float16, as `.half()` before export leaves it:

    python3 bench/to_float16.py MODEL.onnx OUT.onnx

Every float32 initializer, Constant value and graph input / output becomes float16, and every
Cast to float32 a Cast to float16; value_info is dropped (shapes are inferred again). Used to
measure how engines run float16 models (docs/PERFORMANCE.md, "Models stored in float16")."""

import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
    return model


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    onnx.save(to_float16(onnx.load(sys.argv[1])), sys.argv[2])


if __name__ == "__main__":
    main()
