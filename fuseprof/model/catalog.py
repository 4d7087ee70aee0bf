"""What the manifests say about variants: their kind (unfused, compiled, fused, library) and how
many calls each profiled range holds."""

from __future__ import annotations

from pathlib import Path

from fuseprof.bundle.files import find_bundles, read_manifest


def variant_kinds(traces: str | Path) -> dict[str, str]:
    """Variant name -> kind, from every capture and bench manifest under ``traces``."""
    kinds: dict[str, str] = {}
    for bundle in find_bundles(Path(traces)):
        manifest = read_manifest(bundle)
        entries = list(manifest.get("variants", []))
        for case in manifest.get("cases", []):
            entries += case.get("variants", [])
        for entry in entries:
            kinds.setdefault(entry["name"], entry["kind"])
    return kinds


def profiler_repeats(traces: str | Path) -> dict[str, int]:
    """Bundle name -> calls recorded per profiler range (3 unless the manifest says otherwise)."""
    out = {}
    for bundle in find_bundles(Path(traces)):
        out[bundle.name] = int((read_manifest(bundle).get("profiler") or {}).get("repeats_per_range", 1))
    return out
