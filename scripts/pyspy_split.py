"""Where an analysis' samples fall: fuseprof's own Python, or the libraries under it (pandas, NumPy, ...).

    pip install py-spy
    py-spy record -r 500 -f raw -o analysis.raw -- python scripts/bench_phases.py FOLDER --traces 41
    python scripts/pyspy_split.py analysis.raw

Each sample taken inside ``analyze_tables`` is put to the library of its deepest frame that is not the standard
library, the shares printed, and fuseprof's functions by their samples. Why: it bounds what rewriting sections on
arrays can save. Time in fuseprof's own Python (per-item graph work, loops over rows) stays however cheap pandas'
calls become; only compiled code, or doing less, removes it. fuseprof's share is an upper bound of its own Python:
the standard library it calls (``bisect``, ``re``, ``collections``) counts as its, and so does a NumPy or builtin
function called from it that runs in C (py-spy without ``--native`` shows no frame for it).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LIBRARIES = ("fuseprof", "pandas", "numpy", "pyarrow", "msgspec")
_FRAME = re.compile(r"(.*) \((.*):\d+\)$")


def library(path: str) -> str | None:
    """The library a frame's file belongs to (None: the standard library, or the interpreter): the package a path
    starts with (py-spy writes an installed module's path from its package on, ``pandas/core/frame.py``) or names
    after ``site-packages/``; else fuseprof where the path runs through a fuseprof folder (so a checkout folder called
    fuseprof holding a venv does not make pandas fuseprof's)."""
    head = path.rsplit("site-packages/", 1)[-1].split("/")[0]
    if head in LIBRARIES:
        return head
    return "fuseprof" if "site-packages/" not in path and "/fuseprof/" in f"/{path}" else None


def split(raw: Path, within: str = "analyze_tables") -> tuple[Counter[str], Counter[str], int]:
    """Samples inside ``within``: per library of their deepest non-standard frame, per fuseprof function (where
    that library is fuseprof), and their number."""
    shares: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [m.groups() for m in map(_FRAME.match, stack.split(";")) if m]
        if not any(name == within for name, _ in frames):
            continue
        n = int(count)
        total += n
        leaf = next(((name, path, lib) for name, path in reversed(frames) if (lib := library(path))), None)
        shares[leaf[2] if leaf else "other"] += n
        if leaf and leaf[2] == "fuseprof":
            functions[f"{leaf[0]} ({leaf[1].rsplit('fuseprof/', 1)[-1]})"] += n
    return shares, functions, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path, help="py-spy's output with -f raw")
    parser.add_argument("--within", default="analyze_tables", help="the function whose samples count")
    parser.add_argument("--top", type=int, default=15, help="how many of fuseprof's functions to list")
    args = parser.parse_args()
    if not args.raw.is_file():
        parser.error(f"{args.raw}: no such file (py-spy record -f raw -o {args.raw} -- ...)")
    shares, functions, total = split(args.raw, args.within)
    if not total:
        parser.error(f"{args.raw}: no sample inside {args.within}")
    print(f"{total} samples inside {args.within}")
    for name, n in shares.most_common():
        print(f"{name:>10} {100 * n / total:5.1f}%")
    print(f"fuseprof's functions, by their share of the samples (the first {args.top}):")
    for name, n in functions.most_common(args.top):
        print(f"{100 * n / total:5.1f}% {name}")


if __name__ == "__main__":
    main()
