"""InferenceSession and SessionOptions with ONNX Runtime's names and behaviour."""

from __future__ import annotations

import enum
import logging
import os
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _peregrine

_log = logging.getLogger("peregrine")

_CPU = "CPUExecutionProvider"
# ONNX Runtime's execution providers: asked for here, each but the CPU one is unavailable and
# skipped with a warning, as ONNX Runtime does for a provider its build lacks. Any other name
# is a mistake and an error.
_ORT_PROVIDERS = (
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
    "ROCMExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
    "TvmExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider",
    "NnapiExecutionProvider", "VSINPUExecutionProvider", "JsExecutionProvider",
    "CoreMLExecutionProvider", "ArmNNExecutionProvider", "ACLExecutionProvider",
    "DmlExecutionProvider", "RknpuExecutionProvider", "WebNNExecutionProvider",
    "WebGpuExecutionProvider", "XnnpackExecutionProvider", "CANNExecutionProvider",
    "AzureExecutionProvider", "NvTensorRTRTXExecutionProvider", _CPU,
)

# ONNX type names of NodeArg.type, by Peregrine's dtype name.
_ONNX_TYPE = {"float32": "float", "float64": "double"}


class GraphOptimizationLevel(enum.IntEnum):
    """ONNX Runtime's levels, mapped onto Peregrine's -O0..-O3: ORT_ENABLE_ALL (ONNX Runtime's
    default) is Peregrine's default -O2; ORT_ENABLE_LAYOUT asks for -O3 (NHWC conv chains)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


_OPT_LEVEL = {0: 0, 1: 1, 2: 2, 3: 3, 99: 2}


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """Session settings. ONNX Runtime's attribute names, plus Peregrine's own:

    precision: "fp32" (default) or "bf16" (GEMM-class nodes on the bf16 kernels; an error where
        the CPU lacks AVX512_BF16). keep_fp32: node names or op types kept in float32.
    disable_passes: graph passes to skip by name. backend: "cpu" (default) or "reference".
    shape_plans: how many input-shape signatures get their own compiled plan (0: none).
    shape_profiles: input name -> (min, opt, max) shapes, like TensorRT's optimization
        profiles (add_shape_profile): a run whose input lies outside [min, max] raises
        InvalidArgument, and the plans of min, opt and max are compiled when the session is
        created, so the first run at those shapes pays no compile.
    memory_limit: bytes the model's static tensors may need (0: three quarters of physical
        memory, -1: no limit); a model over it fails to load with the numbers.
    """

    def __init__(self) -> None:
        self.intra_op_num_threads = 0  # 0: one per core, as in ONNX Runtime
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.enable_profiling = False
        self.profile_file_prefix = "peregrine_profile"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.optimized_model_filepath = ""
        self.precision = "fp32"
        self.keep_fp32: List[str] = []
        self.disable_passes: List[str] = []
        self.backend = ""
        self.shape_plans = 4
        self.shape_profiles: Dict[str, tuple] = {}
        self.memory_limit = 0  # bytes the model's static tensors may need; 0: 3/4 of RAM; -1: none
        self._config: Dict[str, str] = {}
        self._dim_values: Dict[str, int] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgumentError(f"session config entry '{key}' is not set")
        return self._config[key]

    def add_shape_profile(self, input_name: str, min_shape: Sequence[int],
                          opt_shape: Sequence[int], max_shape: Sequence[int]) -> None:
        """The shapes `input_name` may take: [min_shape, max_shape] dim by dim, opt_shape the
        one expected most. Checked against the model when the session is created."""
        self.shape_profiles[input_name] = (list(min_shape), list(opt_shape), list(max_shape))

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fixes a symbolic dim of the model's inputs (say "batch") to a value."""
        self._dim_values[dim_name] = int(dim_value)


InvalidArgumentError = _peregrine.InvalidArgument

# Attributes of an onnxruntime.SessionOptions with a meaning here (read one by one); every
# other attribute is ignored, said once at debug level.
_READ_ATTRIBUTES = (
    "intra_op_num_threads", "graph_optimization_level", "enable_profiling",
    "profile_file_prefix", "log_severity_level", "enable_mem_pattern",
)
_ignored_said = set()


def _from_foreign_options(foreign: Any) -> SessionOptions:
    """Reads an onnxruntime.SessionOptions (or any object with its attribute names)."""
    mine = SessionOptions()
    for name in _READ_ATTRIBUTES:
        if hasattr(foreign, name):
            value = getattr(foreign, name)
            if name == "graph_optimization_level":
                value = int(getattr(value, "value", value))
            setattr(mine, name, value)
    for name in dir(foreign):
        if name.startswith("_") or name in _READ_ATTRIBUTES or name in _ignored_said:
            continue
        _ignored_said.add(name)
        _log.debug("SessionOptions.%s has no meaning in Peregrine and is ignored", name)
    return mine


