"""``fuseprof analyze``'s output: terminal tables in human units (≤ 120 characters a line), or the
same tables as JSON or one long CSV in base units for scripts. Formatting only: no analysis here."""

from __future__ import annotations

import contextlib
import json
import math
import textwrap
from collections.abc import Callable, Iterator

import pandas as pd

from fuseprof.analysis.analyze import TraceAnalysis
from fuseprof.analysis.integrity import failed_for
from fuseprof.commands.base import emit
from fuseprof.commands.render import WIDTH, cell_text, clean_text, table_text
from fuseprof.display import cells_as_text


def us(ns: float) -> str:
    """Nanoseconds as microseconds with three decimals: exact, and readable."""
    return "" if ns is None or (isinstance(ns, float) and math.isnan(ns)) else f"{ns / 1e3:,.3f}"


def _short(text: object, width: int) -> str:
    s = cell_text(text)
    return s if len(s) <= width else s[: width - 1] + "…"


_WIDE = [False]  # --wide, for the print_* calls inside ``width(...)``


@contextlib.contextmanager
def width(wide: bool) -> Iterator[None]:
    """Inside, tables print as wide as their content (``wide``) or at most 120 columns."""
    before, _WIDE[0] = _WIDE[0], wide
    try:
        yield
    finally:
        _WIDE[0] = before


def _line(text: str) -> None:
    """A line of prose, wrapped at the table width unless --wide."""
    text = clean_text(text)
    print(text if _WIDE[0] else textwrap.fill(text, WIDTH, subsequent_indent="  "))


def _print(title: str, frame: pd.DataFrame, flags: list[str] | None = None) -> None:
    print()
    _line(title)
    if flags:
        _line(f"  ⚠ rests on failed integrity checks: {', '.join(flags)}")
    if frame.empty:
        print("  (none)")
        return
    print(table_text(frame, _WIDE[0]))


def _timeline(result: TraceAnalysis) -> pd.DataFrame:
    t = result.timeline
    return pd.DataFrame({
        "stream": t["stream"], "span µs": t["span_ns"].map(us), "busy µs": t["busy_ns"].map(us),
        "idle µs": t["idle_ns"].map(us), "busy %": t["busy_pct"].round(2),
        "compute µs": t["computation_ns"].map(us), "memcpy µs": t["memcpy_ns"].map(us),
        "memset µs": t["memset_ns"].map(us), "comm µs": t["communication_ns"].map(us),
        "exposed comm µs": t["exposed_communication_ns"].map(us), "events": t["events"]})


def _integrity(result: TraceAnalysis) -> pd.DataFrame:
    i = result.integrity
    value = [("" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.4g}" if isinstance(v, float)
              else f"{v:,}") for v in i["value"]]
    return pd.DataFrame({"check": i["check"], "value": value, "ok": i["ok"].map({True: "ok", False: "FAILED"}),
                         "detail": i["detail"]})


def _steps(result: TraceAnalysis) -> pd.DataFrame:
    t = result.steps
    return pd.DataFrame({
        "step": t["step"], "span µs": t["span_ns"].map(us), "busy µs": t["busy_ns"].map(us),
        "idle µs": t["idle_ns"].map(us), "compute µs": t["computation_ns"].map(us),
        "comm µs": t["communication_ns"].map(us), "memcpy µs": t["memcpy_ns"].map(us), "events": t["events"]})


def _idle(result: TraceAnalysis) -> pd.DataFrame:
    t = result.idle
    return pd.DataFrame({
        "step": t["step"], "span µs": t["span_ns"].map(us), "busy µs": t["busy_ns"].map(us),
        "idle: launch µs": t["idle_launch_ns"].map(us), "idle: sync µs": t["idle_sync_ns"].map(us),
        "idle: other µs": t["idle_other_ns"].map(us), "verdict": t["verdict"]})


