"""A case: one operation, the variants that compute it, inputs per shape and a float64 reference.

Built-in cases live in ``kernels/`` (imported as ``fuseprof_kernels``); a user's own case
loads from ``module:attribute``, e.g. ``fuseprof profile mypkg.ops:MY_CASE``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fuseprof.builtin_cases import builtin_case_names
from fuseprof.errors import CaseNotFoundError, FuseprofError, InvalidArgumentError, UserCodeError

Shape = tuple[int, ...]
VariantKind = Literal["unfused", "compiled", "fused", "library"]

# rel_err = ‖out − ref‖₂ / ‖ref‖₂ bounds. Output rounding alone gives about 3e-4 (fp16) and
# 2e-3 (bf16) on random data; the bounds leave room for fp32 reductions in another order. A float8
# element rounds by at most 2^-4 (e4m3, 3 mantissa bits) or 2^-3 (e5m2) of itself, so the norm of the
# error is at most that share of the norm, plus what the wider steps before the cast added.
DEFAULT_TOLERANCES: dict[str, float] = {"float8_e5m2": 0.15, "float8_e4m3fn": 0.08, "float16": 2e-3,
                                        "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}

_SHAPE_RE = re.compile(r"^\d+(x\d+)*$")


@dataclass(frozen=True)
class Variant:
    """One way to compute the case. ``fn(*inputs)`` returns a tensor or a tuple of tensors.

    ``devices`` says where it runs; ``requires`` names modules it imports (Triton, Liger), so a
    machine without them skips the variant instead of failing the whole capture. ``own_graph``
    marks a variant that replays a CUDA graph of its own: it is timed as called only (capturing it
    into fuseprof's timing graph would nest one capture in another), its GPU columns null.
    """

    name: str
    fn: Callable[..., Any]
    kind: VariantKind
    description: str = ""
    devices: tuple[str, ...] = ("cpu", "cuda")
    requires: tuple[str, ...] = ()
    own_graph: bool = False

    def unavailable_reason(self, device_type: str) -> str | None:
        if device_type not in self.devices:
            return f"runs on {', '.join(self.devices)} only"
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        return f"needs {', '.join(missing)}" if missing else None


def lazy(module: str, attr: str) -> Callable[..., Any]:
    """A callable that imports ``module.attr`` on first use: keeps Triton and CUDA builds out of
    import time, so cases load on machines without them."""
    target: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not target:
            target.append(getattr(importlib.import_module(module), attr))
        return target[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = attr
    return call


@dataclass(frozen=True)
class Case:
    """A named operation with its variants; see ``fuseprof_kernels.rmsnorm_swiglu`` for an example."""

    name: str
    description: str
    variants: tuple[Variant, ...]
    make_inputs: Callable[..., tuple[Any, ...]]  # (shape, dtype, device, generator) -> inputs
    reference: Callable[..., Any]  # float64 inputs -> float64 outputs
    nominal_bytes: Callable[[Shape, str], int]  # bytes if each input is read once, each output written once
    default_shapes: tuple[Shape, ...]
    dtypes: tuple[str, ...] = ("float16",)
    tolerances: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    mutates_inputs: bool = False  # a variant writes its inputs: each variant is checked on inputs of its own

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise InvalidArgumentError(
            f"case {self.name!r} has no variant {name!r}; choose from: {', '.join(self.variant_names)}"
        )

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]


def parse_shape(text: str) -> Shape:
    """'1024x4096' -> (1024, 4096)."""
    text = text.strip().lower()
    if not _SHAPE_RE.match(text):
        raise InvalidArgumentError(f"shape {text!r} is not of the form MxN (e.g. 1024x4096)")
    shape = tuple(int(p) for p in text.split("x"))
    if any(d <= 0 for d in shape):
        raise InvalidArgumentError(f"shape {text!r} has a zero dimension")
    return shape


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """'128x4096,1024x8192' -> ((128, 4096), (1024, 8192))."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise InvalidArgumentError("--shapes is empty; give e.g. 128x4096,1024x4096")
    return tuple(parse_shape(p) for p in parts)


def shape_label(shape: Shape) -> str:
    return "x".join(str(d) for d in shape)


def shape_seed(seed: int, shape: Shape) -> int:
    """The generator seed of a shape's inputs: from (seed, shape) only, not from which shapes ran
    before, so a shape gets the same inputs in a sharded run, a one-GPU run and under ncu."""
    return seed * 1_000_003 + zlib.crc32(shape_label(shape).encode())


def user_frame(exc: BaseException, source: str | None) -> str:
    """'path:line' of the innermost traceback frame in the user's own file (or the last frame
    outside fuseprof and importlib), for a one-line report of a bug in their module."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if source and Path(f.filename).resolve() == Path(source).resolve()]
    outside = [f for f in frames if "importlib" not in f.filename and "/fuseprof/" not in f.filename]
    chosen = mine or outside or list(frames)
    return f"{chosen[-1].filename}:{chosen[-1].lineno}" if chosen else "?"


def user_call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, a case's own code (its inputs, reference or a variant): a bug in it is one line with
    the user's file and line and what fuseprof was calling, not a traceback through fuseprof's own."""
    try:
        return fn(*args)
    except (FuseprofError, KeyboardInterrupt):
        raise
    except Exception as exc:
        code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
        raise UserCodeError(user_frame(exc, code.co_filename if code else None), f"{type(exc).__name__}: {exc}",
                            what) from None


def _import_user_module(module_name: str, spec: str) -> Any:
    """Import ``module_name`` as the user's own code: the current directory is on the path (as for
    ``python -m``), and an error inside their module is one line naming their file and line."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # a bug in the user's module: their file and line, not a traceback
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if missing and (module_name == missing or module_name.startswith(f"{missing}.")):  # the module itself
            known = ", ".join(builtin_case_names()) or "(none installed)"
            raise CaseNotFoundError(
                f"cannot import {module_name!r} for case {spec!r} ({exc}). Built-in cases: {known}; a case of "
                "your own is module:attribute (importable from the current directory) or path/to/file.py:NAME"
            ) from None
        found = importlib.util.find_spec(module_name.split(".")[0])
        raise CaseNotFoundError(f"{user_frame(exc, found.origin if found else None)}: {type(exc).__name__}: "
                                f"{exc} (while importing {module_name!r} for case {spec!r})") from None


def _import_user_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise CaseNotFoundError(f"{path}: no such file (case {spec!r})")
    module_name = f"fuseprof_user_{abs(hash(str(path.resolve())))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise CaseNotFoundError(f"{path}: not a Python file fuseprof can import (case {spec!r})")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.resolve().parent))  # its own sibling imports work as under `python file.py`
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise CaseNotFoundError(f"{user_frame(exc, str(path))}: {type(exc).__name__}: {exc} "
                                f"(while importing {path} for case {spec!r})") from None
    return module


def validate_case(case: Case, where: str) -> Case:
    """Refuse a case fuseprof would mis-handle later: unknown variant kinds, bad shapes, no dtypes."""
    kinds = ("unfused", "compiled", "fused", "library")
    for variant in case.variants:
        if variant.kind not in kinds:
            raise InvalidArgumentError(f"{where}: variant {variant.name!r} has kind {variant.kind!r}; use one of "
                                       f"{', '.join(kinds)}")
        if not callable(variant.fn):
            raise InvalidArgumentError(f"{where}: variant {variant.name!r} is not callable")
    names = [v.name for v in case.variants]
    if len(set(names)) != len(names) or not names:
        raise InvalidArgumentError(f"{where}: variant names must be unique and at least one: {names}")
    for shape in case.default_shapes:
        if not isinstance(shape, tuple) or not shape or not all(isinstance(d, int) and d > 0 for d in shape):
            raise InvalidArgumentError(f"{where}: default shape {shape!r} is not a tuple of positive ints")
    if not case.dtypes or any(d not in case.tolerances for d in case.dtypes):
        raise InvalidArgumentError(f"{where}: every dtype in {case.dtypes} needs a tolerance")
    return case


def builtin_case(name: str, where: str) -> Case:
    """A case shipped in ``kernels/``, by its name alone: never a path or a module, so a file that names a case
    (a registry's ``[[kernel_match]]``) can run no code but fuseprof's own; the user's own code runs only from a
    case they name on the command line (``load_case``). ``where`` says who named it, for the error."""
    known = builtin_case_names()
    if name not in known:
        raise CaseNotFoundError(f"{where}: case {name!r} is not a built-in case; a registry may name only these "
                                f"(fuseprof cases): {', '.join(known) or '(none installed)'}")
    case = getattr(importlib.import_module(f"fuseprof_kernels.{name}"), "CASE", None)
    if not isinstance(case, Case):
        raise CaseNotFoundError(f"{where}: fuseprof_kernels.{name}:CASE is not a fuseprof.case.Case")
    return validate_case(case, name)


def load_case(spec: str) -> Case:
    """Resolve a built-in case name, ``module:attribute`` (from the current directory too) or
    ``path/to/file.py:NAME`` to a validated Case."""
    if ":" in spec:
        source, _, attr = spec.rpartition(":")
        module = (_import_user_file(Path(source), spec) if source.endswith(".py") or "/" in source
                  else _import_user_module(source, spec))
    else:
        source, attr = f"fuseprof_kernels.{spec}", "CASE"
        module = _import_user_module(source, spec)
    case = getattr(module, attr, None)
    if not isinstance(case, Case):
        raise CaseNotFoundError(f"{source}:{attr} is not a fuseprof.case.Case (got {type(case).__name__})")
    return validate_case(case, spec)


def select_variants(case: Case, names: Sequence[str] | None, device_type: str = "cuda") -> tuple[Variant, ...]:
    """The named variants (each must run here), or every variant that runs here."""
    if not names:
        chosen = tuple(v for v in case.variants if v.unavailable_reason(device_type) is None)
        if not chosen:
            raise InvalidArgumentError(f"case {case.name!r} has no variant that runs on {device_type}")
        return chosen
    chosen = tuple(case.variant(n) for n in names)
    for v in chosen:
        reason = v.unavailable_reason(device_type)
        if reason:
            raise InvalidArgumentError(f"variant {v.name!r} of {case.name!r} cannot run on {device_type}: {reason}")
    return chosen


def compile_static(fn: Callable[..., Any], mode: str | None = None) -> Callable[..., Any]:
    """``torch.compile(fn, dynamic=False, mode=mode)`` that recompiles per shape instead of falling
    back, built on first call (importing a case imports no torch and changes no global setting).

    With dynamic=False every new shape is a recompile; past Dynamo's recompile limit (8) it
    silently runs the function eagerly, and a sweep of 12 shapes would then time eager code
    under the name "compiled". The limit is raised, when the first compiled variant runs, so each
    shape gets its own graph. With ``mode="reduce-overhead"`` (CUDA graphs) each call is marked as
    a new step, as a serving loop marks each decode step, so no call reuses a previous one's outputs.
    """
    compiled: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        import torch

        if not compiled:
            import torch._dynamo.config as dynamo_config

            for knob in ("recompile_limit", "cache_size_limit"):
                if hasattr(dynamo_config, knob):
                    setattr(dynamo_config, knob, max(getattr(dynamo_config, knob), 256))
            compiled.append(torch.compile(fn, dynamic=False, mode=mode))
        if mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        return compiled[0](*args, **kwargs)

    suffix = f"_{mode.replace('-', '_')}" if mode else ""
    call.__name__ = call.__qualname__ = f"compiled_{getattr(fn, '__name__', 'fn')}{suffix}"
    return call


def graph_replayed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` captured as a CUDA graph on its first call with given inputs and replayed after, as
    engines run eager decode steps: one launch per call, outputs in the graph's own buffers.

    One graph per set of inputs (the same objects, by identity), so a later call with a shape's
    inputs replays without capturing again; a graph is released with its first input.
    """
    import weakref

    graphs: dict[tuple[int, ...], tuple[Any, Any]] = {}

    def call(*args: Any) -> Any:
        key = tuple(id(a) for a in args)
        if key not in graphs:
            from fuseprof.capture.timing import capture_graph

            graphs[key] = capture_graph(fn, args)
            weakref.finalize(args[0], graphs.pop, key, None)  # ids are reused once the inputs are gone
        graph, outputs = graphs[key]
        graph.replay()
        return outputs

    call.__name__ = call.__qualname__ = f"graph_replayed_{getattr(fn, '__name__', 'fn')}"
    return call


def builtin_case_summaries() -> list[dict[str, str]]:
    """Name, variants and description of each built-in case, read from its source without importing
    it (importing a case imports torch: seconds), for ``fuseprof cases``."""
    import ast

    spec = importlib.util.find_spec("fuseprof_kernels")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(list(spec.submodule_search_locations)[0])

    def calls(tree: ast.AST, func: str) -> list[ast.Call]:
        return [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == func]

    rows = []
    for name in builtin_case_names():
        tree = ast.parse((root / name / "__init__.py").read_text())
        cases = calls(tree, "Case")
        # a case defined in a sibling package and re-exported (silu_mul is silu_and_mul's SPLIT_CASE)
        source = next((str(n.module).split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                       and not cases and (n.module or "").startswith("fuseprof_kernels.")), None)
        if source:
            tree = ast.parse((root / source / "__init__.py").read_text())
            cases = [c for c in calls(tree, "Case") if any(kw.arg == "name" and getattr(kw.value, "value", None)
                                                           == name for kw in c.keywords)]
        variants = [str(c.args[0].value) for c in calls(tree, "Variant")
                    if c.args and isinstance(c.args[0], ast.Constant)]
        description = next((str(kw.value.value) for c in cases for kw in c.keywords
                            if kw.arg == "description" and isinstance(kw.value, ast.Constant)), "")
        rows.append({"case": name, "variants": ",".join(variants), "description": description})
    return rows
