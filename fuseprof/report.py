"""``fuseprof report``: one self-contained HTML file per set of traces, to attach to a pull request or a chat.

It opens with a verdict — what bounds the run (GPU, host launches or syncs: ``fuseprof.analysis.idle``) and
the three things worth doing with their predicted savings — then the integrity check, the profiler steps,
the timeline, categories, top ops with their modules, the per-op roofline on the capture GPU with the H100
beside it, the fusion opportunities and audit, slow ops, and for several ranks the communication tables.
Plotly's JavaScript is inlined once, gzipped (the browser's DecompressionStream unpacks it), so the file
needs no network; figures are drawn from their JSON. Tables are sortable by a click on a header. Builds on
the analysis tables and the figure builders only.
"""

from __future__ import annotations

import base64
import gzip
import html
from datetime import datetime, timezone

import pandas as pd

from fuseprof import figures
from fuseprof.analysis.analyze import TraceAnalysis
from fuseprof.display import cells_as_text, human_units
from fuseprof.model.devices import DEVICES, REFERENCE_DEVICE
from fuseprof.model.roofline import datasheet_roof

_STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1240px;padding:0 12px;color:#222}
h1{font-size:22px}h2{font-size:19px;border-top:2px solid #444;padding-top:14px;margin-top:34px}h3{font-size:15px}
.verdict{background:#f4f7fb;border:1px solid #c9d6e8;padding:10px 16px;border-radius:6px}
.scroll{overflow-x:auto;max-height:520px;overflow-y:auto;margin:6px 0 14px}
table{border-collapse:collapse;font-size:12.5px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:right;
vertical-align:top;max-width:460px;overflow-wrap:anywhere;text-align:left}th{background:#eef1f5;cursor:pointer;position:sticky;top:0}
th{text-align:left}.note{color:#555;font-size:12.5px}.fig{min-height:300px}"""
_SORT = """function sortTable(th){const t=th.closest('table'),i=[...th.parentNode.children].indexOf(th),
b=t.tBodies[0],rows=[...b.rows],asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
const v=r=>{const s=r.cells[i].innerText.replace(/,/g,'');const n=parseFloat(s);return isNaN(n)?s:n};
rows.sort((x,y)=>{const a=v(x),c=v(y);return (a>c?1:a<c?-1:0)*(asc?1:-1)});rows.forEach(r=>b.appendChild(r))}
document.addEventListener('click',e=>{if(e.target.tagName==='TH')sortTable(e.target)});"""


def _table(frame: pd.DataFrame, rows: int = 200) -> str:
    if frame is None or frame.empty:
        return "<p class='note'>(none)</p>"
    shown = cells_as_text(human_units(frame.head(rows)).drop(columns=["members", "key"], errors="ignore"))
    more = f"<p class='note'>first {rows} of {len(frame)} rows</p>" if len(frame) > rows else ""
    return f"<div class='scroll'>{shown.to_html(index=False, escape=True, na_rep='', float_format=_fmt)}</div>{more}"


def _fmt(value: float) -> str:
    return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"


def _figure(fig, counter: list[int]) -> str:  # type: ignore[no-untyped-def]
    counter[0] += 1
    spec = html.escape(fig.to_json(), quote=True)
    return f"<div class='fig' id='fig{counter[0]}' data-figure=\"{spec}\"></div>"


def worth_doing(result: TraceAnalysis, n: int = 3) -> pd.DataFrame:
    """The candidates, ranked by predicted saving: each fusion row, the host's launch gaps (CUDA graphs),
    the syncs, and the slow ops (their time above what their roof allows)."""
    rows = [{"what": f"fuse: {r['class']} — {r['signature'][:160]} ×{r['count']}", "saving_ns": r["saving_ns"],
             "why": f"{r['measured_ns'] / 1e3:,.1f} µs now; {r['known_fusion']}"}
            for _, r in result.fusion.dropna(subset=["saving_ns"]).iterrows()] if not result.fusion.empty else []
    if not result.idle.empty:
        launch, sync = result.idle["idle_launch_ns"].sum(), result.idle["idle_sync_ns"].sum()
        rows.append({"what": "close the host-bound gaps (CUDA graphs, torch.compile mode='reduce-overhead')",
                     "saving_ns": float(launch), "why": "the GPU waited for the next launch"})
        rows.append({"what": "remove synchronisations (.item(), .cpu(), cudaStreamSynchronize)",
                     "saving_ns": float(sync), "why": "the host waited for the GPU, then had to launch again"})
    for _, r in result.slow_ops.iterrows() if not result.slow_ops.empty else []:
        rows.append({"what": f"tune {r['signature'][:120]}", "saving_ns": r["time_ns"] * (1 - r["pct_of_roof"] / 100),
                     "why": f"at {r['pct_of_roof']:.1f}% of its roof"})
    frame = pd.DataFrame(rows, columns=["what", "saving_ns", "why"])
    frame = frame[frame["saving_ns"] > 0].sort_values("saving_ns", ascending=False).head(n)
    span = float(result.timeline["span_ns"].iloc[0])
    return frame.assign(share_of_span_pct=100 * frame["saving_ns"] / span if span else float("nan"))


def bound(result: TraceAnalysis) -> str:
    """What bounds the window: the largest of busy time and idle time by cause, summed over its steps."""
    from fuseprof.analysis.idle import VERDICTS

    if result.idle.empty:
        return "unknown"
    totals = {k: float(result.idle[k].sum()) for k in VERDICTS}
    return VERDICTS[max(totals, key=lambda k: totals[k])]


def sections(result: TraceAnalysis, counter: list[int]) -> str:
    """The report's sections for one trace (HTML; figures as JSON placeholders)."""
    reference = datasheet_roof(DEVICES[REFERENCE_DEVICE])
    worth = worth_doing(result)
    items = "".join(f"<li><b>{html.escape(r.what)}</b>: saves {r.saving_ns / 1e3:,.1f} µs "
                    f"({r.share_of_span_pct:.1f}% of the span) — {html.escape(r.why)}</li>" for r in worth.itertuples())
    if not items:
        unknown = int(result.fusion["saving_ns"].isna().sum()) if not result.fusion.empty else 0
        items = (f"<li>nothing with a predicted saving: the GPU is the bound, and {unknown} chain group(s) have ops "
                 "without a cost model (see Fusion opportunities)</li>")
    whole = result.timeline.iloc[0]
    parts = [f"<h2>{html.escape(result.name)}</h2>",
             f"<p class='note'>{html.escape(result.device or 'device unknown')}; roof: {html.escape(result.roof.label)}; "
             f"{html.escape(result.window)}</p>",
             "".join(f"<p class='note'>note: {html.escape(n)}</p>" for n in result.notes),
             f"<div class='verdict'><p><b>{bound(result)}</b>: GPU busy {whole['busy_ns'] / 1e3:,.1f} µs of a "
             f"{whole['span_ns'] / 1e3:,.1f} µs span ({whole['busy_pct']:.1f}%).</p><p>Worth doing:</p><ol>{items}</ol></div>",
             "<h3>Integrity</h3>", _table(result.integrity)]
    if not result.steps.empty:
        parts += ["<h3>Profiler steps</h3>", _figure(figures.steps_figure(result.steps), counter), _table(result.steps)]
    parts += ["<h3>Idle time by cause</h3>", _table(result.idle), _table(result.idle_host),
              "<h3>GPU timeline</h3>", _figure(figures.timeline_figure(result.timeline), counter), _table(result.timeline),
              "<h3>Time by category</h3>", _figure(figures.categories_figure(result.categories), counter),
              _table(result.categories), "<h3>Top ops, with their modules</h3>", _table(result.top_ops),
              "<h3>Top kernels</h3>", _table(result.top_kernels)]
    if not result.op_roofline.empty:
        parts += ["<h3>Per-op roofline</h3>",
                  _figure(figures.roofline_figure(result.op_roofline, [result.roof], reference), counter),
                  _table(result.op_roofline)]
    parts += ["<h3>Fusion opportunities</h3>", _table(result.fusion), "<h3>Fusion audit</h3>", _table(result.audit),
              "<h3>Slow ops</h3>", _table(result.slow_ops), "<h3>Launches</h3>", _table(result.launches)]
    return "".join(parts)


def _ranks(results: list[TraceAnalysis]) -> str:
    if len({r.rank for r in results if r.rank is not None}) < 2:
        return ""
    from fuseprof.analysis.ranks import across_ranks

    tables = across_ranks(results)
    return ("<h2>Across ranks</h2><h3>Communication per rank</h3>" + _table(tables["ranks"]) +
            "<h3>Stragglers: who came last, because what grew on it</h3>" + _table(tables["stragglers"]) +
            "<h3>Collectives</h3>" + _table(tables["collectives"]))


def _loader(plotly: str) -> str:
    """Plotly's JavaScript, gzipped and inlined ('inline'), or from its CDN ('cdn', for notebooks), and the
    code that draws every figure from its JSON once it is there."""
    draw = ("function drawAll(){document.querySelectorAll('[data-figure]').forEach(d=>{const f=JSON.parse("
            "d.dataset.figure);Plotly.newPlot(d,f.data,f.layout,{displaylogo:false,responsive:true})})}")
    if plotly == "cdn":
        return (f"<script src='https://cdn.plot.ly/plotly-2.35.2.min.js'></script><script>{draw};"
                "if(window.Plotly){drawAll()}else{setTimeout(drawAll,1500)}</script>")
    from plotly.offline import get_plotlyjs

    packed = base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()  # the same file each run
    return (f"<script>{draw}\nconst PLOTLY_GZ='{packed}';\n(async()=>{{const bytes=Uint8Array.from(atob(PLOTLY_GZ),"
            "c=>c.charCodeAt(0));const code=await new Response(new Blob([bytes]).stream().pipeThrough("
            "new DecompressionStream('gzip'))).text();(0,eval)(code);drawAll();document.body.dataset.drawn='1'})();"
            "</script>")


def kernel_roofline(placed: pd.DataFrame, counter: list[int]) -> str:
    """ncu's kernels of the bundles given (``fuseprof.model.roofline.place``), each against its pipe's roof."""
    if placed is None or placed.empty:
        return ""
    roofs = {r for r in placed["roof"].unique()}
    from fuseprof.model.roofline import capture_roof

    judged = [capture_roof(d) for d in placed["device"].dropna().unique()]
    return (f"<h2>Per-kernel roofline (ncu, {len(placed)} kernels; {html.escape(', '.join(sorted(roofs)))})</h2>" +
            _figure(figures.roofline_figure(placed, judged, datasheet_roof(DEVICES[REFERENCE_DEVICE])), counter) +
            _table(placed))


def report_html(results: list[TraceAnalysis], plotly: str = "inline", placed: pd.DataFrame | None = None) -> str:
    """The whole report: every trace's sections, the per-kernel roofline of ncu's kernels (``placed``),
    the across-ranks tables, one Plotly loader."""
    counter = [0]
    body = "".join(sections(r, counter) for r in results) + kernel_roofline(placed, counter) + _ranks(results)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>fuseprof report</title><style>{_STYLE}</style>"
            f"<script>{_SORT}</script></head><body><h1>fuseprof report</h1><p class='note'>{len(results)} trace(s), "
            f"{stamp}; every number in µs, MB, TB/s or % as its column says; formulas: fuseprof columns and the modules "
            f"named in each section.</p>{body}{_loader(plotly)}</body></html>")


class Report(list):  # type: ignore[type-arg]
    """Trace analyses that show the report's sections when a notebook displays them: ``fuseprof.analyze``
    returns one, so ``analyze("trace.json.gz")`` alone in a cell draws the report (Plotly from its CDN)."""

    def _repr_html_(self) -> str:
        counter = [0]
        body = "".join(sections(r, counter) for r in self) + _ranks(list(self))
        return f"<div><style>{_STYLE}</style><script>{_SORT}</script>{body}{_loader('cdn')}</div>"