def print_analysis(result: TraceAnalysis) -> None:
    _line(f"== {result.name}  ({result.device or 'device unknown'}; roof: {result.roof.label}"
          f"{'; rank ' + str(result.rank) if result.rank is not None else ''}; {result.window})")
    for note in result.notes:
        _line(f"note: {note}")
    _print("Integrity (fuseprof/analysis/integrity.py)", _integrity(result))
    if not result.steps.empty:
        _print("Profiler steps (GPU work each step launched)", _steps(result))
    _print("GPU timeline (union of intervals: overlapping kernels count once)", _timeline(result),
           failed_for("timeline", result.integrity))
    _print("Idle time by cause (launch: host-bound; sync: waiting on the GPU; fuseprof/analysis/idle.py)",
           _idle(result))
    if not result.idle_host.empty:
        h = result.idle_host
        _print("CPU activity in the host-bound gaps", pd.DataFrame({
            "name": h["name"].map(lambda s: _short(s, 60)), "kind": h["kind"], "overlap µs": h["overlap_ns"].map(us),
            "% of host-bound idle": h["share_of_host_idle_pct"].round(1)}))
    c = result.categories
    _print("Time by category", pd.DataFrame({"category": c["category"], "count": c["count"],
                                             "time µs": c["time_ns"].map(us), "share %": c["share_pct"].round(2)}),
           failed_for("categories", result.integrity))
    _print_tops(result)
    print_roofline(result)
    print_fusion(result, len(result.top_ops))
    if not result.slow_ops.empty:
        o = result.slow_ops
        _print("Slow ops: far below their roof, in no fusion row (tune the kernel; fuseprof/analysis/opportunities.py)",
               pd.DataFrame({"op and input shapes": o["signature"], "calls": o["calls"], "time µs": o["time_ns"].map(us),
                             "% busy": o["share_of_busy_pct"].round(2), "% roof": o["pct_of_roof"].round(1),
                             "bound": o["bound"]}))
    print_audit(result)


def _print_tops(result: TraceAnalysis) -> None:
    k = result.top_kernels
    _print("Top kernels", pd.DataFrame({
        "kernel": k["name"].map(lambda s: _short(s, 72)), "category": k["category"], "count": k["count"],
        "time µs": k["time_ns"].map(us), "share %": k["share_pct"].round(2), "op": k["op"].map(lambda s: _short(s, 28)),
        "module": k["module"].map(lambda s: _short(s, 72))}))
    o = result.top_ops
    _print("Top ops (by the GPU time of their kernels)", pd.DataFrame({
        "op and input shapes": o["signature"], "category": o["category"],
        "calls": o["calls"], "kernels/call": o["kernels_per_call"].round(2), "time µs": o["time_ns"].map(us),
        "share %": o["share_pct"].round(2), "module": o["module"].map(lambda s: _short(s, 72))}),
        failed_for("top_ops", result.integrity))
    la = result.launches
    _print("Launches (a graph launch is one call; host time per call; launch-to-start = first GPU start − "
           "launch call start)", pd.DataFrame({
               "api": la["launch_api"], "launches": la["launches"], "kernels/launch": la["kernels_per_launch"].round(1),
               "host median µs": la["host_median_ns"].map(us), "host p90 µs": la["host_p90_ns"].map(us),
               "to start median µs": la["latency_median_ns"].map(us),
               "to start p90 µs": la["latency_p90_ns"].map(us)}))


def _unknown(values: pd.Series, fmt) -> pd.Series:  # type: ignore[no-untyped-def]
    return values.map(lambda v: "unknown" if pd.isna(v) else fmt(v))


def print_fusion(result: TraceAnalysis, top: int) -> None:
    f = result.fusion.head(top)
    if f.empty:
        _print("Fusion opportunities", f, failed_for("fusion", result.integrity))
        return
    _print(f"Fusion opportunities, every class ranked by predicted saving (memory-bound chains: fused bytes at "
           f"{f['copy_bytes_per_s'].iloc[0] / 1e12:.2f} TB/s + {f['fixed_ns'].iloc[0] / 1e3:.2f} µs, "
           f"{f['rate_source'].iloc[0]}; attention and GEMMs at the roof; unknown: an op of the chain has no cost "
           "model or no recorded shapes; fuseprof/analysis/opportunities.py)",
           pd.DataFrame({
               "class": f["class"], "ops in order": f["signature"], "×": f["count"],
               "kernels": f["kernels_per_chain"], "measured µs": f["measured_ns"].map(us),
               "fused MB": _unknown(f["fused_bytes"], lambda v: f"{v / 1e6:,.3f}"),
               "predicted µs": _unknown(f["predicted_fused_ns"], us), "saving µs": _unknown(f["saving_ns"], us),
               "% busy": _unknown(f["share_of_busy_pct"], lambda v: f"{v:.2f}"),
               "% span": _unknown(f["share_of_span_pct"], lambda v: f"{v:.2f}"), "fused by": f["known_fusion"]}),
           failed_for("fusion", result.integrity))


