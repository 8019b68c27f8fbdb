"""The Open Inference Protocol's (KServe V2) tensors, whatever carries them: JSON data, the binary
tensor extension's bytes, or gRPC contents and raw contents.

One rule for all of them: an input arrives as (name, datatype, shape, elements) and becomes the
classifier's float32 rows [n, F], or a `V2Error` naming what is wrong. An output leaves as the same
triple with its elements as a numpy array, which each protocol writes its own way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODEL_VERSION = "1"
INPUT_NAME = "features"
OUTPUT_NAMES = ("probabilities", "label")
# the protocol's numeric datatypes, as numpy little-endian dtypes (raw bytes are little-endian)
DATATYPES: dict[str, np.dtype] = {
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
    "INT8": np.dtype("i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"),
    "UINT8": np.dtype("u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"), "UINT64": np.dtype("<u8"),
}


class V2Error(ValueError):
    """A request the protocol refuses. kind: "invalid" (HTTP 400, gRPC INVALID_ARGUMENT), "not_found"
    (404, NOT_FOUND) or "unavailable" (a full queue or a draining server: UNAVAILABLE over gRPC; over
    HTTP, `api_error`, the admission's own 429/503 with its Retry-After)."""

    def __init__(self, message: str, kind: str = "invalid", api_error=None) -> None:
        super().__init__(message)
        self.kind = kind
        self.api_error = api_error


@dataclass(frozen=True)
class OutputTensor:
    name: str
    datatype: str
    array: np.ndarray    # its shape is the tensor's

    @property
    def shape(self) -> list[int]:
        return list(self.array.shape)


def elements_from_raw(datatype: str, shape: list[int], raw: bytes, where: str) -> np.ndarray:
    """An input's elements from its raw little-endian bytes (the binary extension, gRPC raw contents)."""
    dtype = _dtype(datatype)
    count = _element_count(shape)
    if len(raw) != count * dtype.itemsize:
        raise V2Error(f"{where} has {len(raw)} bytes but shape {shape} of {datatype} needs {count * dtype.itemsize}")
    return np.frombuffer(raw, dtype=dtype)


def elements_from_values(datatype: str, values) -> np.ndarray:
    """An input's elements from JSON data (flat or nested row-major) or gRPC typed contents."""
    dtype = _dtype(datatype)
    try:
        array = np.asarray(values)     # a ragged list fails here, or becomes an object array
    except (ValueError, TypeError, OverflowError):
        array = np.asarray([], dtype=object)
    if array.size and array.dtype.kind not in "iuf":   # no strings, booleans, nulls or ragged lists
        raise V2Error(f"input data must be a (nested) list of numbers of datatype {datatype}")
    return array.astype(dtype).reshape(-1)


def input_rows(name: str, datatype: str, shape: list[int], elements: np.ndarray, *,
               num_features: int, max_batch_size: int) -> np.ndarray:
    """The classifier's rows, float32 [n, F], from its one input; a 1-D shape [F] is one row."""
    if name != INPUT_NAME:
        raise V2Error(f"unknown input {name!r}; this model's input is {INPUT_NAME!r}")
    _dtype(datatype)
    rows_shape = [1, *shape] if len(shape) == 1 else list(shape)
    if len(rows_shape) != 2 or rows_shape[1] != num_features:
        raise V2Error(f"input shape must be [n, {num_features}] (or [{num_features}]), got {list(shape)}")
    if not 1 <= rows_shape[0] <= max_batch_size:
        raise V2Error(f"a request carries 1..{max_batch_size} rows (max_batch_size), got {rows_shape[0]}")
    if elements.size != rows_shape[0] * rows_shape[1]:
        raise V2Error(f"input data has {elements.size} values but shape {list(shape)} "
                      f"needs {rows_shape[0] * rows_shape[1]}")
    rows = elements.astype(np.float32).reshape(rows_shape)
    if not np.isfinite(rows).all():
        raise V2Error("input data must be finite (no NaN or infinity)")
    return rows


def check_output_names(wanted: list[str] | None) -> list[str]:
    """The output names asked for (None or empty: all of them, in the model's order), else V2Error."""
    names = list(wanted or OUTPUT_NAMES)
    unknown = [n for n in names if n not in OUTPUT_NAMES]
    if unknown:
        raise V2Error(f"unknown output {unknown[0]!r}; this model has {list(OUTPUT_NAMES)}")
    return names


def classifier_outputs(probs: np.ndarray, wanted: list[str] | None) -> list[OutputTensor]:
    """The classifier's outputs, those asked for, in the order asked."""
    every = {"probabilities": OutputTensor("probabilities", "FP32", probs.astype("<f4", copy=False)),
             "label": OutputTensor("label", "INT64", probs.argmax(axis=1).astype("<i8"))}
    return [every[n] for n in check_output_names(wanted)]


def model_metadata(config) -> dict:
    """The model's V2 metadata (a `ClassifierConfig`), with its batching settings as parameters."""
    return {
        "name": config.name, "versions": [MODEL_VERSION], "platform": "pytorch",
        "inputs": [{"name": INPUT_NAME, "datatype": "FP32", "shape": [-1, config.num_features]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, config.num_classes]},
                    {"name": "label", "datatype": "INT64", "shape": [-1]}],
        "parameters": {"max_batch_size": config.max_batch_size,
                       "preferred_batch_sizes": list(config.preferred_batch_sizes),
                       "max_queue_delay_us": config.max_queue_delay_us,
                       "dynamic_batching": config.dynamic_batching, "instances": config.instances},
    }


def _dtype(datatype: str) -> np.dtype:
    if datatype not in DATATYPES:
        raise V2Error(f"input datatype {datatype!r} not supported; use one of {sorted(DATATYPES)}")
    return DATATYPES[datatype]


def _element_count(shape: list[int]) -> int:
    if any(d < 0 for d in shape):
        raise V2Error(f"input shape must not have negative dimensions, got {list(shape)}")
    return int(np.prod(shape, dtype=np.int64)) if shape else 1
