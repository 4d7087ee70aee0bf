"""What ``fuseprof dashboard PATH`` was given, found from file names and manifests alone (no table read, no
pandas): the bundles, whose kernel tables feed the capture pages, and the torch.profiler traces — trace files
(.json, .json.gz) and the raw traces bundles keep — which the Model page analyses as ``fuseprof analyze``
does. The command checks a path with it before the server starts; the app reads the same."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fuseprof.bundle.files import RAW, find_bundles, is_bundle, read_manifest
from fuseprof.errors import BundleError, FuseprofError
from fuseprof.parse.execution_trace import is_execution_trace

TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class Inputs:
    """``bundles``: every bundle at the path (itself, or those directly under a folder); ``traces``: name →
    what the Model page analyses (a trace file, or a bundle that keeps a raw trace); ``captures``: the
    bundles ``fuseprof profile`` wrote (the Layer page's)."""

    path: Path
    bundles: tuple[Path, ...]
    traces: dict[str, Path]
    captures: tuple[Path, ...]


def _is_trace_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(TRACE_SUFFIXES) and not is_execution_trace(path)


def _kind(bundle: Path) -> str | None:
    try:
        return read_manifest(bundle).get("kind")
    except BundleError:  # a damaged bundle: the capture pages leave it out with its reason
        return None


def find_inputs(path: Path) -> Inputs:
    """What ``path`` holds for the dashboard; a one-line error naming the path when it holds nothing to show."""
    if _is_trace_file(path):
        return Inputs(path, (), {path.name: path}, ())
    if not path.exists():
        raise FuseprofError(f"{path}: no such file or folder; give a torch.profiler trace (.json, .json.gz), a "
                            "bundle, or a folder of them")
    if not path.is_dir():
        raise FuseprofError(f"{path}: not a torch.profiler trace (.json, .json.gz), a bundle or a folder")
    bundles = tuple(find_bundles(path))
    traces = {b.name: b for b in bundles if any(p for p in (b / RAW).glob("*.json*") if not is_execution_trace(p))}
    if not is_bundle(path):
        traces.update({p.name: p for p in sorted(path.iterdir()) if _is_trace_file(p)})
    if not bundles and not traces:
        raise FuseprofError(f"{path}: holds no torch.profiler trace (.json, .json.gz) and no fuseprof bundle")
    captures = tuple(b for b in bundles if _kind(b) == "capture")
    return Inputs(path, bundles, dict(sorted(traces.items(), key=lambda item: (not item[0].startswith("llama4l"),
                                                                              item[0]))), captures)
