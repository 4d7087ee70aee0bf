"""The gate's module rules (issue 62 point 3): ``module:PATH:+N%`` judges one module's GPU time per step
(the module and those under it, as the aligned comparison counts it: ``fuseprof.analysis.judgements.changes``), and
``module:*:+N%`` judges every module one by one, so a regression in one part cannot hide behind a faster
other. A noise floor keeps small or noisy parts out: a module under ``FLOOR_PCT`` of A's step is "not
judged", and a change inside A's own step-to-step spread of that module is "within noise". A module with
time in one run only is reported "new" or "gone" with its time; neither passes nor fails the gate.
"""

from __future__ import annotations

import difflib
import math
import re

import numpy as np
import pandas as pd

from fuseprof.errors import InvalidArgumentError

FLOOR_PCT = 1.0  # a module under 1% of A's step is not judged: its noise is larger than what it could hide
EVERY = "*"


def normal_path(path: str) -> str:
    """A module path as the trace's module column writes it: ``a/b`` and ``a / b`` are one path."""
    return re.sub(r"\s*/\s*", " / ", path.strip())


def _under(parts: pd.Series, path: str) -> pd.Series:
    """Whether each part is ``path`` or lies under it (a submodule, or its backward)."""
    return (parts == path) | parts.str.startswith(path + " / ") | parts.str.startswith(path + " (")


def check_target(text: str, path: str, parts: set[str]) -> None:
    """An error, with the nearest paths, for a module rule over a path neither run has."""
    if path == EVERY or any(p == path or p.startswith(path + " / ") or p.startswith(path + " (") for p in parts):
        return
    near = difflib.get_close_matches(path, sorted(parts), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else "; fuseprof diff A B lists the modules"
    raise InvalidArgumentError(f"--fail-on {text!r}: module {path!r} is in neither trace{hint}")


def _per_step(steps: pd.DataFrame, side: str, mask: pd.Series) -> np.ndarray:
    frame = steps[(steps["side"] == side) & mask]
    return frame.groupby("step")["time_ns"].sum().reindex(steps.loc[steps["side"] == side, "step"].unique(),
                                                          fill_value=0).to_numpy("float64")


def module_rows(text: str, path: str, limit: float, relative: bool, steps: pd.DataFrame,
                basis: str) -> list[dict[str, object]]:
    """The verdict rows of one module rule over ``steps`` (``changes.per_step`` by part: side, step, part,
    time_ns); one row per module for ``module:*``."""
    from fuseprof.analysis.judgements.noise import robust_noise_pct

    step_a = _per_step(steps, "A", pd.Series(True, index=steps.index))
    whole = float(np.median(step_a)) if len(step_a) else 0.0
    paths = sorted(steps["part"].unique()) if path == EVERY else [path]
    rows = []
    for each in paths:
        mask = steps["part"] == each if path == EVERY else _under(steps["part"], each)
        values_a, values_b = _per_step(steps, "A", mask), _per_step(steps, "B", mask)
        va, vb = float(np.median(values_a)) if len(values_a) else 0.0, float(np.median(values_b)) if len(
            values_b) else 0.0
        change = vb - va
        change_pct = 100 * change / va if va else (math.inf if change > 0 else 0.0)
        noise = robust_noise_pct(values_a) if len(values_a) >= 3 and va else None
        over = change_pct > limit if relative else change > limit
        status = ("new" if not va and vb else "gone" if va and not vb else "no change" if change == 0 else
                  f"not judged (under {FLOOR_PCT:g}% of the step)" if whole and 100 * va / whole < FLOOR_PCT else
                  "ok" if not over else "within noise" if noise is not None and change_pct <= noise else "BROKEN")
        rule = text if path != EVERY else text.replace(f"module:{EVERY}:", f"module:{each}:", 1)
        rows.append({"rule": rule, "module": each, "a": va, "b": vb, "change": change, "change_pct": change_pct,
                     "noise_pct": noise, "status": status, "basis": basis})
    return rows
