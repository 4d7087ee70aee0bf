"""Which kernels of a trace the registry names and categorises, and which stay unknown.

    python scripts/kernel_coverage.py TRACE [TRACE ...] [--all]

Per trace, every distinct kernel name with its GPU time, the category and family the default registry gives it
(by its launching op first, then by its name: ``Registry.match``), and the audit's verdicts. A kernel is *unknown*
when no row names it (family ``(no rule)``); the totals say how much of the kernel time that is. ``--all`` lists
every kernel, not only the unknown ones. Run over the public serving traces of ``../shared/thirdparty-traces``
(``sglang_*``, ``vllm_*``) for issue 60's "every kernel of the families named and categorised".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN = "(no rule)"


def coverage(path: Path, every: bool) -> list[str]:
    from fuseprof.analysis import analyze

    (result,) = analyze([path], workers=1, window="all")
    events = result.events[result.events["kind"] == "kernel"]
    by_name = events.groupby("name", sort=False).agg(time_ns=("dur_ns", "sum"), category=("category", "first"),
                                                    family=("family", "first")).sort_values("time_ns", ascending=False)
    total = float(by_name["time_ns"].sum()) or 1.0
    unknown = by_name[by_name["family"] == UNKNOWN]
    lines = [f"== {path.name}: {len(by_name)} distinct kernels, {len(unknown)} unknown "
             f"({100 * unknown['time_ns'].sum() / total:.1f}% of kernel time)"]
    for name, row in (by_name if every else unknown).iterrows():
        lines.append(f"  {100 * row['time_ns'] / total:5.1f}%  {row['category']:<13} {row['family'][:48]:<48} {name[:110]}")
    verdicts = dict(zip(result.audit["fusion"], result.audit["verdict"])) if not result.audit.empty else {}
    lines.append("  audit: " + "; ".join(f"{k}: {v}" for k, v in verdicts.items()))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--all", action="store_true", help="list every kernel, not only the unknown ones")
    args = parser.parse_args(argv)
    for path in args.traces:
        print("\n".join(coverage(path, args.all)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