def print_verification(table: pd.DataFrame, bundle: str) -> None:
    """The verified chains: the finder's prediction per chain beside the replay, eager and compiled."""
    def column(name: str, fmt: Callable[[float], str]) -> pd.Series:
        return table[name].map(lambda v: "" if pd.isna(v) else fmt(v)) if name in table else pd.Series("", table.index)

    _print(f"Predictions checked by running them ({bundle}; per chain; realised = eager − compiled replay, "
           "CUDA graph replay with L2 flushed; fuseprof/verify/table.py)", pd.DataFrame({
               "#": table["fusion_row"], "class": table["chain_class"], "ops in order": table["signature"].map(
                   lambda s: _short(s, 70)),
               "kernels": table["chain_kernels"], "trace µs": column("trace_chain_ns", us),
               "predicted fused µs": column("predicted_fused_ns", us),
               "predicted saving µs": column("predicted_saving_ns", us), "eager µs": column("eager_ns", us),
               "compiled µs": column("compiled_ns", us), "compiled kernels": column("compiled_kernels", lambda v: f"{int(v)}"),
               "realised saving µs": column("realised_saving_ns", us),
               "error %": column("error_pct", lambda v: f"{v:+.0f}"), "fuseprof kernel µs": column("fuseprof_ns", us),
               "its error %": column("fuseprof_error_pct", lambda v: f"{v:+.0f}"), "check": table["verdict"]}), None)
    errors = table["error_pct"].dropna().abs() if "error_pct" in table else pd.Series(dtype=float)
    if not errors.empty:
        _line(f"|error| over {len(errors)} timed chain(s): median {errors.median():.0f}%, worst {errors.max():.0f}%")


def show_verification(table: pd.DataFrame, fmt: str, wide: bool) -> None:
    """A verification table (``fuseprof.verify.table``) as `fusion --verify` and `compare` show it: one
    printed table per bundle, or every row in csv/json."""
    if fmt != "table":
        emit(table, fmt, wide)
        return
    with width(wide):
        for bundle, part in table.groupby("bundle", sort=False):
            print_verification(part, str(bundle))


def print_audit(result: TraceAnalysis) -> None:
    a = result.audit
    _print("Fusion audit: is each fusion of the catalogue done here? (fuseprof/analysis/audit.py)", pd.DataFrame({
        "fusion": a["fusion"], "verdict": a["verdict"], "time µs": a["time_ns"].map(us),
        "saving µs": _unknown(a["predicted_saving_ns"], us).where(a["verdict"].str.contains("not fused|partly"), ""),
        "evidence": a["evidence"].map(lambda s: _short(s, 160))}),
        failed_for("fusion", result.integrity))


def print_roofline(result: TraceAnalysis) -> None:
    r = result.op_roofline.head(len(result.top_ops))
    if r.empty:
        _print("Per-op roofline from recorded shapes", r, failed_for("op_roofline", result.integrity))
        return
    _print(f"Per-op roofline from recorded shapes, against {result.roof.label}", pd.DataFrame({
        "op and input shapes": r["signature"], "pipe": r["roof_pipe"],
        "calls": r["calls"], "GFLOP/call": (r["flops"] / 1e9).round(4), "MB/call": (r["dram_bytes"] / 1e6).round(3),
        "µs/call": r["duration_ns"].map(us), "TFLOP/s": (r["achieved_flops_per_s"] / 1e12).round(2),
        "TB/s": (r["achieved_bytes_per_s"] / 1e12).round(3), "% roof": r["pct_of_roof"].round(1), "bound": r["bound"],
        **({"ncu GFLOP": (r["ncu_flops"] / 1e9).round(4), "ncu MB": (r["ncu_dram_bytes"] / 1e6).round(3)}
           if r["ncu_flops"].notna().any() else {})}), failed_for("op_roofline", result.integrity))


def _several_ranks(results: list[TraceAnalysis]) -> bool:
    """Traces of two or more ranks of one distributed run: the across-ranks tables apply."""
    return len({r.rank for r in results if r.rank is not None}) > 1


def to_json(results: list[TraceAnalysis]) -> str:
    body: dict[str, object] = {}
    for r in results:
        tables = {name: json.loads(cells_as_text(t).to_json(orient="records")) for name, t in r.tables().items()}
        body[str(r.name)] = {"device": r.device, "roof": r.roof.label, "rank": r.rank, "notes": r.notes, **tables}
    if _several_ranks(results):
        from fuseprof.analysis.ranks import across_ranks

        body["across_ranks"] = {name: json.loads(t.to_json(orient="records")) for name, t in across_ranks(results).items()}
    return json.dumps(body, indent=1)


