"""``fuseprof report``: one self-contained HTML file per set of traces, to attach to a pull request or a chat.

It shows every section of the section table (``fuseprof.analysis.running.sections``, through
``fuseprof.section_views``): the verdict first, as a box — what bounds the run and the three things worth
doing with their predicted savings — then each section's tables and figures in order (integrity, steps,
timeline, idle, categories, tops, launches, the per-op roofline on the capture GPU with the H100 beside it,
fusion, slow ops, audit), and for several ranks the across-ranks ones.
Plotly's JavaScript is inlined once, gzipped (the browser's DecompressionStream unpacks it), so the file
needs no network; figures are drawn from their JSON. Tables are sortable by a click on a header. Builds on
the analysis tables and the figure builders only.
"""

from __future__ import annotations

import base64
import gzip
import html
import re
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from fuseprof import figures
from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.running.sections import build_across, shown_tables, table_spec
from fuseprof.analysis.running.sections.verdict import headline
from fuseprof.commands.render import clean_text
from fuseprof.display import cells_as_text, human_units, number_text
from fuseprof.model.devices import DEVICES, REFERENCE_DEVICE
from fuseprof.model.roofline import datasheet_roof
from fuseprof.section_views import Shown, rank_views, several_ranks, trace_views

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
    """A shown table (text cells: ``fuseprof.section_views``) as HTML, every string escaped."""
    if frame is None or frame.empty:
        return "<p class='note'>(none)</p>"
    more = f"<p class='note'>first {rows} of {len(frame)} rows</p>" if len(frame) > rows else ""
    return f"<div class='scroll'>{frame.head(rows).to_html(index=False, escape=True, na_rep='')}</div>{more}"


def _figure(fig, counter: list[int]) -> str:  # type: ignore[no-untyped-def]
    counter[0] += 1
    spec = html.escape(fig.to_json(), quote=True)
    return f"<div class='fig' id='fig{counter[0]}' data-figure=\"{spec}\"></div>"


def _verdict(result: TraceAnalysis) -> str:
    """The verdict section as the report's opening box: the bound without the profiler and as traced, where the
    time goes, and what is worth doing, each with its one saving (``fuseprof.analysis.paths.savings``)."""
    verdict, worth = result.frames["verdict"], result.frames["worth_doing"]

    def gpu(r: Any) -> str:
        return (f"; GPU time {r.gpu_saving_ns / 1e3:,.1f} µs" if r.gpu_saving_ns == r.gpu_saving_ns
                and abs(r.gpu_saving_ns - r.saving_ns) >= 1e3 else "")

    items = "".join(f"<li><b>{html.escape(str(r.what))}</b>: saves {r.saving_ns / 1e3:,.1f} µs of step time "
                    f"({r.share_of_span_pct:.1f}% of the span without the profiler{gpu(r)}) — "
                    f"{html.escape(str(r.why))}</li>" for r in worth.itertuples())
    if not items:
        unknown = int(result.fusion["saving_ns"].isna().sum()) if not result.fusion.empty else 0
        items = (f"<li>nothing with a predicted saving: the GPU is the bound, and {unknown} chain group(s) have ops "
                 "without a cost model (see Fusion opportunities)</li>")
    titles = [html.escape(str(table_spec(name).title)) for name in ("verdict", "worth_doing")]
    return (f"<div class='verdict'><h3>{titles[0]}</h3><p>{html.escape(headline(verdict))}</p>"
            f"<p>{titles[1]}:</p><ol>{items}</ol></div>")


def _shown(shown: Shown, counter: list[int]) -> str:
    flags = "".join(f"<p class='note'>⚠ {html.escape(flag)}</p>" for flag in shown.flags)
    figure = _figure(shown.figure, counter) if shown.figure is not None else ""
    summary = f"<p><b>{html.escape(shown.summary)}</b></p>" if shown.summary else ""
    return f"<h3>{html.escape(shown.title)}</h3>{flags}{figure}{_table(shown.frame)}{summary}"


def sections(result: TraceAnalysis, counter: list[int]) -> str:
    """The report's sections for one trace (HTML; figures as JSON placeholders): every section of the
    section table, the verdict first as a box."""
    parts = [f"<h2>{html.escape(result.name)}</h2>",
             f"<p class='note'>{html.escape(result.device or 'device unknown')}; roof: {html.escape(result.roof.label)}; "
             f"{html.escape(result.window)}</p>",
             "".join(f"<p class='note'>note: {html.escape(n)}</p>" for n in result.notes), _verdict(result)]
    parts += [_shown(shown, counter) for shown in trace_views(result) if shown.section.name != "verdict"]
    return "".join(parts)


