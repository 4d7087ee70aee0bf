"""One function, old and new, on every call the analyses of every trace make: are its answers the same?

    python scripts/compare_calls.py fuseprof.analysis.paths.path path_top --before REV

How each speed change of issue #35 was checked before it was kept: a faster function must give the same answer on
every input the product gives it, not on a test's few. The function as it is at REV (``git show REV:its file``,
loaded as a module of its own, so it calls its own helpers as they were) runs beside the working tree's on each
call that ``fuseprof analyze`` of every committed and shared trace (``snapshot_analyses.traces``) makes, with the
trace store off, and the two answers are compared strictly: frames and series equal with their dtypes and index,
and each cell's Python type and repr equal (pandas' own check takes None, NaN and pd.NA as equal); lists, tuples and
dicts equal with their order. It prints the calls, the first lines of each difference and both versions' time.
Exits 1 when any call differed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def same(new: Any, old: Any) -> str | None:
    """Why two answers differ, or None when they are the same (the module docstring's rules)."""
    try:
        if isinstance(new, (pd.DataFrame, pd.Series)):
            check = pd.testing.assert_frame_equal if isinstance(new, pd.DataFrame) else pd.testing.assert_series_equal
            check(new, old, check_exact=True)
            cells = ([new[c].tolist() for c in new.columns], [old[c].tolist() for c in old.columns]) \
                if isinstance(new, pd.DataFrame) else ([new.tolist()], [old.tolist()])
            for a, b in zip(*cells):
                if [(type(v), repr(v)) for v in a] != [(type(v), repr(v)) for v in b]:
                    return "a cell's type or repr differs"
            return None
        if isinstance(new, dict) and isinstance(old, dict):
            return None if list(new) == list(old) and all(same(new[k], old[k]) is None for k in new) else \
                "dicts differ (keys, their order or values)"
        if isinstance(new, (list, tuple)) and isinstance(old, (list, tuple)):
            return None if len(new) == len(old) and all(same(a, b) is None for a, b in zip(new, old)) else \
                "sequences differ"
        return None if new == old else f"{new!r:.200} != {old!r:.200}"
    except AssertionError as e:
        return str(e)


def old_module(module: Any, rev: str) -> Any:
    """``module`` as its file is at ``rev``, loaded under a name of its own."""
    relative = Path(module.__file__).resolve().relative_to(ROOT)
    source = subprocess.run(["git", "show", f"{rev}:{relative.as_posix()}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / relative.name
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"{module.__name__}__at_{rev}", path)
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = loaded
        spec.loader.exec_module(loaded)
    return loaded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", help="the function's module, e.g. fuseprof.analysis.paths.path")
    parser.add_argument("function", help="its name in the module")
    parser.add_argument("--before", required=True, help="the revision whose version is compared (e.g. HEAD)")
    args = parser.parse_args()
    os.environ["FUSEPROF_CACHE"] = "off"  # every trace analysed, none answered from the store
    warnings.simplefilter("ignore")
    from snapshot_analyses import traces

    from fuseprof.cli import main as fuseprof

    module = importlib.import_module(args.module)
    new, old = getattr(module, args.function), getattr(old_module(module, args.before), args.function)
    stats = {"calls": 0, "differ": 0, "new s": 0.0, "old s": 0.0}
    differences: list[str] = []  # printed after each trace (the command's own output is silenced meanwhile)

    def both(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        answer = new(*a, **k)
        stats["new s"] += time.perf_counter() - start
        start = time.perf_counter()
        before = old(*a, **k)
        stats["old s"] += time.perf_counter() - start
        stats["calls"] += 1
        why = same(answer, before)
        if why is not None:
            stats["differ"] += 1
            differences.append(f"  differs on call {stats['calls']}: {why[:300]}")
        return answer

    for loaded in list(sys.modules.values()):  # every module that imported the function by name
        if getattr(loaded, args.function, None) is new:
            setattr(loaded, args.function, both)
    for name, arguments in traces():
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            fuseprof(["analyze", *arguments, "--format", "json", "--workers", "1"])
        print(f"{name}: {stats['calls']} call(s) so far", *differences, sep="\n", flush=True)
        differences.clear()
    print(f"{args.module}.{args.function}: {stats['calls']} call(s), {stats['differ']} differ; "
          f"new {stats['new s']:.3f} s, old ({args.before}) {stats['old s']:.3f} s")
    return 1 if stats["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
