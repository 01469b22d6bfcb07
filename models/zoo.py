#!/usr/bin/env python3
"""Model zoo: writes ONNX models shaped like what torch.onnx.export (opset 17) produces.

Weights are seeded random numbers, scaled so activations keep a useful range through the
whole network (He init for convolutions, BatchNormalization near identity, 1/sqrt(fan_in) for
linear layers, a damped last BN in residual branches). Node and tensor names follow the
exporter's scheme ("/layer1/layer1.0/conv1/Conv", "..._output_0", "layer1.0.conv1.weight"),
so profiles read like those of real exported models.

  python3 models/zoo.py NAME... --out-dir DIR [--seed S] [--overwrite]
  python3 models/zoo.py --list
"""

import argparse
import math
import os
import sys
import tempfile
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # what torch writes for opset 17
# Additive attention-mask value of the original BERT export. (Newer HF uses float32 min, which
# overflows to +inf when a mask holds values other than 0/1, e.g. `peregrine run`'s random ints.)
MASK_VALUE = -10000.0


class Graph:
    """Accumulates nodes and initializers with exporter-style names."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.inputs = []
        self.outputs = []
        self._used_node_names = {}
        self._init_names = set()

    # --- tensors -------------------------------------------------------------------------
    def weight(self, name, array):
        assert name not in self._init_names, name
        self._init_names.add(name)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, name, shape, std, mean=0.0):
        values = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
        return self.weight(name, values + np.float32(mean))

    def uniform(self, name, shape, low, high):
        return self.weight(name, self.rng.uniform(low, high, shape).astype(np.float32))

    def input(self, name, elem_type, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, name, elem_type, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))

    # --- nodes ---------------------------------------------------------------------------
    def op(self, op_type, inputs, scope="", outputs=None, num_outputs=1, **attrs):
        """Adds a node named '<scope>/<op_type>[_k]'; returns its output name(s)."""
        base = f"{scope}/{op_type}"
        k = self._used_node_names.get(base, 0)
        self._used_node_names[base] = k + 1
        name = base if k == 0 else f"{base}_{k}"
        if outputs is None:
            outputs = [f"{name}_output_{i}" for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name,
                                           **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value, scope="", dtype=np.float32):
        """A Constant node, as torch emits for scalars and shape vectors."""
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype))
        return self.op("Constant", [], scope, value=tensor)

    def ints(self, values, scope=""):
        return self.const(values, scope, np.int64)

    def model(self, name, doc):
        graph = helper.make_graph(self.nodes, name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="peregrine-zoo", producer_version="1",
                                  doc_string=doc)
        model.ir_version = IR_VERSION
        return model


def scope_of(prefix):
    """Node scope of a module: 'model.2.m.0.cv1' -> '/model.2/m/0/cv1' (readable, exporter-like)."""
    parts = prefix.split(".")
    if len(parts) > 1 and parts[1].isdigit():  # 'features.3', 'model.2': one module each
        parts = [f"{parts[0]}.{parts[1]}"] + parts[2:]
    return "/" + "/".join(parts)


# --- building blocks (convolutional) ---------------------------------------------------------

def conv(g, x, prefix, scope, c_in, c_out, k, stride=1, pad=None, group=1, bias=False,
         gain=2.0):
    """Conv with He-scaled weights (gain 2 for ReLU-like activations, 1 for linear)."""
    pad = k // 2 if pad is None else pad
    fan_in = (c_in // group) * k * k
    w = g.normal(f"{prefix}.weight", (c_out, c_in // group, k, k), math.sqrt(gain / fan_in))
    inputs = [x, w]
    if bias:
        inputs.append(g.uniform(f"{prefix}.bias", (c_out,), -0.05, 0.05))
    return g.op("Conv", inputs, scope, dilations=[1, 1], group=group, kernel_shape=[k, k],
                pads=[pad] * 4, strides=[stride, stride])


def batch_norm(g, x, prefix, scope, channels, gamma=1.0):
    """BatchNormalization in eval form, parameters near identity."""
    r = g.rng
    scale = g.weight(f"{prefix}.weight",
                     (gamma * r.uniform(0.9, 1.1, channels)).astype(np.float32))
    shift = g.uniform(f"{prefix}.bias", (channels,), -0.05, 0.05)
    mean = g.uniform(f"{prefix}.running_mean", (channels,), -0.05, 0.05)
    var = g.uniform(f"{prefix}.running_var", (channels,), 0.9, 1.1)
    return g.op("BatchNormalization", [x, scale, shift, mean, var], scope, epsilon=1e-5,
                momentum=0.9)


def conv_bn(g, x, prefix, scope, bn_prefix, bn_scope, c_in, c_out, k, stride=1, group=1,
            gamma=1.0, gain=2.0):
    y = conv(g, x, prefix, scope, c_in, c_out, k, stride, group=group, gain=gain)
    return batch_norm(g, y, bn_prefix, bn_scope, c_out, gamma)


def classifier(g, x, prefix, scope, c_in, num_classes, output):
    """GlobalAveragePool, Flatten, Gemm (nn.Linear on a 2-D input)."""
    pooled = g.op("GlobalAveragePool", [x], "/avgpool" if scope == "/fc" else scope)
    flat = g.op("Flatten", [pooled], "", axis=1)
    w = g.normal(f"{prefix}.weight", (num_classes, c_in), math.sqrt(1.0 / c_in))
    b = g.uniform(f"{prefix}.bias", (num_classes,), -0.01, 0.01)
    return g.op("Gemm", [flat, w, b], scope, outputs=[output], alpha=1.0, beta=1.0, transB=1)


# --- transformer pieces --------------------------------------------------------------------

def linear(g, x, prefix, scope, d_in, d_out, std=None, output=None):
    """nn.Linear on a 3-D input: MatMul with the transposed weight, then Add the bias."""
    std = math.sqrt(1.0 / d_in) if std is None else std
    w = g.normal(f"onnx::MatMul_{prefix}", (d_in, d_out), std)
    b = g.uniform(f"{prefix}.bias", (d_out,), -0.02, 0.02)
    y = g.op("MatMul", [x, w], scope)
    return g.op("Add", [b, y], scope, outputs=None if output is None else [output])


def layer_norm(g, x, prefix, scope, dim, eps=1e-12, output=None):
    """LayerNorm decomposed the way pre-opset-17 torch exports it."""
    mean = g.op("ReduceMean", [x], scope, axes=[-1], keepdims=1)
    centered = g.op("Sub", [x, mean], scope)
    squared = g.op("Pow", [centered, g.const(2.0, scope)], scope)
    var = g.op("ReduceMean", [squared], scope, axes=[-1], keepdims=1)
    var_eps = g.op("Add", [var, g.const(eps, scope)], scope)
    std = g.op("Sqrt", [var_eps], scope)
    normed = g.op("Div", [centered, std], scope)
    gamma = g.weight(f"{prefix}.weight",
                     g.rng.uniform(0.9, 1.1, dim).astype(np.float32))
    beta = g.uniform(f"{prefix}.bias", (dim,), -0.02, 0.02)
    scaled = g.op("Mul", [normed, gamma], scope)
    return g.op("Add", [scaled, beta], scope, outputs=None if output is None else [output])


def gelu(g, x, scope):
    """erf-GELU: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    scaled = g.op("Div", [x, g.const(math.sqrt(2.0), scope)], scope)
    erf = g.op("Erf", [scaled], scope)
    one_plus = g.op("Add", [erf, g.const(1.0, scope)], scope)
    prod = g.op("Mul", [x, one_plus], scope)
    return g.op("Mul", [prod, g.const(0.5, scope)], scope)