class RunOptions:
    """Accepted for ONNX Runtime compatibility; Peregrine reads none of its settings."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False

    def add_run_config_entry(self, key: str, value: str) -> None:
        pass


class NodeArg:
    """A graph input or output: name, shape (ints, symbolic dims as their names, None where
    unnamed) and ONNX type string ('tensor(float)')."""

    def __init__(self, info: Dict[str, Any]) -> None:
        self.name: str = info["name"]
        dtype = _ONNX_TYPE.get(info["dtype"], info["dtype"])
        self.type: str = f"tensor({dtype})" if info["is_tensor"] else f"seq(tensor({dtype}))"
        names = info.get("dim_names") or [""] * len(info["shape"])
        self.shape: List[Union[int, str, None]] = [
            int(d) if d >= 0 else (n or None) for d, n in zip(info["shape"], names)]

    def __repr__(self) -> str:
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class ModelMetadata:
    def __init__(self, meta: Dict[str, Any]) -> None:
        self.producer_name: str = meta["producer_name"]
        self.graph_name: str = meta["graph_name"]
        self.domain: str = meta["domain"]
        self.description: str = meta["description"]
        self.graph_description: str = meta["graph_description"]
        self.version: int = meta["version"]
        self.custom_metadata_map: Dict[str, str] = dict(meta["custom_metadata_map"])


def get_available_providers() -> List[str]:
    return [_CPU]


def get_all_providers() -> List[str]:
    return list(_ORT_PROVIDERS)


def get_device() -> str:
    return "CPU"


def _check_providers(providers: Optional[Sequence[Any]]) -> None:
    for p in providers or []:
        name = p[0] if isinstance(p, (tuple, list)) else p
        if not isinstance(name, str) or name not in _ORT_PROVIDERS:
            raise ValueError(f"unknown execution provider {name!r}; available: {[_CPU]}")
        if name != _CPU:
            warnings.warn(f"Specified provider '{name}' is not in available provider names. "
                          f"Available providers: '{_CPU}'", stacklevel=3)


class InferenceSession:
    """Loads an ONNX model (a path or the serialized bytes) and runs it.

    run(output_names, input_feed): inputs are numpy arrays (or anything np.asarray takes) of
    exactly the dtype the model declares. A C-contiguous array is read in place, never copied;
    any other layout is copied once into a contiguous array. Outputs are numpy arrays over the
    engine's own result buffers (no copy), except an output that aliases an input or a weight,
    which is copied. The GIL is released while the model runs; several threads may call run on
    one session (runs on one session take turns).

    Inputs with symbolic dims may change shape between runs. A shape signature seen for the
    second time gets its own compiled plan (shapes fixed, constant shape arithmetic folded,
    memory planned); up to SessionOptions.shape_plans such plans are kept, least recently
    used first out. A shape seen only once runs on the model's dynamic plan, so inputs whose
    size changes every call never wait for a compile. Each plan holds its own packed weights.
    """

    def __init__(self, path_or_bytes: Union[str, bytes, os.PathLike],
                 sess_options: Any = None, providers: Optional[Sequence[Any]] = None,
                 provider_options: Optional[Sequence[Dict[str, Any]]] = None,
                 **kwargs: Any) -> None:
        _check_providers(providers)
        self._user_options = sess_options
        if sess_options is None:
            sess_options = SessionOptions()
        elif not isinstance(sess_options, SessionOptions):
            sess_options = _from_foreign_options(sess_options)
        self._sess_options = sess_options
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model: Any = bytes(path_or_bytes)
            self._model_path = None
        elif isinstance(path_or_bytes, (str, os.PathLike)):
            model = os.fspath(path_or_bytes)
            self._model_path = model
        else:
            raise TypeError("InferenceSession takes a model path or the model's bytes, not "
                            f"{type(path_or_bytes).__name__}")
        opts = _peregrine._Options()
        threads = int(sess_options.intra_op_num_threads or 0)
        opts.num_threads = threads if threads > 0 else (os.cpu_count() or 1)
        level = int(getattr(sess_options.graph_optimization_level, "value",
                            sess_options.graph_optimization_level))
        if level not in _OPT_LEVEL:
            raise ValueError(f"graph_optimization_level {level}: expected one of "
                             f"{[l.name for l in GraphOptimizationLevel]}")
        opts.opt_level = _OPT_LEVEL[level]
        opts.backend = getattr(sess_options, "backend", "")
        opts.disabled_passes = list(getattr(sess_options, "disable_passes", []))
        opts.keep_fp32 = list(getattr(sess_options, "keep_fp32", []))
        opts.dim_values = dict(getattr(sess_options, "_dim_values", {}))
        opts.memory_limit_bytes = int(getattr(sess_options, "memory_limit", 0))
        opts.set_precision(getattr(sess_options, "precision", "fp32"))
        for name, profile in dict(getattr(sess_options, "shape_profiles", {})).items():
            if len(profile) != 3:
                raise ValueError(f"shape profile of '{name}': expected (min, opt, max)")
            opts.set_shape_profile(str(name), *[[int(d) for d in shape] for shape in profile])
        self._impl = _peregrine._Session(model, opts, int(getattr(sess_options, "shape_plans", 4)))
        self._inputs = [NodeArg(i) for i in self._impl.inputs()]
        self._outputs = [NodeArg(o) for o in self._impl.outputs()]
        self._output_index = {o.name: k for k, o in enumerate(self._outputs)}
        self._input_names = {i.name for i in self._inputs}
        self._sequence_inputs = {i.name: i.type.startswith("seq(") for i in self._inputs}
        self._providers = [_CPU]
        self._profile_start_ns = 0
        self.last_run_input_copies = 0  # inputs the last run had to copy (not C-contiguous)
        if sess_options.enable_profiling:
            self._start_profiling()

    # ---- ONNX Runtime's session methods -------------------------------------------------

    def get_inputs(self) -> List[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        return []

    def get_modelmeta(self) -> ModelMetadata:
        return ModelMetadata(self._impl.metadata())

    def get_providers(self) -> List[str]:
        return list(self._providers)

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        return {_CPU: {}}

    def set_providers(self, providers: Optional[Sequence[Any]] = None,
                      provider_options: Optional[Sequence[Dict[str, Any]]] = None) -> None:
        _check_providers(providers)

    def disable_fallback(self) -> None:
        pass

    def enable_fallback(self) -> None:
        pass

    def get_session_options(self) -> Any:
        return self._user_options if self._user_options is not None else self._sess_options

    def get_profiling_start_time_ns(self) -> int:
        return self._profile_start_ns

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Optional[RunOptions] = None) -> List[Any]:
        """Runs the model; returns the outputs named (all, in graph order, for None)."""
        if not isinstance(input_feed, dict):
            raise InvalidArgumentError("input_feed must be a dict of input name -> array")
        wanted = self._output_indices(output_names)
        arrays: Dict[str, np.ndarray] = {}
        strings: Dict[str, Any] = {}
        sequences: Dict[str, List[np.ndarray]] = {}
        absent: List[str] = []
        copies = 0
        for name, value in input_feed.items():
            if name not in self._input_names:
                raise InvalidArgumentError(f"'{name}' is not an input of the model; its inputs "
                                           f"are {sorted(self._input_names)}")
            if value is None:  # an optional input left empty
                absent.append(name)
            elif isinstance(value, list) and self._sequence_inputs.get(name):
                sequences[name] = [_contiguous(v)[0] for v in value]
            else:
                array, copied = _contiguous(value)
                if array.dtype.kind in "OUS":
                    strings[name] = ([_to_str(s) for s in array.reshape(-1)], list(array.shape))
                else:
                    copies += copied
                    arrays[name] = array
        self.last_run_input_copies = copies
        outputs = self._impl.run(arrays, strings, sequences, absent)
        return [_from_engine(outputs[k]) for k in wanted]

    def run_with_iobinding(self, *args: Any, **kwargs: Any) -> None:
        raise _peregrine.NotImplemented("io_binding is not implemented by Peregrine; use run()")

    def io_binding(self) -> None:
        raise _peregrine.NotImplemented("io_binding is not implemented by Peregrine; use run()")

    def end_profiling(self) -> str:
        """Stops profiling; returns the path of the Chrome trace (Perfetto opens it)."""
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        prefix = self._sess_options.profile_file_prefix or "peregrine_profile"
        path = f"{prefix}_{stamp}.json"
        k = 1
        while os.path.exists(path):  # never over an existing file
            path = f"{prefix}_{stamp}_{k}.json"
            k += 1
        return self._impl.end_profiling(path)

    # ---- Peregrine's own ------------------------------------------------------------------

    def kernels(self) -> List[tuple]:
        """(node, op type, kernel) for each node of the optimized graph."""
        return list(self._impl.node_kernels())

    def plan_stats(self) -> Dict[str, int]:
        """The shape-plan cache: plans held, compiles done, runs on each kind of plan, and
        the kernel cache the plans share (shared_kernels: nodes that reused a prepared kernel;
        cached_kernels: kernels held)."""
        return dict(self._impl.plan_stats())

    def _start_profiling(self) -> None:
        self._profile_start_ns = time.time_ns()
        self._impl.start_profiling()

    def _output_indices(self, output_names: Optional[Sequence[str]]) -> List[int]:
        if output_names is None:
            return list(range(len(self._outputs)))
        if isinstance(output_names, str):
            raise InvalidArgumentError("output_names must be a list of names, not a string")
        indices = []
        for name in output_names:
            if name not in self._output_index:
                raise InvalidArgumentError(f"'{name}' is not an output of the model; its outputs "
                                           f"are {list(self._output_index)}")
            indices.append(self._output_index[name])
        return indices


def _contiguous(value: Any) -> Tuple[np.ndarray, bool]:
    """The value as a C-contiguous array (0-d stays 0-d) and whether that took a copy."""
    array = np.asarray(value)
    if array.flags.c_contiguous:
        return array, array is not value
    return array.copy(order="C"), True


def _to_str(s: Any) -> str:
    return s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else str(s)


def _from_engine(value: Any) -> Any:
    """An engine output as numpy: string tensors arrive as (list of bytes, shape)."""
    if isinstance(value, tuple):
        items, shape = value
        out = np.empty(len(items), dtype=object)
        out[:] = [b.decode("utf-8", "replace") for b in items]
        return out.reshape(shape)
    if isinstance(value, list):
        return [_from_engine(v) for v in value]
    return value
