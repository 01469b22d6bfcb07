"""Writes a corpus of malformed models, one folder per case, each breaking one
loader or verifier rule. run_corpus.py feeds them to `peregrine run` and checks
the error message and the exit code."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def tiny_graph(nodes=None, inits=None, inputs=None, outputs=None, name="g"):
    nodes = nodes if nodes is not None else [helper.make_node("Add", ["x", "y"], ["z"], name="add_0")]
    inputs = inputs if inputs is not None else [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]
    outputs = outputs if outputs is not None else [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])]
    return helper.make_graph(nodes, name, inputs, outputs, initializer=inits or [])


def model_of(graph, opset=OPSET):
    m = helper.make_model(graph, opset_imports=opset)
    m.ir_version = 8
    return m


def save(folder, model_or_bytes):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    data = model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    return path


def external_model(location, offset=None, length=None, n=6):
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.extend([2, 3])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    g = tiny_graph(nodes=[helper.make_node("Add", ["x", "w"], ["z"], name="add_w")], inits=[t],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    return model_of(g)


def nested_if(depth):
    """An If whose then-branch holds an If ... `depth` levels deep."""
    out = helper.make_tensor_value_info("r", TensorProto.FLOAT, [1])
    inner = helper.make_graph([helper.make_node("Constant", [], ["r"], value=numpy_helper.from_array(np.ones(1, np.float32)))],
                              "leaf", [], [out])
    leaf = inner
    for i in range(depth):
        # Only the then-branch nests: the model stays linear in size.
        node = helper.make_node("If", ["c"], ["r"], name=f"if_{i}", then_branch=inner, else_branch=leaf)
        inner = helper.make_graph([node], f"level_{i}", [], [out])
    return model_of(helper.make_graph(inner.node, "main", [helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [out]))


def _field(number, payload):
    """A length-delimited protobuf field."""
    key, n, out = (number << 3) | 2, len(payload), bytearray()
    out.append(key)
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out) + payload


def nesting_bomb(levels):
    """Graph -> node -> attribute -> graph ... encoded by hand: Python's protobuf
    refuses to build messages this deep, which is the point of the case."""
    graph = b""
    for _ in range(levels):
        attribute = _field(1, b"g") + _field(6, graph)          # AttributeProto{name, g}
        node = _field(4, b"If") + _field(5, attribute)           # NodeProto{op_type, attribute}
        graph = _field(1, node)                                  # GraphProto{node}
    return _field(7, graph)                                      # ModelProto{graph}


def cases(root):
    """Yields (name, expected exit code, regex the error must match, extra CLI args)."""
    valid = model_of(tiny_graph()).SerializeToString()

    save(f"{root}/truncated", valid[: len(valid) // 2])
    yield "truncated", 2, r"not a valid ONNX protobuf", []
    save(f"{root}/not_protobuf", b"this is not an onnx model\n" * 10)
    yield "not_protobuf", 2, r"not a valid ONNX protobuf", []
    save(f"{root}/empty_file", b"")
    yield "empty_file", 2, r"no graph", []

    w = numpy_helper.from_array(np.ones((8, 3, 3), np.float32), "w3")
    g = tiny_graph(nodes=[helper.make_node("Conv", ["x", "w3"], ["z"], name="conv_12")], inits=[w],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/conv_weight_rank", model_of(g))
    yield "conv_weight_rank", 2, r"node 'conv_12' \(Conv\).*rank", []

    t = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    t.raw_data = t.raw_data[:-4]
    g = tiny_graph(nodes=[helper.make_node("Add", ["x", "w"], ["z"], name="add_w")], inits=[t],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/raw_data_short", model_of(g))
    yield "raw_data_short", 2, r"tensor 'w': raw_data has 20 bytes.*need 24", []

    save(f"{root}/external_dotdot/sub", external_model("../secret.bin"))
    with open(f"{root}/external_dotdot/secret.bin", "wb") as f:
        f.write(b"\0" * 24)
    yield "external_dotdot/sub", 2, r"tensor 'w'.*must not contain '\.\.'", []

    save(f"{root}/external_absolute", external_model("/etc/passwd"))
    yield "external_absolute", 2, r"tensor 'w'.*relative path inside the model's folder", []

    os.makedirs(f"{root}/external_symlink", exist_ok=True)
    with open(f"{root}/outside.bin", "wb") as f:
        f.write(b"\0" * 24)
    link = f"{root}/external_symlink/weights.bin"
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.abspath(f"{root}/outside.bin"), link)
    save(f"{root}/external_symlink", external_model("weights.bin"))
    yield "external_symlink", 2, r"tensor 'w'.*is a symlink", []

    os.makedirs(f"{root}/external_hardlink", exist_ok=True)
    hl = f"{root}/external_hardlink/weights.bin"
    if os.path.lexists(hl):
        os.remove(hl)
    os.link(f"{root}/outside.bin", hl)
    save(f"{root}/external_hardlink", external_model("weights.bin"))
    yield "external_hardlink", 2, r"tensor 'w'.*several hard links", []

    save(f"{root}/external_past_end", external_model("weights.bin", offset=16, length=24))
    with open(f"{root}/external_past_end/weights.bin", "wb") as f:
        f.write(b"\0" * 32)
    yield "external_past_end", 2, r"tensor 'w'.*exceeds file 'weights.bin'", []

    save(f"{root}/external_missing", external_model("nowhere.bin"))
    yield "external_missing", 2, r"tensor 'w'.*not found", []

    g = tiny_graph(nodes=[helper.make_node("Relu", ["b"], ["a"], name="relu_a"),
                          helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
                          helper.make_node("Add", ["x", "b"], ["z"], name="add_0")],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/cycle", model_of(g))
    yield "cycle", 2, r"node 'relu_[ab]' \(Relu\).*cycle", []

    g = tiny_graph(nodes=[helper.make_node("Add", ["x", "ghost"], ["z"], name="add_0")],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/dangling_input", model_of(g))
    yield "dangling_input", 2, r"node 'add_0' \(Add\): input 'ghost' is not a graph input", []

    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([1 << 40, 1 << 40])
    g = tiny_graph(nodes=[helper.make_node("Add", ["x", "w"], ["z"], name="add_w")], inits=[t],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/huge_dims", model_of(g))
    yield "huge_dims", 2, r"initializer: tensor 'w'.*(overflows|exceeds)", []

    t = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    t.data_type = 99
    g = tiny_graph(nodes=[helper.make_node("Add", ["x", "w"], ["z"], name="add_w")], inits=[t],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/bad_dtype", model_of(g))
    yield "bad_dtype", 2, r"tensor 'w': data_type 99 is not a valid ONNX element type", []

    g = tiny_graph(nodes=[helper.make_node("Relu", ["x"], ["z"], name="relu_1"),
                          helper.make_node("Relu", ["y"], ["z"], name="relu_2")])
    save(f"{root}/duplicate_output", model_of(g))
    yield "duplicate_output", 2, r"node 'relu_2' \(Relu\): output 'z' is already defined", []

    save(f"{root}/opset_too_new", model_of(tiny_graph(), [helper.make_opsetid("", 99)]))
    yield "opset_too_new", 2, r"opset 99 is outside the supported range", []

    save(f"{root}/deep_subgraphs", nested_if(20))
    yield "deep_subgraphs", 2, r"(nested deeper|nested too deeply|nested deeper than)", []

    g = tiny_graph(nodes=[helper.make_node("FrobnicateNd", ["x", "y"], ["z"], name="mystery")])
    save(f"{root}/unknown_op", model_of(g))
    yield "unknown_op", 2, r"node 'mystery' \(FrobnicateNd\): op 'FrobnicateNd' is not supported", []

    g = tiny_graph(outputs=[helper.make_tensor_value_info("nowhere", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/output_never_produced", model_of(g))
    yield "output_never_produced", 2, r"output 'nowhere' is never produced", []

    g = tiny_graph(nodes=[helper.make_node("Transpose", ["x"], ["z"], name="transpose_bad", perm=[0, 5])],
                   inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    save(f"{root}/bad_perm", model_of(g))
    yield "bad_perm", 2, r"node 'transpose_bad' \(Transpose\).*perm", []

    g = tiny_graph(nodes=[helper.make_node("Concat", ["x", "y"], ["z"], name="concat_bad", axis=7)])
    save(f"{root}/bad_axis", model_of(g))
    yield "bad_axis", 2, r"node 'concat_bad' \(Concat\).*axis", []

    g = tiny_graph(inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("y", TensorProto.INT64, [2, 3])])
    save(f"{root}/mixed_dtypes", model_of(g))
    yield "mixed_dtypes", 2, r"node 'add_0' \(Add\).*different (element )?types", []

    g = tiny_graph(inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])])
    save(f"{root}/broadcast_mismatch", model_of(g))
    yield "broadcast_mismatch", 2, r"node 'add_0' \(Add\).*cannot be broadcast", []

    # Found by fuzz_pipeline: a required input left out (an empty name) read a null type.
    g = tiny_graph(nodes=[helper.make_node("MatMul", ["", "y"], ["z"], name="matmul_no_a")])
    save(f"{root}/required_input_missing", model_of(g))
    yield "required_input_missing", 2, r"node 'matmul_no_a' \(MatMul\): input 0 is required but missing", []

    # A shape only the run reveals, past the tensor limit: an error of the node, never an abort.
    big = numpy_helper.from_array(np.array([1 << 40], np.int64), "big")
    g = tiny_graph(nodes=[helper.make_node("Add", ["n", "big"], ["shape"], name="add_n"),
                          helper.make_node("ConstantOfShape", ["shape"], ["z"], name="fill_huge")],
                   inits=[big], inputs=[helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
                   outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/runtime_huge_tensor", model_of(g))
    yield "runtime_huge_tensor", 2, r"node 'fill_huge' \(ConstantOfShape\).*(tensor (size )?limit|memory)", []

    # Nesting bomb: a graph attribute inside a graph attribute ... past protobuf's recursion limit.
    save(f"{root}/protobuf_nesting", nesting_bomb(400))
    yield "protobuf_nesting", 2, r"(nested deeper|not a valid ONNX protobuf)", []

    # Bad user input rather than a bad model.
    save(f"{root}/input_wrong_shape", model_of(tiny_graph()))
    np.save(f"{root}/input_wrong_shape/x.npy", np.ones((3, 3), np.float32))
    yield "input_wrong_shape", 2, r"input 'x'.*expects", ["--input", f"x={root}/input_wrong_shape/x.npy"]

    save(f"{root}/input_object_npy", model_of(tiny_graph()))
    np.save(f"{root}/input_object_npy/x.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    yield "input_object_npy", 2, r"object arrays are not supported", ["--input", f"x={root}/input_object_npy/x.npy"]

    # Found by fuzz_pipeline: CenterCropPad without its shape input (the kernel read past the
    # output's dims).
    crop = tiny_graph(
        nodes=[helper.make_node("CenterCropPad", ["x"], ["z"], name="crop_0", axes=[0, 1])],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [20, 8, 3])],
        outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/center_crop_pad_no_shape", model_of(crop, [helper.make_opsetid("", 18)]))
    yield "center_crop_pad_no_shape", 2, r"node 'crop_0' \(CenterCropPad\).*input 1 is required", []

    # Found by fuzz_pipeline (UBSan): a declared input of 2^63 - 1 strings overflowed the sum
    # of the memory budget check; the sizes saturate now.
    huge = tiny_graph(
        nodes=[helper.make_node("StringConcat", ["x", "y"], ["z"], name="concat_0")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.STRING, []),
                helper.make_tensor_value_info("y", TensorProto.STRING, [2**63 - 1])],
        outputs=[helper.make_tensor_value_info("z", TensorProto.STRING, None)])
    save(f"{root}/string_input_2_63", model_of(huge, [helper.make_opsetid("", 20)]))
    yield "string_input_2_63", 2, r"over the memory budget", []

    # Found by fuzz_pipeline (ASan): ConstantOfShape whose shape input declares 6.6e17 elements
    # made inference allocate that many output dims.
    cos = tiny_graph(
        nodes=[helper.make_node("ConstantOfShape", ["x"], ["z"], name="fill_0")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.INT64, [659798268165120309])],
        outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/constant_of_shape_long_shape", model_of(cos, [helper.make_opsetid("", 21)]))
    yield "constant_of_shape_long_shape", 2, r"over the memory budget", []

    # Found by fuzz_pipeline (ASan): Unsqueeze whose axes input declares 2^48 elements made
    # inference allocate an output rank that long.
    unsq = tiny_graph(
        nodes=[helper.make_node("Unsqueeze", ["x", "axes"], ["z"], name="unsqueeze_0")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                helper.make_tensor_value_info("axes", TensorProto.INT64, [2**48])],
        outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/unsqueeze_long_axes", model_of(unsq, [helper.make_opsetid("", 13)]))
    yield "unsqueeze_long_axes", 2, r"over the memory budget", []

    # Found by fuzz_pipeline (UBSan): Clip's shape check multiplied a bound's declared dims
    # (7 x (2^63 - 1)) and overflowed.
    clip = tiny_graph(
        nodes=[helper.make_node("Clip", ["x", "lo"], ["z"], name="clip_0")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                helper.make_tensor_value_info("lo", TensorProto.FLOAT, [7, 2**63 - 1])],
        outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/clip_bound_dims_overflow", model_of(clip, [helper.make_opsetid("", 13)]))
    yield "clip_bound_dims_overflow", 2, r"node 'clip_0' \(Clip\).*must be a scalar|over the memory budget", []

    # Found by fuzz_pipeline (UBSan): Split into 4 uneven parts of an axis of 2^63 - 1 rounded
    # the part size up by adding 3 to the length, which overflowed.
    split = tiny_graph(
        nodes=[helper.make_node("Split", ["x"], ["a", "b", "c", "d"], name="split_0", num_outputs=4)],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**63 - 1, 2])],
        outputs=[helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "abcd"])
    save(f"{root}/split_huge_axis", model_of(split, [helper.make_opsetid("", 18)]))
    yield "split_huge_axis", 2, r"over the memory budget", []

    # Found by fuzz_pipeline (UBSan): ArrayFeatureExtractor multiplied its index input's declared
    # dims (2^46 x 2^45) into an overflow.
    afe = tiny_graph(
        nodes=[helper.make_node("ArrayFeatureExtractor", ["x", "y"], ["z"], name="afe_0",
                                domain="ai.onnx.ml")],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                helper.make_tensor_value_info("y", TensorProto.INT64, [2**46, 2**45])],
        outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    save(f"{root}/array_feature_extractor_index_overflow",
         model_of(afe, [helper.make_opsetid("", 18), helper.make_opsetid("ai.onnx.ml", 3)]))
    yield ("array_feature_extractor_index_overflow", 2,
           r"node 'afe_0' \(ArrayFeatureExtractor\).*more elements than a tensor can hold", [])

    # Found by fuzz_pipeline (UBSan): blocked DequantizeLinear rounded an axis of 2^63 - 1 up
    # to whole blocks by adding block_size - 1 to it.
    dq = tiny_graph(
        nodes=[helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dq_0", axis=0,
                                block_size=4)],
        inputs=[helper.make_tensor_value_info("x", TensorProto.INT8, [2**63 - 1]),
                helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(f"{root}/dequantize_blocked_huge_axis", model_of(dq, [helper.make_opsetid("", 21)]))
    yield ("dequantize_blocked_huge_axis", 2,
           r"node 'dq_0' \(DequantizeLinear\).*input 's' dim 0 is 2, expected 2305843009213693952",
           [])

    # Found by fuzz_pipeline (ASan): a GRU whose hidden_size (2) disagrees with W and R (6): the
    # CPU kernel wrote Y at R's hidden size into an output inferred from the attribute.
    gru = tiny_graph(
        nodes=[helper.make_node("GRU", ["x", "w", "r"], ["y"], name="gru_0", hidden_size=2,
                                layout=1)],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 2]),
                helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 18, 2]),
                helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 18, 6])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    save(f"{root}/gru_hidden_size_disagrees", model_of(gru, [helper.make_opsetid("", 16)]))
    yield ("gru_hidden_size_disagrees", 2,
           r"node 'gru_0' \(GRU\): hidden_size differs from the shape of 'R'", [])

    # Found by fuzz_pipeline (ASan): an opset-8 Scan whose state lacks the batch dim its scan
    # input has (the kernel sliced past the state), and one whose scan input has no sequence
    # axis (UBSan: a dim of a rank-0 slice).
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_in"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_out"])],
        "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
                 helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [2])])
    for name, state_dims, x_dims in (("scan8_state_batch", [1, 2], [255, 3, 2]), ("scan8_no_sequence_axis", [3, 2], [3])):
        scan = tiny_graph(
            nodes=[helper.make_node("Scan", ["", "s", "x"], ["s_final", "y"], name="scan_0", body=body,
                                    num_scan_inputs=1)],
            inputs=[helper.make_tensor_value_info("s", TensorProto.FLOAT, state_dims),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
            outputs=[helper.make_tensor_value_info("s_final", TensorProto.FLOAT, None),
                     helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        save(f"{root}/{name}", model_of(scan, [helper.make_opsetid("", 8)]))
        yield name, 2, r"node 'scan_0' \(Scan\)", []

    # Shape profiles (--shape-profile NAME=MIN:OPT:MAX) that do not fit the model or the input.
    dynamic = tiny_graph(inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
                                 helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                         outputs=[helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])])
    save(f"{root}/profile_fixed_dim", model_of(dynamic))
    yield "profile_fixed_dim", 2, r"shape profile of 'x': dim 1 is fixed at 3", \
        ["--shape-profile", "x=1x2:1x2:4x2"]
    save(f"{root}/profile_order", model_of(dynamic))
    yield "profile_order", 2, r"shape profile of 'x': dim 0 needs min <= opt <= max", \
        ["--shape-profile", "x=2x3:1x3:4x3"]
    save(f"{root}/profile_shape_outside", model_of(dynamic))
    yield "profile_shape_outside", 2, r"dim 0 is fixed at 9 .*outside 1x3\.\.4x3", \
        ["--shape-profile", "x=1x3:2x3:4x3", "--shape", "x=9x3"]
    save(f"{root}/profile_input_outside", model_of(dynamic))
    np.save(f"{root}/profile_input_outside/x.npy", np.ones((7, 3), np.float32))
    yield "profile_input_outside", 2, r"input 'x' has shape 7x3, outside its shape profile", \
        ["--shape-profile", "x=1x3:2x3:4x3", "--input", f"x={root}/profile_input_outside/x.npy",
         "--shape", "y=7x3"]
    save(f"{root}/profile_syntax", model_of(dynamic))
    yield "profile_syntax", 2, r"expected NAME=MIN:OPT:MAX", ["--shape-profile", "x=1x3:4x3"]

    save(f"{root}/unknown_flag", model_of(tiny_graph()))
    yield "unknown_flag", 2, r"unknown flag '--frobnicate'", ["--frobnicate"]


if __name__ == "__main__":
    for c in cases(sys.argv[1]):
        print(c[0])