def split_heads(g, x, scope, seq, heads, head_dim, perm):
    shaped = g.op("Reshape", [x, g.ints([1, seq, heads, head_dim], scope)], scope)
    return g.op("Transpose", [shaped], scope, perm=perm)


def attention(g, query_in, kv_in, prefix, scope, d, heads, q_len, kv_len, mask=None):
    """HF-style multi-head attention: projections, Q.K^T / sqrt(d), mask Add, Softmax."""
    head_dim = d // heads
    # Q and K at twice the 1/sqrt(d) scale: scores of std ~4 give peaked, not uniform, attention.
    qk_std = 2.0 / math.sqrt(d)
    q = linear(g, query_in, f"{prefix}.query", f"{scope}/query", d, d, std=qk_std)
    k = linear(g, kv_in, f"{prefix}.key", f"{scope}/key", d, d, std=qk_std)
    v = linear(g, kv_in, f"{prefix}.value", f"{scope}/value", d, d)
    qh = split_heads(g, q, scope, q_len, heads, head_dim, [0, 2, 1, 3])
    kt = split_heads(g, k, scope, kv_len, heads, head_dim, [0, 2, 3, 1])  # already K^T
    vh = split_heads(g, v, scope, kv_len, heads, head_dim, [0, 2, 1, 3])
    scores = g.op("MatMul", [qh, kt], scope)
    scores = g.op("Div", [scores, g.const(math.sqrt(head_dim), scope)], scope)
    if mask is not None:
        scores = g.op("Add", [scores, mask], scope)
    probs = g.op("Softmax", [scores], scope, axis=-1)
    context = g.op("MatMul", [probs, vh], scope)
    context = g.op("Transpose", [context], scope, perm=[0, 2, 1, 3])
    return g.op("Reshape", [context, g.ints([1, q_len, d], scope)], scope)


