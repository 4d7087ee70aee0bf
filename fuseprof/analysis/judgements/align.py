"""Align two runs by what they compute, not by kernel names or positions (issue 62).

Each GPU event of a profiler step becomes a *unit* with platform-invariant features: the ``nn.Module``
path that launched it (the backward of a module carries its forward's path, an optimizer step its
phase), the op with its functional input shapes and dtypes, the op family, the category (GEMM,
attention, elementwise, …) and whether it anchors the model (GEMM, attention, convolution,
communication). A and B's units are aligned in order (Needleman–Wunsch with a linear gap): a pair is
allowed only within one category and, where both sides name a module, one module, and scores higher
the more it shares (module, op, op and shapes, kernel name). What no pair covers between two pairs is
one N↔M group: the 7 kernels of an eager attention ↔ the SDPA kernel, a chain ↔ the Triton kernel that
fused it, a vendor's GEMM ↔ another's. Where both sides name modules the group is split by module;
where one side names none (torch.compile, a fused optimizer captured without modules), its kernels
take the module of the other side's kernels in their group.

Cost is bounded: a step of n × m units is aligned in one table only while n·m ≤ ``CELLS``; beyond
it the anchors are aligned first and the stretches between paired anchors one by one, and a stretch
still too large is cut into proportional slices (the result says so in ``notes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.judgements.diff import signature

CELLS = 4_000_000  # n·m of one alignment table: int32 scores, ~16 MB; a 2,000 × 2,000-kernel step
GAP = -1
FORBIDDEN = -10  # a pair across categories or modules: two gaps (-2) always beat it
GPU_KINDS = ("kernel", "communication", "memcpy", "memset")
NO_MODULE = "(no module)"
FEATURES = ("module", "op", "sig", "name", "category")
WEIGHTS = {"module": 3, "op": 2, "sig": 2, "name": 1}
# torch.compile's traces of its own: Inductor's range around each call of a compiled graph, and the wrapper module
# the compiled call enters; a GPU event under either was launched by the compiled graph, not by eager ops
COMPILED_RANGE = "## Call CompiledFxGraph"
COMPILED_MODULE = "OptimizedModule_"


@dataclass
class Side:
    """One run's GPU events per step, in launch order, with their alignment features."""

    units: pd.DataFrame  # one row per GPU event: step, order, dur_ns, module, op, sig, name, category, anchor, …
    steps: list[str]
    reference: str  # the step aligned against the other run: the one of median GPU time


@dataclass
class Alignment:
    """``units``: both runs' units (``side`` A or B) with their ``group`` (a matched N↔M group, or -1),
    ``pair`` (a 1:1 pair, or -1) and ``part`` (the module path it is counted under); ``notes``: what was
    bounded or could not be aligned."""

    units: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    steps: dict[str, list[str]] = field(default_factory=dict)  # each run's steps, those without GPU work too


def _module_label(events: pd.DataFrame) -> pd.Series:
    """The module path of each event; a backward kernel its forward's path and ' (backward)'; else the phase."""
    module = events["module"].astype("string")
    if "forward_module" in events:
        module = module.fillna(events["forward_module"].astype("string") + " (backward)")
    if "phase" in events:
        module = module.fillna("(" + events["phase"].astype("string") + ")")
    return module.fillna(NO_MODULE)


def _in_compiled_graph(events: pd.DataFrame) -> np.ndarray:
    """Whether each event was launched from a torch.compile'd graph: inside Inductor's graph call (the parser's
    ``graph_call``: a range or, in some torch versions, a CPU op), its range (events stored before that column)
    or the compiled wrapper module."""
    found = np.array(events["graph_call"].notna(), bool) if "graph_call" in events else np.zeros(len(events), bool)
    for column, mark in (("ranges", COMPILED_RANGE), ("module", COMPILED_MODULE)):
        if column in events:
            found |= events[column].astype("string").str.contains(mark, regex=False).fillna(False).to_numpy(bool)
    return found


