"""Which kernels of a trace the registry names and categorises, and which stay unknown.

    python scripts/kernel_coverage.py TRACE [TRACE ...] [--all] [--markdown]

Per trace, every distinct kernel name with its GPU time, the category and family the default registry gives it
(by its launching op first, then by its name: ``Registry.match``), and the audit's verdicts. A kernel is named by a
*mined* family (``kernel_families.json``: a family whose names come from its library's sources, family ``… (mined)``),
by one of the registry's written rows (aten ops, the generic kernel words), or *unknown* (family ``(no rule)``); the
totals say how much of the kernel time each is. ``--all`` lists every kernel, not only the unknown ones;
``--markdown`` prints one table over the traces (counts and time shares) and then each trace's unknown kernels.
Run over public serving traces (issue 60's "every kernel of the families named and categorised, with the list of
what stays unknown"); ``docs/measurements/serving-traces-sources.md`` says which traces and where they came from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN = "(no rule)"
MINED = " (mined)"


def kernels(path: Path) -> tuple[Any, dict[str, str]]:
    """The trace's distinct kernels (time, category, family, ``named_by``: mined / row / unknown), by time, and the
    audit's verdicts."""
    from fuseprof.analysis import analyze

    (result,) = analyze([path], workers=1, window="all")
    events = result.events[result.events["kind"].isin(["kernel", "communication"])]
    by_name = events.groupby("name", sort=False).agg(time_ns=("dur_ns", "sum"), category=("category", "first"),
                                                    family=("family", "first")).sort_values("time_ns", ascending=False)
    by_name["named_by"] = [("unknown" if f == UNKNOWN else "mined" if str(f).endswith(MINED) else "row")
                           for f in by_name["family"]]
    verdicts = dict(zip(result.audit["fusion"], result.audit["verdict"])) if not result.audit.empty else {}
    return by_name, verdicts


def share(by_name: Any, named_by: str) -> tuple[int, float]:
    """How many distinct kernels ``named_by`` names, and their share of the kernel time (%)."""
    total = float(by_name["time_ns"].sum()) or 1.0
    part = by_name[by_name["named_by"] == named_by]
    return len(part), 100 * float(part["time_ns"].sum()) / total


def coverage(path: Path, every: bool) -> list[str]:
    by_name, verdicts = kernels(path)
    total = float(by_name["time_ns"].sum()) or 1.0
    unknown = by_name[by_name["named_by"] == "unknown"]
    lines = [f"== {path.name}: {len(by_name)} distinct kernels, {len(unknown)} unknown "
             f"({100 * unknown['time_ns'].sum() / total:.1f}% of kernel time); mined families name "
             f"{share(by_name, 'mined')[0]} ({share(by_name, 'mined')[1]:.1f}%)"]
    for name, row in (by_name if every else unknown).iterrows():
        lines.append(f"  {100 * row['time_ns'] / total:5.1f}%  {row['category']:<13} {row['family'][:48]:<48} {name[:110]}")
    lines.append("  audit: " + "; ".join(f"{k}: {v}" for k, v in verdicts.items()))
    return lines


def markdown(paths: list[Path]) -> list[str]:
    """One table over the traces, then each trace's unknown kernels (name, category given, time share)."""
    lines = ["| trace | distinct kernels | mined families: n (time) | registry rows: n (time) | unknown: n (time) |",
             "|---|---:|---:|---:|---:|"]
    unknown_lists = []
    for path in paths:
        by_name, _ = kernels(path)
        cells = [f"{n} ({pct:.1f}%)" for n, pct in (share(by_name, k) for k in ("mined", "row", "unknown"))]
        lines.append(f"| {path.name} | {len(by_name)} | " + " | ".join(cells) + " |")
        total = float(by_name["time_ns"].sum()) or 1.0
        unknown = by_name[by_name["named_by"] == "unknown"]
        unknown_lists.append(f"\n**{path.name}**: " + ("none" if unknown.empty else ""))
        unknown_lists += [f"- `{name[:140]}` ({100 * row['time_ns'] / total:.2f}%, category {row['category']})"
                          for name, row in unknown.iterrows()]
    return lines + ["", "Unknown kernels (no row names them):"] + unknown_lists


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--all", action="store_true", help="list every kernel, not only the unknown ones")
    parser.add_argument("--markdown", action="store_true", help="one table over the traces, then their unknown kernels")
    args = parser.parse_args(argv)
    if args.markdown:
        print("\n".join(markdown(args.traces)))
        return 0
    for path in args.traces:
        print("\n".join(coverage(path, args.all)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
