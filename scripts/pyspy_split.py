"""Where an analysis' samples fall: fuseprof's own Python, or the libraries under it (pandas, NumPy, ...).

    pip install py-spy
    py-spy record -r 500 -f raw -o analysis.raw -- python scripts/bench_phases.py FOLDER --traces 41
    python scripts/pyspy_split.py analysis.raw

Each sample taken inside ``analyze_tables`` is put to the library of its deepest frame that is not the standard
library (``bisect``, ``re`` and ``collections`` called from fuseprof count as fuseprof's), and the shares printed.
Why: it bounds what rewriting sections on arrays can save. Time in fuseprof's own Python (per-item graph work,
loops over rows) stays however cheap pandas' calls become; only compiled code, or doing less, removes it.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LIBRARIES = ("fuseprof", "pandas", "numpy", "pyarrow", "msgspec")
_FRAME = re.compile(r"(.*) \((.*):\d+\)$")


def library(path: str) -> str | None:
    """The library a frame's file belongs to (None: the standard library, or the interpreter)."""
    if "/fuseprof/" in path or path.startswith("fuseprof/"):
        return "fuseprof"
    head = path.split("site-packages/")[-1].split("/")[0]
    return head if head in LIBRARIES else None


def split(raw: Path, within: str = "analyze_tables") -> tuple[Counter[str], int]:
    """Samples inside ``within`` per library of their deepest non-standard frame, and their number."""
    shares: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [m.groups() for m in map(_FRAME.match, stack.split(";")) if m]
        if not any(name == within for name, _ in frames):
            continue
        n = int(count)
        total += n
        shares[next((lib for _, path in reversed(frames) if (lib := library(path))), "other")] += n
    return shares, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="py-spy's output with -f raw")
    parser.add_argument("--within", default="analyze_tables", help="the function whose samples count")
    args = parser.parse_args()
    if not args.raw.is_file():
        parser.error(f"{args.raw}: no such file (py-spy record -f raw -o {args.raw} -- ...)")
    shares, total = split(args.raw, args.within)
    if not total:
        parser.error(f"{args.raw}: no sample inside {args.within}")
    print(f"{total} samples inside {args.within}")
    for name, n in shares.most_common():
        print(f"{name:>10} {100 * n / total:5.1f}%")


if __name__ == "__main__":
    main()