def side(result: TraceAnalysis) -> Side:
    """``result``'s GPU events per profiler step (the whole window as one step without steps), ordered."""
    events = result.events
    events = events[events["kind"].isin(GPU_KINDS)]
    step = events["profiler_step"].astype("string").fillna("window") if "profiler_step" in events else \
        pd.Series("window", index=events.index, dtype="string")
    if (step != "window").any():
        events, step = events[step != "window"], step[step != "window"]
    units = pd.DataFrame({
        "step": step, "start_ns": events["start_ns"], "dur_ns": events["dur_ns"].astype("int64"),
        "module": _module_label(events), "has_module": events["module"].notna() | events.get(
            "forward_module", pd.Series(pd.NA, index=events.index)).notna(),
        "op": events["op"].astype("string").fillna(""),
        "op_call": (events["op_id"].astype("string") if "op_id" in events else pd.Series(
            pd.NA, index=events.index, dtype="string")).fillna("kernel " + events.index.astype(str).to_series(
                index=events.index)),  # one op call's kernels share it; a kernel with no op is its own call
        "sig": signature(events, result.registry),
        "name": events["name"].astype(str), "category": events["category"].astype("string").fillna("other"),
        "anchor": events["role"].eq("anchor").to_numpy(bool),
        "graphed": events["graph_replay"].notna().to_numpy(bool) if "graph_replay" in events else False,
        "compiled": _in_compiled_graph(events),
        "launch": (events["graph_replay"].astype("string") if "graph_replay" in events else pd.Series(
            pd.NA, index=events.index, dtype="string")).fillna("kernel " + events["correlation"].astype("string")
                                                              .fillna(pd.Series(events.index.astype(str), index=events.index))),
    }).sort_values(["step", "start_ns"], kind="stable").reset_index(drop=True)
    units["order"] = units.groupby("step").cumcount()
    per_step = units.groupby("step")["dur_ns"].sum().sort_values(kind="stable")
    steps = sorted(per_step.index.astype(str))
    listed = result.frames.get("steps", pd.DataFrame(columns=["step"]))["step"].astype(str)
    if steps and steps != ["window"]:  # a step without GPU work counts, as zero, in the medians per step
        steps = sorted(set(steps) | {s for s in listed if s.startswith(("ProfilerStep#", "iteration #"))})
    reference = str(per_step.index[(len(per_step) - 1) // 2]) if len(per_step) else "window"
    return Side(units, steps, reference)


def _codes(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Shared integer codes of two columns' values (equal values, equal codes)."""
    codes, _ = pd.factorize(pd.concat([a, b], ignore_index=True).astype(str))
    return codes[: len(a)], codes[len(a):]


def scores(a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
    """The n × m pair scores: ``FORBIDDEN`` across categories or across named modules, and between two
    units that are not both anchors and share neither op nor kernel name (an eager add is no 1:1 match for
    the Triton kernel that fused it: that is an N↔M group); else 1 plus the weight of each feature the two
    share (module, op, op and shapes, kernel name)."""
    out = np.ones((len(a), len(b)), np.int32)
    kin = np.zeros((len(a), len(b)), bool)
    for feature in FEATURES:
        ca, cb = _codes(a[feature], b[feature])
        same = ca[:, None] == cb[None, :]
        if feature == "category":
            out[~same] = FORBIDDEN
        elif feature == "module":
            named = a["has_module"].to_numpy(bool)[:, None] & b["has_module"].to_numpy(bool)[None, :]
            out += np.where(same & named, WEIGHTS[feature], 0).astype(np.int32)
            out[named & ~same] = FORBIDDEN
        else:
            shared = same & ~(a[feature] == "").to_numpy(bool)[:, None]
            out += np.where(shared, WEIGHTS[feature], 0).astype(np.int32)
            kin |= shared if feature in ("op", "name") else False
    anchors = a["anchor"].to_numpy(bool)[:, None] & b["anchor"].to_numpy(bool)[None, :]
    out[~(kin | anchors)] = FORBIDDEN
    return out


def needleman_wunsch(score: np.ndarray) -> list[tuple[int, int]]:
    """The 1:1 pairs (i, j) of the best global alignment under ``score`` and a linear ``GAP``; each row of
    the table is one vectorised step (the left gap's running maximum), the traceback walks n + m cells."""
    n, m = score.shape
    table = np.empty((n + 1, m + 1), np.int64)
    columns = np.arange(m + 1, dtype=np.int64)
    table[0] = columns * GAP
    for i in range(1, n + 1):
        best = np.empty(m + 1, np.int64)
        best[0] = i * GAP
        best[1:] = np.maximum(table[i - 1, :-1] + score[i - 1], table[i - 1, 1:] + GAP)
        table[i] = np.maximum.accumulate(best - columns * GAP) + columns * GAP
    pairs, i, j = [], n, m
    while i > 0 and j > 0:
        if table[i, j] == table[i - 1, j - 1] + score[i - 1, j - 1] and score[i - 1, j - 1] > FORBIDDEN:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif table[i, j] == table[i - 1, j] + GAP:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _pairs(a: pd.DataFrame, b: pd.DataFrame, notes: list[str]) -> list[tuple[int, int]]:
    """1:1 pairs of positions in ``a`` and ``b``, within ``CELLS`` (the module docstring's bound)."""
    if not len(a) or not len(b):
        return []
    if len(a) * len(b) <= CELLS:
        return needleman_wunsch(scores(a, b))
    ia, ib = np.flatnonzero(a["anchor"].to_numpy(bool)), np.flatnonzero(b["anchor"].to_numpy(bool))
    if 0 < len(ia) * len(ib) <= CELLS and (len(ia) < len(a) or len(ib) < len(b)):
        kept = [(int(ia[x]), int(ib[y])) for x, y in _pairs(a.iloc[ia], b.iloc[ib], notes)]
        return _between(a, b, kept, notes)
    slices = -(-len(a) * len(b) // CELLS)
    notes.append(f"a stretch of {len(a):,} × {len(b):,} kernels was aligned in {slices:,} proportional slices "
                 f"(over the {CELLS:,}-cell bound)")
    cuts_a = np.linspace(0, len(a), slices + 1).astype(int)
    cuts_b = np.linspace(0, len(b), slices + 1).astype(int)
    out: list[tuple[int, int]] = []
    for k in range(slices):
        part = needleman_wunsch(scores(a.iloc[cuts_a[k]:cuts_a[k + 1]], b.iloc[cuts_b[k]:cuts_b[k + 1]]))
        out += [(cuts_a[k] + x, cuts_b[k] + y) for x, y in part]
    return out


def _between(a: pd.DataFrame, b: pd.DataFrame, kept: list[tuple[int, int]],
             notes: list[str]) -> list[tuple[int, int]]:
    """The anchor pairs ``kept`` with the stretches between them aligned one by one."""
    out: list[tuple[int, int]] = []
    bounds = [(-1, -1), *kept, (len(a), len(b))]
    for (sa, sb), (ea, eb) in zip(bounds, bounds[1:]):
        inner = _pairs(a.iloc[sa + 1:ea], b.iloc[sb + 1:eb], notes)
        out += [(sa + 1 + x, sb + 1 + y) for x, y in inner]
        if ea < len(a):
            out.append((ea, eb))
    return out


def _regions(n: int, m: int, pairs: list[tuple[int, int]]) -> list[tuple[list[int], list[int]]]:
    """The stretches of unpaired positions between consecutive pairs, a stretch of one run only moved into
    a neighbouring stretch where the other run's part of it is (a compiler may move a kernel across a GEMM:
    Inductor's rotary kernels run before the V projection's GEMM, eager's after it)."""
    bounds = [(-1, -1), *pairs, (n, m)]
    regions = [(list(range(sa + 1, ea)), list(range(sb + 1, eb))) for (sa, sb), (ea, eb) in zip(bounds, bounds[1:])]
    for k, (ra, rb) in enumerate(regions):
        if bool(ra) == bool(rb):
            continue
        for near in (k + 1, k - 1):
            if 0 <= near < len(regions) and bool(regions[near][0 if rb else 1]):
                regions[near][0 if ra else 1].extend(ra or rb)
                (ra or rb).clear()
                break
    return regions


def _groups(a: pd.DataFrame, b: pd.DataFrame, pairs: list[tuple[int, int]], split: bool) -> tuple[np.ndarray, ...]:
    """Group and pair numbers of each position in ``a`` and ``b`` (-1: none). Each pair is a group; where
    ``split`` (both runs name modules) the unpaired units of one module form one group, else each stretch
    between pairs with units of both runs does (``_regions``)."""
    ga, gb = np.full(len(a), -1, np.int64), np.full(len(b), -1, np.int64)
    pa, pb = ga.copy(), gb.copy()
    for k, (i, j) in enumerate(pairs):
        ga[i], gb[j], pa[i], pb[j] = k, k, k, k
    group = len(pairs)
    if split:
        ma, mb = a["module"].to_numpy(), b["module"].to_numpy()
        common = set(ma[pa < 0]) & set(mb[pb < 0])
        for key in sorted(common):
            ga[(pa < 0) & (ma == key)], gb[(pb < 0) & (mb == key)] = group, group
            group += 1
        return ga, gb, pa, pb
    for ra, rb in _regions(len(a), len(b), pairs):
        if ra and rb:
            ga[ra], gb[rb] = group, group
            group += 1
    return ga, gb, pa, pb


def _names_modules(units: pd.DataFrame) -> bool:
    """Whether a run names the modules of most of its GPU time (else its kernels take the other run's)."""
    total = units["dur_ns"].sum()
    return bool(total) and units.loc[units["has_module"], "dur_ns"].sum() >= 0.5 * total


def _share_paths(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether both runs name modules and half of each one's named time is in paths the other also names
    (a torch.compile'd run names only its wrapper, ``OptimizedModule_0``: its path is no match for any)."""
    named_a, named_b = a[a["has_module"]], b[b["has_module"]]
    if named_a.empty or named_b.empty:
        return True  # one run names none: its units borrow the other's, nothing to reconcile
    common = set(named_a["module"]) & set(named_b["module"])
    return all(frame.loc[frame["module"].isin(common), "dur_ns"].sum() >= 0.5 * frame["dur_ns"].sum()
               for frame in (named_a, named_b))


def _parts(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The module each unit is counted under: its own where named, else the one with the most time among
    the other run's units of its group, else its own label (a phase, or ``NO_MODULE``)."""
    both = pd.concat([a.assign(_s="A"), b.assign(_s="B")], ignore_index=True)
    named = both[both["has_module"] & (both["group"] >= 0)]
    lead = (named.groupby(["group", "_s", "module"])["dur_ns"].sum().reset_index()
            .sort_values("dur_ns", ascending=False, kind="stable").drop_duplicates(["group", "_s"]))
    out = []
    for frame, other in ((a, "B"), (b, "A")):
        borrowed = frame["group"].map(lead[lead["_s"] == other].set_index("group")["module"])
        out.append(frame["module"].where(frame["has_module"] | borrowed.isna(), borrowed))
    return out[0], out[1]


def _within(units: pd.DataFrame, reference: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """Another step of one run, labelled from that run's reference step: by position where both launch the
    same kernels in the same order, else through their own alignment."""
    if len(units) == len(reference) and (units["sig"].to_numpy() == reference["sig"].to_numpy()).all():
        at = np.arange(len(units))
        return units.assign(group=reference["group"].to_numpy(), pair=reference["pair"].to_numpy(),
                            part=reference["part"].to_numpy()[at])
    where = np.full(len(units), -1, np.int64)
    for i, j in _pairs(units, reference, notes):
        where[i] = j
    hit = where >= 0
    out = units.assign(group=-1, pair=-1, part=units["module"])
    for column in ("group", "pair", "part"):
        out.loc[hit, column] = reference[column].to_numpy()[where[hit]]
    return out


def align(a: TraceAnalysis, b: TraceAnalysis) -> Alignment:
    """Both runs' GPU units aligned (the module docstring): the two reference steps against each other,
    every other step against its own run's reference step."""
    sa, sb = side(a), side(b)
    notes: list[str] = []
    ra = sa.units[sa.units["step"] == sa.reference].reset_index(drop=True)
    rb = sb.units[sb.units["step"] == sb.reference].reset_index(drop=True)
    named = ra["has_module"].to_numpy(), rb["has_module"].to_numpy()
    if not _share_paths(ra, rb):  # paths the other run lacks are no evidence (a wrapper's, another model's)
        ra, rb = ra.assign(has_module=False), rb.assign(has_module=False)
        notes.append("the runs share no module paths: aligned by op, shapes and order alone")
    split = _names_modules(ra) and _names_modules(rb)
    ga, gb, pa, pb = _groups(ra, rb, _pairs(ra, rb, notes), split)
    ra, rb = ra.assign(group=ga, pair=pa), rb.assign(group=gb, pair=pb)
    part_a, part_b = _parts(ra, rb)
    ra = ra.assign(part=part_a.to_numpy(), has_module=named[0])  # the trace's own naming, kept in the output
    rb = rb.assign(part=part_b.to_numpy(), has_module=named[1])
    frames = []
    for name, run, reference in (("A", sa, ra), ("B", sb, rb)):
        for step, units in run.units.groupby("step", sort=False):
            units = units.reset_index(drop=True)
            frames.append((reference if step == run.reference else _within(units, reference, notes))
                          .assign(side=name, reference=step == run.reference))
    columns = ["side", "step", "order", "reference", "dur_ns", "module", "has_module", "part", "group", "pair",
               "op", "op_call", "sig", "name", "category", "anchor", "graphed", "compiled", "launch"]
    units = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    return Alignment(units[columns], notes, {"A": sa.steps, "B": sb.steps})
