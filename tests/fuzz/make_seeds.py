"""Seeds an empty fuzz corpus: python3 tests/fuzz/make_seeds.py TARGET DIR.

model_load, pipeline: the model.onnx of every ONNX node test the pinned onnx wheel ships, and
the models of the malformed-model corpus (tests/robustness/make_corpus.py).
tensor_proto: the TensorProto files of those node tests (their inputs and outputs).
npy: small .npy files of every dtype numpy writes, 0-d, empty, Fortran-ordered, big-endian.
"""
import glob
import io
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "robustness"))


def node_test_dirs():
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    return sorted(glob.glob(os.path.join(root, "*")))


def copy(src, dst_dir, name):
    shutil.copyfile(src, os.path.join(dst_dir, name))


def seed_models(dst):
    for d in node_test_dirs():
        model = os.path.join(d, "model.onnx")
        if os.path.exists(model):
            copy(model, dst, os.path.basename(d) + ".onnx")
    import make_corpus
    with tempfile.TemporaryDirectory() as root:
        for name, _code, _pattern, _extra in make_corpus.cases(root):
            model = os.path.join(root, name, "model.onnx")
            if os.path.exists(model):
                copy(model, dst, "malformed_" + name.replace("/", "_") + ".onnx")


def seed_tensor_protos(dst):
    for d in node_test_dirs():
        for pb in glob.glob(os.path.join(d, "test_data_set_0", "*.pb")):
            copy(pb, dst, os.path.basename(d) + "_" + os.path.basename(pb))


def seed_npy(dst):
    arrays = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f16": np.ones((2, 3), np.float16),
        "f64_scalar": np.array(1.5),
        "i64_empty": np.zeros((0, 3), np.int64),
        "u8": np.arange(7, dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "i32_fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
        "f32_big_endian": np.arange(4, dtype=">f4"),
        "i8_4d": np.zeros((1, 2, 1, 3), np.int8),
    }
    for name, a in arrays.items():
        buf = io.BytesIO()
        np.save(buf, a)
        with open(os.path.join(dst, name + ".npy"), "wb") as f:
            f.write(buf.getvalue())


def main():
    target, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    if target in ("model_load", "pipeline"):
        seed_models(dst)
    elif target == "tensor_proto":
        seed_tensor_protos(dst)
    elif target == "npy":
        seed_npy(dst)
    else:
        sys.exit(f"unknown fuzz target '{target}'")
    print(f"seeded {len(os.listdir(dst))} inputs into {dst}")


if __name__ == "__main__":
    main()