def _ranks(results: list[TraceAnalysis], counter: list[int]) -> str:
    if not several_ranks(results):
        return ""
    return "<h2>Across ranks</h2>" + "".join(_shown(shown, counter)
                                             for shown in rank_views(results, build_across(results)))


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

    judged = [r for r in (capture_roof(d) for d in placed["device"].dropna().unique()) if r.judged]
    return (f"<h2>Per-kernel roofline (ncu, {len(placed)} kernels; {html.escape(', '.join(sorted(roofs)))})</h2>" +
            _figure(figures.roofline_figure(placed, judged, datasheet_roof(DEVICES[REFERENCE_DEVICE])), counter) +
            _table(cells_as_text(human_units(placed))))


def report_html(results: list[TraceAnalysis], plotly: str = "inline", placed: pd.DataFrame | None = None) -> str:
    """The whole report: every trace's sections, the per-kernel roofline of ncu's kernels (``placed``),
    the across-ranks tables, one Plotly loader."""
    counter = [0]
    body = "".join(sections(r, counter) for r in results) + kernel_roofline(placed, counter) + _ranks(results, counter)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>fuseprof report</title><style>{_STYLE}</style>"
            f"<script>{_SORT}</script></head><body><h1>fuseprof report</h1><p class='note'>{len(results)} trace(s), "
            f"{stamp}; every number in µs, MB, TB/s or % as its column says; formulas: fuseprof columns and the modules "
            f"named in each section.</p>{body}{_loader(plotly)}</body></html>")


def _trace_text(i: int, result: TraceAnalysis) -> str:
    """One trace of ``Report``'s text: its verdict, then its sections, each with its title and rows."""
    lines = [f"[{i}] {result.name} ({result.device or 'device unknown'}; {result.window})"]
    verdict = result.frames.get("verdict", pd.DataFrame())
    if not verdict.empty:
        v = verdict.iloc[0]
        lines.append(f"  verdict: {v['bound']}: GPU busy {number_text(v['busy_ns'] / 1e3, 3)} µs of a "
                     f"{number_text(v['span_ns'] / 1e3, 3)} µs span ({number_text(v['busy_pct'], 1)}%)")
    categories = result.frames.get("categories", pd.DataFrame())
    if not categories.empty:
        lines.append("  where the GPU time goes: " + ", ".join(
            f"{c.category} {number_text(c.share_pct, 1)}%" for c in categories.head(4).itertuples()))
    worth = result.frames.get("worth_doing", pd.DataFrame())
    if not worth.empty:
        w = worth.iloc[0]
        lines.append(f"  worth doing first: {w['what']} (saves {number_text(w['saving_ns'] / 1e3, 3)} µs of step "
                     f"time without the profiler, {number_text(w['share_of_span_pct'], 1)}% of the span)")
    tables = shown_tables(result)
    width = max((len(name) for name in tables), default=0)
    lines.append(f"  sections (report[{i}].NAME or report[{i}].frames['NAME']):")
    for name, frame in tables.items():
        title = table_spec(name).heading(frame, result).split(" (")[0]
        lines.append(f"    {name.ljust(width)}  {number_text(len(frame)).rjust(6)} row(s)  {title}")
    others = sorted(set(result.frames) - set(tables))
    if others:
        lines.append(f"  also in report[{i}].frames: {', '.join(others)}; report[{i}].events: every GPU event")
    return "\n".join(clean_text(line) for line in lines)  # a trace's name may hold escape sequences


class Report(list):  # type: ignore[type-arg]
    """Trace analyses that show the report's sections when a notebook displays them: ``fuseprof.analyze``
    returns one, so ``analyze("trace.json.gz")`` alone in a cell draws the report (``_ipython_display_``)."""

    def __repr__(self) -> str:
        """Per trace, its verdict (what bounds it, where the GPU time goes, the first thing worth doing) and its
        sections with how to reach each: what ``print(report)`` and a console show, and a notebook beside the HTML.
        No absolute paths (trace names as the analysis gives them): it reads the same on every machine."""
        head = (f"fuseprof report of {len(self)} trace(s): report[i] is one trace's analysis, each section a "
                "DataFrame in base units (ns, bytes) by attribute or key")
        return "\n\n".join([head, *(_trace_text(i, r) for i, r in enumerate(self))])

    __str__ = __repr__

    def _ipython_display_(self) -> None:
        """In a notebook: the report's sections as HTML (no script), each figure displayed in its place as a
        Plotly figure, through the notebook's renderers — ``plotly_mimetype+png`` in fuseprof's notebooks: drawn
        by the front end's own Plotly, nothing fetched, with a PNG beside it that GitHub and offline viewers
        show. (The HTML with Plotly from its CDN was blank offline and on GitHub.)"""
        import plotly.io as pio
        from IPython.display import HTML, display

        counter = [0]
        body = "".join(sections(r, counter) for r in self) + _ranks(list(self), counter)
        parts = _FIGURE.split(body)  # text, figure JSON, text, ...
        for i, part in enumerate(parts):
            if i % 2:
                display(pio.from_json(html.unescape(part)))
            elif part:
                display(HTML(f"<div><style>{_STYLE}</style>{part}</div>"))


_FIGURE = re.compile(r"<div class='fig' id='fig\d+' data-figure=\"([^\"]*)\"></div>")  # what ``_figure`` writes
