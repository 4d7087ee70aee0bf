"""The PyTorch execution trace (``torch.profiler.ExecutionTraceObserver``, the Chakra format) as one table:
per recorded op, the storages of the tensors it read and of those it returned.

A Kineto trace records each op's shapes and dtypes but not which tensor it took; the execution trace
records every tensor argument and result as ``[tensor id, storage id, offset, elements, item size,
device]``. Its op nodes carry ``rf_id``, the ``Record function id`` of the same op in the Kineto trace,
which is how the two are joined (``fuseprof.analysis.facts.opgraph``). Only what dataflow needs is decoded:
the node's name, its ``rf_id``, and per argument (the same positions as the Kineto trace's ``Input
Dims``) the storage id of a tensor, or of each tensor of a TensorList; everything else is skipped.
A view's storage is its base's, so dataflow by storage goes through views and slices.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from fuseprof.errors import TraceFormatError
from fuseprof.parse.textio import read_bytes

if TYPE_CHECKING:
    import pandas as pd

EXECUTION_TRACE = "execution_trace.json.gz"  # its name in a bundle's raw/, beside the Chrome trace


def is_execution_trace(path: Path) -> bool:
    """An execution trace by its name: a bundle's ``raw/execution_trace.json.gz``, or ``X.et.json[.gz]``."""
    return path.name == EXECUTION_TRACE or path.name.endswith((".et.json", ".et.json.gz"))


def execution_trace_beside(trace: Path) -> Path | None:
    """The execution trace recorded beside a Kineto trace: ``X.et.json[.gz]`` next to ``X.json[.gz]``, or the
    bundle's ``raw/execution_trace.json.gz`` next to its one trace; None when there is none."""
    stem = trace.name.removesuffix(".gz").removesuffix(".json")
    for candidate in (trace.with_name(f"{stem}.et.json.gz"), trace.with_name(f"{stem}.et.json"),
                      trace.with_name(EXECUTION_TRACE)):
        if candidate.is_file() and candidate != trace:
            return candidate
    return None


class _Values(msgspec.Struct, gc=False):
    values: list[Any] = []
    types: list[Any] = []


class _Attr(msgspec.Struct, gc=False):
    name: str = ""
    value: Any = None


class _Node(msgspec.Struct, gc=False):
    id: int = -1
    name: str = ""
    inputs: _Values = msgspec.field(default_factory=_Values)
    outputs: _Values = msgspec.field(default_factory=_Values)
    attrs: list[_Attr] = []


class _Trace(msgspec.Struct):
    nodes: list[_Node]
    schema: str = ""


_DECODER = msgspec.json.Decoder(_Trace)


def _storages(values: _Values) -> list[int | list[int] | None]:
    """Per argument: the storage id a tensor argument reads, the ids of a TensorList's tensors, or None."""
    found: list[int | list[int] | None] = []
    for value, kind in zip(values.values, values.types):
        kind = str(kind)
        if kind.startswith("Tensor") and _is_tensor(value):
            found.append(int(value[1]))
        elif kind.startswith("GenericList") and isinstance(value, list) and any(_is_tensor(v) for v in value):
            found.append([int(v[1]) for v in value if _is_tensor(v)])
        else:
            found.append(None)
    return found


def _is_tensor(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= 6 and all(isinstance(v, int) for v in value[:5])


def read_execution_trace(path: Path) -> pd.DataFrame:
    """One row per op node: ``rf_id``, ``name``, ``reads`` and ``writes`` (per argument and per result: a
    storage id, a list of them, or None), in the file's node order."""
    try:
        trace = _DECODER.decode(read_bytes(path))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise TraceFormatError(f"{path}: not a PyTorch execution trace ({exc})") from None
    rows = []
    for node in trace.nodes:
        rf_id = next((a.value for a in node.attrs if a.name == "rf_id"), None)
        if not isinstance(rf_id, int) or rf_id <= 0:
            continue  # the root and thread nodes
        rows.append({"rf_id": rf_id, "name": node.name, "reads": _storages(node.inputs),
                     "writes": _storages(node.outputs)})
    import pandas as pd  # lazily: which file is beside a trace is asked before pandas is loaded (answers)

    return pd.DataFrame(rows, columns=["rf_id", "name", "reads", "writes"])
