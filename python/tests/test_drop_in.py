"""An application written for onnxruntime (python/examples/crop_classifier.py) run unchanged
with peregrine.InferenceSession passed in place of onnxruntime's, crop sizes changing."""

import os
import sys

import numpy as np
import onnxruntime as ort

import peregrine

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from crop_classifier import CropClassifier, make_model, random_crops  # noqa: E402


def test_application_runs_unchanged(tmp_path):
    path = make_model(str(tmp_path / "crop_classifier.onnx"))
    crops = random_crops(12)
    theirs = CropClassifier(ort.InferenceSession(path, providers=["CPUExecutionProvider"]))
    session = peregrine.InferenceSession(path, providers=["CPUExecutionProvider"])
    mine = CropClassifier(session)
    for frame in range(3):
        expected, got = theirs(crops), mine(crops)
        for a, b in zip(expected, got):
            assert [c for c, _ in a] == [c for c, _ in b]
            np.testing.assert_allclose([p for _, p in a], [p for _, p in b], rtol=1e-4)
    stats = session.plan_stats()
    # Each (batch, size) signature ran once on the dynamic plan, then on its own compiled plan.
    signatures = len({c.shape for c in crops})
    assert signatures == 3
    assert stats["compiles"] == signatures and stats["dynamic_runs"] == signatures
    assert stats["planned_runs"] == 2 * signatures
