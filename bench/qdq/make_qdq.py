#!/usr/bin/env python3
"""QDQ int8 versions of float models, made with ONNX Runtime's static quantizer.

  python3 bench/qdq/make_qdq.py MODEL.onnx... [-o DIR] [--calib N] [--per-tensor] [--seed S]

Each MODEL.onnx becomes DIR/MODEL.qdq.onnx (default DIR: ~/.cache/peregrine/qdq): QDQ format,
uint8 activations (asymmetric), int8 weights (symmetric), per-channel weight scales unless
--per-tensor, calibrated by min/max over N seeded random inputs (default 8) shaped like the
model's inputs (dynamic dimensions become 1). Integer inputs (token ids) are drawn from [0, 100).
These are the files a user gets from `onnxruntime.quantization.quantize_static`; ONNX Runtime,
OpenVINO and Peregrine all run them, so they compare int8 engines on one file.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
            onnx.TensorProto.INT32: np.int32}


def input_specs(model):
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        t = inp.type.tensor_type
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        if t.elem_type not in NP_TYPES:
            sys.exit(f"make_qdq: input '{inp.name}' has element type {t.elem_type}, "
                     "which this script cannot draw")
        specs.append((inp.name, dims, NP_TYPES[t.elem_type]))
    return specs


class RandomReader(CalibrationDataReader):
    def __init__(self, specs, count, seed):
        rng = np.random.default_rng(seed)
        self.batches = []
        for _ in range(count):
            feed = {}
            for name, dims, dtype in specs:
                if dtype == np.float32:
                    feed[name] = rng.standard_normal(dims).astype(np.float32)
                else:
                    feed[name] = rng.integers(0, 100, dims).astype(dtype)
            self.batches.append(feed)
        self.it = iter(self.batches)

    def get_next(self):
        return next(self.it, None)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("-o", "--out-dir", default=os.path.expanduser("~/.cache/peregrine/qdq"))
    p.add_argument("--calib", type=int, default=8, help="random calibration inputs")
    p.add_argument("--per-tensor", action="store_true", help="one scale per weight tensor")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for path in args.models:
        base = os.path.splitext(os.path.basename(path))[0]
        pre = os.path.join(args.out_dir, base + ".pre.onnx")
        out = os.path.join(args.out_dir, base + ".qdq.onnx")
        quant_pre_process(path, pre, skip_symbolic_shape=True)
        specs = input_specs(onnx.load(pre, load_external_data=False))
        quantize_static(pre, out, RandomReader(specs, args.calib, args.seed),
                        quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=not args.per_tensor)
        os.remove(pre)
        print(out)


if __name__ == "__main__":
    main()