def encoder_layer(g, x, prefix, scope, d, heads, ff, seq, mask=None, pre_norm=False,
                  ln_eps=1e-12, output=None):
    """BERT (post-norm) or ViT (pre-norm) encoder layer."""
    if pre_norm:
        h = layer_norm(g, x, f"{prefix}.layernorm_before", f"{scope}/layernorm_before", d,
                       ln_eps)
        a = attention(g, h, h, f"{prefix}.attention.attention", f"{scope}/attention/attention",
                      d, heads, seq, seq)
        a = linear(g, a, f"{prefix}.attention.output.dense",
                   f"{scope}/attention/output/dense", d, d)
        x = g.op("Add", [a, x], scope)
        h = layer_norm(g, x, f"{prefix}.layernorm_after", f"{scope}/layernorm_after", d, ln_eps)
        h = linear(g, h, f"{prefix}.intermediate.dense", f"{scope}/intermediate/dense", d, ff)
        h = gelu(g, h, f"{scope}/intermediate/intermediate_act_fn")
        h = linear(g, h, f"{prefix}.output.dense", f"{scope}/output/dense", ff, d)
        return g.op("Add", [h, x], f"{scope}/output")
    a = attention(g, x, x, f"{prefix}.attention.self", f"{scope}/attention/self", d, heads, seq,
                  seq, mask)
    a = linear(g, a, f"{prefix}.attention.output.dense", f"{scope}/attention/output/dense", d, d)
    a = g.op("Add", [a, x], f"{scope}/attention/output")
    x = layer_norm(g, a, f"{prefix}.attention.output.LayerNorm",
                   f"{scope}/attention/output/LayerNorm", d, ln_eps)
    h = linear(g, x, f"{prefix}.intermediate.dense", f"{scope}/intermediate/dense", d, ff)
    h = gelu(g, h, f"{scope}/intermediate/intermediate_act_fn")
    h = linear(g, h, f"{prefix}.output.dense", f"{scope}/output/dense", ff, d)
    h = g.op("Add", [h, x], f"{scope}/output")
    return layer_norm(g, h, f"{prefix}.output.LayerNorm", f"{scope}/output/LayerNorm", d, ln_eps,
                      output)


# --- models --------------------------------------------------------------------------------

def build_tiny(g):
    """Conv+Relu+GlobalAveragePool+Flatten+Gemm on 1x3x32x32: a few ops, a few KB."""
    x = g.input("input", TensorProto.FLOAT, [1, 3, 32, 32])
    y = conv(g, x, "conv", "/conv", 3, 8, 3, bias=True)
    y = g.op("Relu", [y], "/relu")
    classifier(g, y, "fc", "/fc", 8, 10, "output")
    g.output("output", TensorProto.FLOAT, [1, 10])
    return "tiny: Conv+Relu+GlobalAveragePool+Gemm, 1x3x32x32 -> 1x10"