def to_long_frame(results: list[TraceAnalysis]) -> pd.DataFrame:
    parts = [cells_as_text(t).assign(trace=r.name, table=name) for r in results for name, t in r.tables().items()]
    frame = pd.concat(parts, ignore_index=True)
    return frame[["trace", "table", *[c for c in frame.columns if c not in ("trace", "table")]]]


def print_ranks(results: list[TraceAnalysis]) -> None:
    """Across ranks: communication per rank, each collective's skew (per-rank waits up to 8 ranks, or all
    with --wide) and
    the stragglers with what grew on them (fuseprof.analysis.ranks); nothing for a single process."""
    if not _several_ranks(results):
        return
    from fuseprof.analysis.ranks import across_ranks

    tables = across_ranks(results)
    summary, skew, culprits = tables["ranks"], tables["collectives"], tables["stragglers"]
    print(f"\n== across {len(results)} ranks")
    _print("Communication per rank (exposed: not overlapped by computation)", pd.DataFrame({
        "rank": summary["rank"], "busy µs": summary["busy_ns"].map(us),
        "compute µs": summary["computation_ns"].map(us), "comm µs": summary["communication_ns"].map(us),
        "exposed comm µs": summary["exposed_communication_ns"].map(us),
        "comm % of busy": summary["communication_share_pct"].round(1)}))
    if skew.empty:
        return
    waits = sorted((c for c in skew.columns if c.startswith("wait_ns_rank")), key=lambda c: int(c.removeprefix("wait_ns_rank")))
    shown = skew.nlargest(15, "skew_ns").sort_values("seq") if len(skew) > 15 else skew
    _print(f"Collectives: the last rank to arrive sets the time{' (the 15 of most skew)' if len(skew) > 15 else ''}",
           pd.DataFrame({"#": shown["seq"], "collective": shown["collective"], "MB": (shown["bytes"] / 1e6).round(2),
                         "skew µs": shown["skew_ns"].map(us), "last rank": shown["last_rank"],
                         "transfer µs": shown["transfer_ns"].map(us),
                         **({f"rank {c.removeprefix('wait_ns_rank')} waits µs": shown[c].map(us) for c in waits}
                            if len(waits) <= 8 or _WIDE[0] else {})}))
    if culprits.empty:
        return
    _print("Stragglers: who came last, because what grew on it (vs the other ranks' median since the last "
           "collective)", pd.DataFrame({
               "last rank": culprits["last_rank"], "grew": culprits["grew_category"],
               "collectives": culprits["collectives"], "others waited µs": culprits["late_ns"].map(us),
               "grew by µs": culprits["grew_ns"].map(us),
               "% of late time": culprits["share_of_late_pct"].round(1)}).head(10))
    top = culprits.iloc[0]
    cause = (f"{top['grew_category']} grew by {us(top['grew_ns'])} µs" if top["grew_ns"] > 0
             else "no computation grew on it (a host-side or network delay)")
    _line(f"Straggler: rank {int(top['last_rank'])}, last to {int(top['collectives'])} collective(s): {cause}; the "
          f"others waited {us(top['late_ns'])} µs for it ({top['share_of_late_pct']:.0f}% of all late time)")


def print_diff(a: str, b: str, tables: dict[str, pd.DataFrame], top: int) -> None:
    """``fuseprof diff``: the totals, then categories and the ``top`` op signatures by time delta."""
    print(f"A: {a}\nB: {b}")
    t = tables["totals"].copy()
    times = t["metric"] != "events"
    for column in ("a", "b", "delta"):
        t[column] = t[column].astype(object).where(~times, t[column].map(us))
    t["metric"] = t["metric"].where(~times, t["metric"].str.replace(r"_ns$", " µs", regex=True))
    _print("", t.rename(columns={"metric": "total"}))
    for name in ("categories", "ops"):
        d = tables[name].head(top if name == "ops" else len(tables[name]))
        _print("", pd.DataFrame({
            name[:-1] if name == "ops" else "category": d["key"].str.slice(0, 72), "A µs": d["time_ns_a"].map(us),
            "B µs": d["time_ns_b"].map(us), "Δ µs": d["time_delta_ns"].map(us), "A launches": d["launches_a"],
            "B launches": d["launches_b"], "change": d["change"]}))
