"""An application written against ONNX Runtime's API, run unchanged on Peregrine.

CropClassifier takes image crops of any size (as a detector or an OCR stage hands them over),
groups crops of equal size into one batch, runs a fully convolutional classifier and returns
the top classes. It only calls what onnxruntime.InferenceSession offers (get_inputs,
get_outputs, run), so either session class can be passed in:

    python python/examples/crop_classifier.py            # both engines, results compared
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any, Dict, List, Tuple

import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


class CropClassifier:
    def __init__(self, session: Any, top_k: int = 3) -> None:
        self.session = session
        self.input_name = session.get_inputs()[0].name
        self.output_name = session.get_outputs()[0].name
        self.top_k = top_k

    def __call__(self, crops: List[np.ndarray]) -> List[List[Tuple[int, float]]]:
        """crops: HxWx3 uint8 images. Returns per crop [(class, probability)] best first."""
        by_size: Dict[Tuple[int, int], List[int]] = defaultdict(list)
        for k, crop in enumerate(crops):
            by_size[crop.shape[:2]].append(k)
        results: List[List[Tuple[int, float]]] = [[] for _ in crops]
        for indices in by_size.values():
            batch = np.stack([self.preprocess(crops[k]) for k in indices])
            (probs,) = self.session.run([self.output_name], {self.input_name: batch})
            for k, p in zip(indices, probs):
                best = np.argsort(-p)[: self.top_k]
                results[k] = [(int(c), float(p[c])) for c in best]
        return results

    @staticmethod
    def preprocess(crop: np.ndarray) -> np.ndarray:
        x = (crop.astype(np.float32) / 255.0 - MEAN) / STD
        return np.ascontiguousarray(x.transpose(2, 0, 1))


def make_model(path: str, classes: int = 10, seed: int = 0) -> str:
    """A small fully convolutional classifier (three stride-2 conv blocks with batch norm,
    global pooling, a linear layer, softmax) over images of any batch, height and width."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    inits, nodes, prev, cin = [], [], "image", 3
    for k, cout in enumerate((16, 32, 64)):
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (9 * cin))).astype(np.float32)
        inits += [helper.make_tensor(f"w{k}", TensorProto.FLOAT, w.shape, w.ravel())]
        for name, value in (("scale", 1 + 0.1 * rng.standard_normal(cout)),
                            ("bias", 0.1 * rng.standard_normal(cout)),
                            ("mean", 0.1 * rng.standard_normal(cout)),
                            ("var", 1 + 0.1 * rng.random(cout))):
            inits.append(helper.make_tensor(f"{name}{k}", TensorProto.FLOAT, [cout],
                                            value.astype(np.float32)))
        nodes += [
            helper.make_node("Conv", [prev, f"w{k}"], [f"c{k}"], strides=[2, 2],
                             pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", [f"c{k}", f"scale{k}", f"bias{k}", f"mean{k}",
                                                    f"var{k}"], [f"bn{k}"]),
            helper.make_node("Relu", [f"bn{k}"], [f"r{k}"]),
        ]
        prev, cin = f"r{k}", cout
    fc = (rng.standard_normal((cin, classes)) / np.sqrt(cin)).astype(np.float32)
    inits.append(helper.make_tensor("fc", TensorProto.FLOAT, fc.shape, fc.ravel()))
    nodes += [
        helper.make_node("GlobalAveragePool", [prev], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["features"]),
        helper.make_node("MatMul", ["features", "fc"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "crop_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height",
                                                                    "width"])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                       ["batch", classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def random_crops(count: int, seed: int = 0) -> List[np.ndarray]:
    """Crops at a handful of sizes, as a detector's boxes come out."""
    rng = np.random.default_rng(seed)
    sizes = [(32, 96), (48, 48), (32, 96), (64, 40), (48, 48), (32, 96)]
    return [rng.integers(0, 256, (*sizes[k % len(sizes)], 3), dtype=np.uint8)
            for k in range(count)]


def main() -> int:
    import os
    import tempfile

    import onnxruntime

    import peregrine

    with tempfile.TemporaryDirectory() as tmp:
        path = make_model(os.path.join(tmp, "crop_classifier.onnx"))
        crops = random_crops(12)
        engines = {
            "onnxruntime": onnxruntime.InferenceSession(path,
                                                        providers=["CPUExecutionProvider"]),
            "peregrine": peregrine.InferenceSession(path, providers=["CPUExecutionProvider"]),
        }
        results = {}
        for name, session in engines.items():
            classify = CropClassifier(session)
            for _ in range(3):  # frames: the same crop sizes come back
                results[name] = classify(crops)
            print(f"{name:12s} crop 0: {results[name][0]}")
        same = all(a[0][0] == b[0][0] and abs(a[0][1] - b[0][1]) < 1e-4
                   for a, b in zip(results["onnxruntime"], results["peregrine"]))
        print("top-1 classes and probabilities agree:", same)
        print("peregrine shape plans:", engines["peregrine"].plan_stats())
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