def build_resnet50(g):
    x = g.input("input", TensorProto.FLOAT, [1, 3, 224, 224])
    y = conv_bn(g, x, "conv1", "/conv1", "bn1", "/bn1", 3, 64, 7, stride=2)
    y = g.op("Relu", [y], "/relu")
    y = g.op("MaxPool", [y], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    c_in = 64
    for stage, (width, blocks, stride) in enumerate(
            [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        for b in range(blocks):
            p = f"layer{stage}.{b}"
            s = f"/layer{stage}/{p}"
            st = stride if b == 0 else 1
            h = conv_bn(g, y, f"{p}.conv1", f"{s}/conv1", f"{p}.bn1", f"{s}/bn1", c_in, width, 1)
            h = g.op("Relu", [h], f"{s}/relu")
            h = conv_bn(g, h, f"{p}.conv2", f"{s}/conv2", f"{p}.bn2", f"{s}/bn2", width, width,
                        3, stride=st)
            h = g.op("Relu", [h], f"{s}/relu_1")
            # A damped last BN keeps the residual sum's variance growing slowly.
            h = conv_bn(g, h, f"{p}.conv3", f"{s}/conv3", f"{p}.bn3", f"{s}/bn3", width,
                        width * 4, 1, gamma=0.3)
            shortcut = y
            if b == 0:
                shortcut = conv_bn(g, y, f"{p}.downsample.0", f"{s}/downsample/downsample.0",
                                   f"{p}.downsample.1", f"{s}/downsample/downsample.1", c_in,
                                   width * 4, 1, stride=st, gain=1.0)
            y = g.op("Add", [h, shortcut], s)
            y = g.op("Relu", [y], f"{s}/relu_2")
            c_in = width * 4
    classifier(g, y, "fc", "/fc", 2048, 1000, "output")
    g.output("output", TensorProto.FLOAT, [1, 1000])
    return "ResNet-50 (torchvision v1.5 layout), 1x3x224x224 -> 1x1000 logits"


def build_mobilenetv2(g):
    x = g.input("input", TensorProto.FLOAT, [1, 3, 224, 224])

    def conv_bn_relu6(y, p, c_in, c_out, k, stride=1, group=1):
        """Conv2dNormActivation: P.0 conv, P.1 bn, P.2 ReLU6 as Clip(min=0, max=6)."""
        s = scope_of(p)
        y = conv_bn(g, y, f"{p}.0", f"{s}/0", f"{p}.1", f"{s}/1", c_in, c_out, k, stride, group)
        return g.op("Clip", [y, g.const(0.0, s), g.const(6.0, s)], f"{s}/2")

    y = conv_bn_relu6(x, "features.0", 3, 32, 3, 2)
    c_in, idx = 32, 1
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c_in * t
            p = f"features.{idx}.conv"
            sc = scope_of(p)
            h, j = y, 0
            if t != 1:
                h = conv_bn_relu6(h, f"{p}.{j}", c_in, hidden, 1)
                j += 1
            h = conv_bn_relu6(h, f"{p}.{j}", hidden, hidden, 3, stride, group=hidden)
            h = conv(g, h, f"{p}.{j + 1}", f"{sc}/{j + 1}", hidden, c, 1, gain=1.0)
            h = batch_norm(g, h, f"{p}.{j + 2}", f"{sc}/{j + 2}", c,
                           gamma=0.5 if (stride == 1 and c_in == c) else 1.0)
            if stride == 1 and c_in == c:
                h = g.op("Add", [y, h], scope_of(f"features.{idx}"))
            y, c_in, idx = h, c, idx + 1
    y = conv_bn_relu6(y, f"features.{idx}", 320, 1280, 1)
    classifier(g, y, "classifier.1", "/classifier/classifier.1", 1280, 1000, "output")
    g.output("output", TensorProto.FLOAT, [1, 1000])
    return "MobileNetV2 (torchvision layout, ReLU6 as Clip), 1x3x224x224 -> 1x1000 logits"


def build_yolo(g):
    """A YOLOv8s-style detector with the ultralytics export head (DFL decode), 640x640."""
    num_classes, reg_max = 80, 16
    x = g.input("images", TensorProto.FLOAT, [1, 3, 640, 640])

    def cbs(y, p, c_in, c_out, k, stride=1, gamma=1.0):
        """Conv + BN + SiLU (Sigmoid * Mul)."""
        s = scope_of(p)
        y = conv(g, y, f"{p}.conv", f"{s}/conv", c_in, c_out, k, stride)
        y = batch_norm(g, y, f"{p}.bn", f"{s}/bn", c_out, gamma)
        sig = g.op("Sigmoid", [y], f"{s}/act")
        return g.op("Mul", [y, sig], f"{s}/act")

    def c2f(y, p, c_in, c_out, n, shortcut):
        c = c_out // 2
        s = scope_of(p)
        y = cbs(y, f"{p}.cv1", c_in, 2 * c, 1)
        parts = g.op("Split", [y, g.ints([c, c], s)], s, num_outputs=2, axis=1)
        parts = list(parts)
        for i in range(n):
            h = cbs(parts[-1], f"{p}.m.{i}.cv1", c, c, 3)
            h = cbs(h, f"{p}.m.{i}.cv2", c, c, 3, gamma=0.5 if shortcut else 1.0)
            if shortcut:
                h = g.op("Add", [parts[-1], h], f"{s}/m.{i}")
            parts.append(h)
        y = g.op("Concat", parts, s, axis=1)
        return cbs(y, f"{p}.cv2", (2 + n) * c, c_out, 1)

    def sppf(y, p, c_in, c_out):
        s = scope_of(p)
        y = cbs(y, f"{p}.cv1", c_in, c_in // 2, 1)
        pools = [y]
        for _ in range(3):
            pools.append(g.op("MaxPool", [pools[-1]], f"{s}/m", ceil_mode=0, dilations=[1, 1],
                              kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1]))
        y = g.op("Concat", pools, s, axis=1)
        return cbs(y, f"{p}.cv2", 2 * c_in, c_out, 1)

    def upsample(y, p):
        s = scope_of(p)
        scales = g.const([1.0, 1.0, 2.0, 2.0], s)
        return g.op("Resize", [y, "", scales], s, coordinate_transformation_mode="asymmetric",
                    cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")

    # Backbone.
    y = cbs(x, "model.0", 3, 32, 3, 2)
    y = cbs(y, "model.1", 32, 64, 3, 2)
    y = c2f(y, "model.2", 64, 64, 1, True)
    y = cbs(y, "model.3", 64, 128, 3, 2)
    p3 = c2f(y, "model.4", 128, 128, 2, True)
    y = cbs(p3, "model.5", 128, 256, 3, 2)
    p4 = c2f(y, "model.6", 256, 256, 2, True)
    y = cbs(p4, "model.7", 256, 512, 3, 2)
    y = c2f(y, "model.8", 512, 512, 1, True)
    p5 = sppf(y, "model.9", 512, 512)
    # Neck (PAN-FPN).
    y = g.op("Concat", [upsample(p5, "model.10"), p4], "/model.11", axis=1)
    n4 = c2f(y, "model.12", 768, 256, 1, False)
    y = g.op("Concat", [upsample(n4, "model.13"), p3], "/model.14", axis=1)
    out3 = c2f(y, "model.15", 384, 128, 1, False)
    y = g.op("Concat", [cbs(out3, "model.16", 128, 128, 3, 2), n4], "/model.17", axis=1)
    out4 = c2f(y, "model.18", 384, 256, 1, False)
    y = g.op("Concat", [cbs(out4, "model.19", 256, 256, 3, 2), p5], "/model.20", axis=1)
    out5 = c2f(y, "model.21", 768, 512, 1, False)

    # Detect: three heads, each a box branch and a class branch.
    c2, c3 = 64, 128
    levels = []
    for i, (feat, ch) in enumerate([(out3, 128), (out4, 256), (out5, 512)]):
        box = cbs(feat, f"model.22.cv2.{i}.0", ch, c2, 3)
        box = cbs(box, f"model.22.cv2.{i}.1", c2, c2, 3)
        box = conv(g, box, f"model.22.cv2.{i}.2", f"/model.22/cv2.{i}/cv2.{i}.2", c2,
                   4 * reg_max, 1, bias=True, gain=1.0)
        cls = cbs(feat, f"model.22.cv3.{i}.0", ch, c3, 3)
        cls = cbs(cls, f"model.22.cv3.{i}.1", c3, c3, 3)
        cls = conv(g, cls, f"model.22.cv3.{i}.2", f"/model.22/cv3.{i}/cv3.{i}.2", c3,
                   num_classes, 1, bias=True, gain=1.0)
        head = g.op("Concat", [box, cls], "/model.22", axis=1)
        levels.append(g.op("Reshape", [head, g.ints([1, 4 * reg_max + num_classes, -1],
                                                    "/model.22")], "/model.22"))
    s = "/model.22"
    cat = g.op("Concat", levels, s, axis=2)  # [1, 144, 8400]
    box, cls = g.op("Split", [cat, g.ints([4 * reg_max, num_classes], s)], s, num_outputs=2,
                    axis=1)
    # DFL: softmax over reg_max bins, expectation through a fixed 1x1 conv.
    anchors_count = 80 * 80 + 40 * 40 + 20 * 20
    d = g.op("Reshape", [box, g.ints([1, 4, reg_max, anchors_count], f"{s}/dfl")], f"{s}/dfl")
    d = g.op("Transpose", [d], f"{s}/dfl", perm=[0, 2, 1, 3])
    d = g.op("Softmax", [d], f"{s}/dfl", axis=1)
    bins = g.weight("model.22.dfl.conv.weight",
                    np.arange(reg_max, dtype=np.float32).reshape(1, reg_max, 1, 1))
    d = g.op("Conv", [d, bins], f"{s}/dfl/conv", dilations=[1, 1], group=1,
             kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1])
    d = g.op("Reshape", [d, g.ints([1, 4, anchors_count], f"{s}/dfl")], f"{s}/dfl")
    # dist2bbox: anchors and strides are constants in the exported graph.
    points, strides = [], []
    for size, stride in [(80, 8), (40, 16), (20, 32)]:
        ys, xs = np.meshgrid(np.arange(size) + 0.5, np.arange(size) + 0.5, indexing="ij")
        points.append(np.stack([xs.ravel(), ys.ravel()]))
        strides.append(np.full(size * size, stride))
    anchor_points = g.weight("/model.22/Constant_anchors",
                             np.concatenate(points, 1)[None].astype(np.float32))
    stride_map = g.weight("/model.22/Constant_strides",
                          np.concatenate(strides)[None, None].astype(np.float32))
    lt, rb = g.op("Split", [d, g.ints([2, 2], s)], s, num_outputs=2, axis=1)
    x1y1 = g.op("Sub", [anchor_points, lt], s)
    x2y2 = g.op("Add", [anchor_points, rb], s)
    center = g.op("Div", [g.op("Add", [x1y1, x2y2], s), g.const(2.0, s)], s)
    wh = g.op("Sub", [x2y2, x1y1], s)
    boxes = g.op("Mul", [g.op("Concat", [center, wh], s, axis=1), stride_map], s)
    scores = g.op("Sigmoid", [cls], s)
    g.op("Concat", [boxes, scores], s, outputs=["output0"], axis=1)
    g.output("output0", TensorProto.FLOAT, [1, 4 + num_classes, anchors_count])
    return "YOLOv8s-style detector, 1x3x640x640 -> 1x84x8400 (xywh + 80 class scores)"


def build_vit_b16(g):
    d, heads, ff, layers, patch, image = 768, 12, 3072, 12, 16, 224
    tokens = (image // patch) ** 2 + 1
    x = g.input("pixel_values", TensorProto.FLOAT, [1, 3, image, image])
    s = "/embeddings/patch_embeddings/projection"
    y = conv(g, x, "embeddings.patch_embeddings.projection", s, 3, d, patch, stride=patch,
             pad=0, bias=True, gain=1.0)
    y = g.op("Reshape", [y, g.ints([1, d, tokens - 1], "/embeddings/patch_embeddings")],
             "/embeddings/patch_embeddings")
    y = g.op("Transpose", [y], "/embeddings/patch_embeddings", perm=[0, 2, 1])
    cls_token = g.normal("embeddings.cls_token", (1, 1, d), 1.0)
    y = g.op("Concat", [cls_token, y], "/embeddings", axis=1)
    pos = g.normal("embeddings.position_embeddings", (1, tokens, d), 0.5)
    y = g.op("Add", [y, pos], "/embeddings")
    for i in range(layers):
        y = encoder_layer(g, y, f"encoder.layer.{i}", f"/encoder/layer.{i}", d, heads, ff,
                          tokens, pre_norm=True)
    y = layer_norm(g, y, "layernorm", "/layernorm", d)
    cls = g.op("Gather", [y, g.ints(0, "")], "", outputs=["pooled"], axis=1)  # class token
    w = g.normal("classifier.weight", (1000, d), math.sqrt(1.0 / d))
    b = g.uniform("classifier.bias", (1000,), -0.01, 0.01)
    g.op("Gemm", [cls, w, b], "/classifier", outputs=["logits"], alpha=1.0, beta=1.0, transB=1)
    g.output("logits", TensorProto.FLOAT, [1, 1000])
    g.output("pooled", TensorProto.FLOAT, [1, d])
    return "ViT-B/16 image encoder (HF layout), 1x3x224x224 -> 1x1000 logits and 1x768 CLS"


def build_bert_base(g):
    d, heads, ff, layers, seq, vocab = 768, 12, 3072, 12, 128, 30522
    ids = g.input("input_ids", TensorProto.INT64, [1, seq])
    mask = g.input("attention_mask", TensorProto.INT64, [1, seq])
    # Extended attention mask, as HF BertModel exports it.
    s = ""
    m = g.op("Unsqueeze", [mask, g.ints([1], s)], s)
    m = g.op("Unsqueeze", [m, g.ints([2], s)], s)
    m = g.op("Cast", [m], s, to=TensorProto.FLOAT)
    m = g.op("Sub", [g.const(1.0, s), m], s)
    m = g.op("Mul", [m, g.const(MASK_VALUE, s)], s)
    # Embeddings: word + token type + position, then LayerNorm.
    e = "/embeddings"
    words = g.normal("embeddings.word_embeddings.weight", (vocab, d), 0.5)
    types = g.normal("embeddings.token_type_embeddings.weight", (2, d), 0.5)
    positions = g.normal("embeddings.position_embeddings.weight", (512, d), 0.5)
    token_type_ids = g.weight("embeddings.token_type_ids", np.zeros((1, seq), np.int64))
    position_ids = g.weight("embeddings.position_ids", np.arange(seq, dtype=np.int64)[None])
    y = g.op("Gather", [words, ids], f"{e}/word_embeddings", axis=0)
    t = g.op("Gather", [types, token_type_ids], f"{e}/token_type_embeddings", axis=0)
    y = g.op("Add", [y, t], e)
    p = g.op("Gather", [positions, position_ids], f"{e}/position_embeddings", axis=0)
    y = g.op("Add", [y, p], e)
    y = layer_norm(g, y, "embeddings.LayerNorm", f"{e}/LayerNorm", d)
    for i in range(layers):
        y = encoder_layer(g, y, f"encoder.layer.{i}", f"/encoder/layer.{i}", d, heads, ff, seq,
                          mask=m, output="last_hidden_state" if i == layers - 1 else None)
    first = g.op("Gather", [y, g.ints(0, "/pooler")], "/pooler", axis=1)
    w = g.normal("pooler.dense.weight", (d, d), math.sqrt(1.0 / d))
    b = g.uniform("pooler.dense.bias", (d,), -0.02, 0.02)
    pooled = g.op("Gemm", [first, w, b], "/pooler/dense", alpha=1.0, beta=1.0, transB=1)
    g.op("Tanh", [pooled], "/pooler/activation", outputs=["pooler_output"])
    g.output("last_hidden_state", TensorProto.FLOAT, [1, seq, d])
    g.output("pooler_output", TensorProto.FLOAT, [1, d])
    return "BERT-base encoder (HF layout), seq 128 -> 1x128x768 and 1x768 pooled"


def build_trajectory_decoder(g):
    """Post-norm transformer decoder (nn.TransformerDecoder layout) over a scene memory."""
    d, heads, ff, layers, horizon, memory_len, state_dim = 256, 8, 1024, 4, 30, 256, 8
    memory = g.input("scene_memory", TensorProto.FLOAT, [1, memory_len, d])
    state = g.input("agent_state", TensorProto.FLOAT, [1, state_dim])
    # Queries: one learned embedding per future step plus the projected agent state.
    w = g.normal("state_proj.weight", (d, state_dim), math.sqrt(1.0 / state_dim))
    b = g.uniform("state_proj.bias", (d,), -0.02, 0.02)
    st = g.op("Gemm", [state, w, b], "/state_proj", alpha=1.0, beta=1.0, transB=1)
    st = g.op("Unsqueeze", [st, g.ints([1], "")], "")
    steps = g.normal("query_embed.weight", (1, horizon, d), 1.0)
    y = g.op("Add", [steps, st], "")
    causal = np.triu(np.full((horizon, horizon), -np.inf, np.float32), k=1)
    mask = g.weight("causal_mask", causal)
    for i in range(layers):
        p, s = f"decoder.layers.{i}", f"/decoder/layers.{i}"
        a = attention(g, y, y, f"{p}.self_attn", f"{s}/self_attn", d, heads, horizon, horizon,
                      mask)
        a = linear(g, a, f"{p}.self_attn.out_proj", f"{s}/self_attn/out_proj", d, d)
        y = layer_norm(g, g.op("Add", [y, a], s), f"{p}.norm1", f"{s}/norm1", d, 1e-5)
        a = attention(g, y, memory, f"{p}.multihead_attn", f"{s}/multihead_attn", d, heads,
                      horizon, memory_len)
        a = linear(g, a, f"{p}.multihead_attn.out_proj", f"{s}/multihead_attn/out_proj", d, d)
        y = layer_norm(g, g.op("Add", [y, a], s), f"{p}.norm2", f"{s}/norm2", d, 1e-5)
        h = linear(g, y, f"{p}.linear1", f"{s}/linear1", d, ff)
        h = g.op("Relu", [h], s)
        h = linear(g, h, f"{p}.linear2", f"{s}/linear2", ff, d, std=math.sqrt(0.5 / ff))
        y = layer_norm(g, g.op("Add", [y, h], s), f"{p}.norm3", f"{s}/norm3", d, 1e-5)
    linear(g, y, "head", "/head", d, 2, output="trajectory")
    g.output("trajectory", TensorProto.FLOAT, [1, horizon, 2])
    return "Trajectory decoder: 4 layers, d=256, causal self-attention + cross-attention -> 1x30x2"


DESCRIPTIONS = {
    "tiny": "Conv+Relu+GlobalAveragePool+Gemm, 1x3x32x32 -> 1x10 (for tests)",
    "resnet50": "ResNet-50, 1x3x224x224 -> 1x1000",
    "mobilenetv2": "MobileNetV2 (depthwise, ReLU6 as Clip), 1x3x224x224 -> 1x1000",
    "yolo": "YOLOv8s-style detector (SiLU, Resize, 3 heads, DFL), 1x3x640x640 -> 1x84x8400",
    "vit_b16": "ViT-B/16 encoder, 1x3x224x224 -> 1x1000 logits + 1x768 CLS",
    "bert_base": "BERT-base, input_ids/attention_mask 1x128 -> 1x128x768 + 1x768",
    "trajectory_decoder": "4-layer transformer decoder, d=256, scene memory -> 1x30x2",
}

MODELS = {
    "tiny": build_tiny,
    "resnet50": build_resnet50,
    "mobilenetv2": build_mobilenetv2,
    "yolo": build_yolo,
    "vit_b16": build_vit_b16,
    "bert_base": build_bert_base,
    "trajectory_decoder": build_trajectory_decoder,
}


def build(name, seed=0):
    """Returns the ModelProto of zoo model NAME; the same seed gives the same bytes."""
    # Each model draws from its own stream so its weights don't depend on the others built.
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    g = Graph(rng)
    doc = MODELS[name](g)
    return g.model(name, f"{doc}; random weights, seed {seed}")


def write(model, path, overwrite):
    """Writes atomically; never replaces an existing file unless asked."""
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"'{path}' already exists; pass --overwrite to replace it")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".zoo-", suffix=".onnx", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
        onnx.checker.check_model(tmp)  # by path: works for models of any size
        if overwrite:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)  # fails if PATH appeared meanwhile
            except FileExistsError:
                raise
            except OSError:  # no hard links on this file system
                if os.path.exists(path):
                    raise FileExistsError(f"'{path}' already exists")
                os.replace(tmp, path)
            if os.path.exists(tmp):
                os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="models to write ('all': every one)")
    parser.add_argument("--out-dir", help="where NAME.onnx goes (required unless --list)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--overwrite", action="store_true", help="replace existing files")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name in MODELS:
            print(f"{name:20s} {DESCRIPTIONS[name]}")
        return 0
    if not args.out_dir:
        parser.error("--out-dir is required")
    names = list(MODELS) if args.names == ["all"] else args.names
    if not names:
        parser.error("name at least one model (see --list)")
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"error: unknown model(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    status = 0
    for name in names:
        path = os.path.join(args.out_dir, f"{name}.onnx")
        if os.path.exists(path) and not args.overwrite:
            print(f"error: '{path}' already exists; pass --overwrite to replace it",
                  file=sys.stderr)
            status = 2
            continue
        model = build(name, args.seed)
        write(model, path, args.overwrite)
        params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        print(f"{name}: {len(model.graph.node)} nodes, {params / 1e6:.1f}M parameters, "
              f"{os.path.getsize(path) / 1e6:.1f} MB -> {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
