#!/usr/bin/env python3
"""Writes onnx's node tests as test data (model.onnx, test_data_set_N/{input,output}_K.pb) from
the case definitions an onnx wheel ships (onnx/backend/test/case/node), for onnx versions whose
wheel carries no generated data (1.18 and newer):

    PY=~/.cache/peregrine/onnx-1.23-venv/bin/python   # a venv with the onnx to test against
    $PY tests/conformance/generate_node_tests.py -o ~/.cache/peregrine/onnx-1.23-node

numpy's global generator is seeded first, so cases that draw random inputs are the same on every
run. The folder is then run like the bundled suite:
    build/bin/peregrine_conformance --data ~/.cache/peregrine/onnx-1.23-node
"""

import argparse
import os
import shutil

import numpy as np
import onnx
from onnx import numpy_helper


def write_value(path, value, type_proto, name):
    if type_proto.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif type_proto.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif type_proto.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    elif isinstance(value, onnx.TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    np.random.seed(0)
    from onnx.backend.test.case import node

    cases = node.collect_testcases()
    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    for case in cases:
        out = os.path.join(args.output, case.name)
        os.makedirs(out)
        with open(os.path.join(out, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            d = os.path.join(out, f"test_data_set_{i}")
            os.makedirs(d)
            for j, value in enumerate(inputs):
                write_value(os.path.join(d, f"input_{j}.pb"), value, graph.input[j].type,
                            graph.input[j].name)
            for j, value in enumerate(outputs):
                write_value(os.path.join(d, f"output_{j}.pb"), value, graph.output[j].type,
                            graph.output[j].name)
    print(f"onnx {onnx.__version__}: {len(cases)} node tests written to {args.output}")


if __name__ == "__main__":
    main()
