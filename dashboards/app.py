"""fuseprof dashboard: the Model page's analysis of torch.profiler traces, the Diff page's aligned comparison of
two of them, and roofline, occupancy, fusion, launches and layers over capture bundles — each page only where the
input has something for it.

Run ``fuseprof dashboard [PATH]`` or ``streamlit run dashboards/app.py -- --traces PATH`` (a trace file, a
bundle, or a folder of them). Pages only call the analysis, the models and the figure builders in
``fuseprof.figures``; state (the page, the trace, the window, the filters, the rows) lives in the URL's query
parameters, so a view can be shared as a link.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

if (spec := importlib.util.find_spec("fuseprof")) is not None and spec.origin is None:
    # started from a folder that holds a folder named fuseprof (a checkout): that namespace folder would
    # shadow the installed package; look past the working directory
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    sys.modules.pop("fuseprof", None)

import streamlit as st  # noqa: E402
from fuseprof_dashboards import first_view  # noqa: E402

DEFAULT_TRACES = Path(__file__).resolve().parents[1] / "traces"


def traces_dir() -> Path:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", default=os.environ.get("FUSEPROF_TRACES", str(DEFAULT_TRACES)))
    args, _ = parser.parse_known_args(sys.argv[1:])
    return Path(args.traces)


# A new tab's first run draws the Model page's top from the view kept in the store, before pandas and the analysis
# are imported below (fuseprof_dashboards.first_view); main() then draws the rest, after it
FIRST = first_view.draw(traces_dir())

import pandas as pd  # noqa: E402
from fuseprof_dashboards.deferred import Deferred  # noqa: E402
from fuseprof_dashboards.inputs import Inputs, find_inputs  # noqa: E402

from fuseprof import figures, load, load_timings  # noqa: E402
from fuseprof.bundle.loading import past_budget  # noqa: E402
from fuseprof.commands.dashboard import DEFAULT_MEMORY_MB, MEMORY_MB_ENV, checked_budget  # noqa: E402
from fuseprof.display import human_units, md_text  # noqa: E402
from fuseprof.errors import FuseprofError  # noqa: E402
from fuseprof.model import catalog, launches  # noqa: E402
from fuseprof.model.devices import DEVICES, REFERENCE_DEVICE  # noqa: E402
from fuseprof.model.occupancy import device_limits, occupancy, occupancy_table  # noqa: E402
from fuseprof.model.roofline import PLACED_SOURCES, Roof, capture_roof, datasheet_roof, measured_roofs, ncu_roof, place  # noqa: E402
from fuseprof.tables.summary import summarize  # noqa: E402

PAGES = ("Roofline", "Occupancy", "Fusion", "Launches", "Model", "Diff", "Layer")


def folder_signature(inputs: Inputs) -> tuple[tuple[str, float], ...]:
    """The bundles found and when each was written: a bundle added, removed or rewritten since the last run is
    a new cache key, so the pages see it without a restart."""
    from fuseprof.bundle.files import MANIFEST

    try:
        return tuple((b.name, (b / MANIFEST).stat().st_mtime) for b in inputs.bundles)
    except OSError:
        return ()


def budget() -> float:
    """The memory budget in MB: ``FUSEPROF_DASHBOARD_MB`` if set (``--memory-mb``), else the default."""
    value = os.environ.get(MEMORY_MB_ENV) or str(DEFAULT_MEMORY_MB)
    try:
        budget_mb = float(value)
    except ValueError:
        budget_mb = float("nan")  # refused below, with the value as given
    return checked_budget(budget_mb, f"{MEMORY_MB_ENV}={value!r}")


def _load_sound(path: str, budget_mb: float) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Every bundle's kernels and timings; a damaged bundle, or one past the memory budget, is left out
    with its reason, not fatal."""
    leave_out, notes = past_budget(path, budget_mb)
    try:
        kernels, timings = load(path, leave_out), load_timings(path, leave_out)
    except FuseprofError:
        kernels, timings, damaged = _one_by_one(path, leave_out)
        notes += damaged
    if kernels.empty and leave_out:
        raise FuseprofError(f"{path}: no bundle fits the dashboard's memory budget:\n" + "\n".join(notes))
    return kernels, timings, notes


def _one_by_one(path: str, leave_out: set[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The bundles that load, each on its own, and the errors of those that do not; the first error
    when none does."""
    from fuseprof.bundle.files import find_bundles

    kernels, timings, damaged = [], [], []
    for bundle in find_bundles(Path(path)):
        if bundle.name in leave_out:
            continue
        try:
            kernels.append(load(bundle))
            timings.append(load_timings(bundle))
        except FuseprofError as exc:
            damaged.append(str(exc))
    if not kernels:
        raise FuseprofError(damaged[0])
    return pd.concat(kernels, ignore_index=True), pd.concat(timings, ignore_index=True), damaged


@st.cache_resource(show_spinner="Loading bundles…")  # shared, not copied: the pages never modify these frames
def load_everything(path: str, signature: tuple[tuple[str, float], ...], budget_mb: float
                    ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], dict[str, int], dict[str, Roof], list[str]]:
    kernels, timings, damaged = _load_sound(path, budget_mb)
    return (kernels, timings, catalog.variant_kinds(path), catalog.profiler_repeats(path), measured_roofs(path),
            damaged)


INLINE_ROWS = 500  # a bigger table is sent to the browser only when asked for: 3,000 rows cost a second


def data_table(frame: pd.DataFrame, name: str) -> None:
    """The numbers behind a chart, one click away, in units a reader wants (µs, MB, TB/s; the headers
    say which), with a CSV download in base units (ns, bytes)."""
    with st.expander(f"Data: {name} ({len(frame)} rows)"):
        if len(frame) <= INLINE_ROWS or st.toggle(f"Show all {len(frame)} rows", key=f"show-{name}"):
            st.dataframe(human_units(frame), hide_index=True)
        st.download_button("Download CSV", frame.to_csv(index=False), file_name=f"{name}.csv", mime="text/csv",
                           key=f"csv-{name}")


def _multiselect(label: str, options: list[str], key: str) -> list[str]:
    """Empty means all: a hundred bundles as default chips made the page slow to draw."""
    chosen = [v for v in st.query_params.get_all(key) if v in options]
    picked = st.sidebar.multiselect(label, options, default=chosen, key=f"filter-{key}", placeholder="all")
    st.query_params[key] = picked
    return picked or options


def filtered(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame
    for column in ("bundle", "case", "variant", "shape"):
        if column in out and out[column].notna().any():
            options = sorted(out[column].dropna().unique().tolist())
            out = out[out[column].isin(_multiselect(column, options, column))]
    return out


CAPTURE_ROOF = "each kernel's own GPU (measured, else datasheet)"


def _keyed_choice(widget, label: str, options: list[str], param: str,  # type: ignore[no-untyped-def]
                  default: str | None = None) -> str:
    """A radio or selectbox whose state lives under a widget key, seeded once from the URL.

    Passing ``index=`` from the URL on every run made Streamlit see a new widget whenever the
    URL changed, which dropped every second click; the key keeps one widget across runs."""
    key = f"choice-{param}"
    if st.session_state.get(key) not in options:  # the first run, or options that changed (another bundle's shapes)
        wanted = st.query_params.get(param) if key not in st.session_state else None
        st.session_state[key] = wanted if wanted in options else default if default in options else options[0]
    value = widget(label, options, key=key)
    st.query_params[param] = value
    return str(value)


def roofline_page(kernels: pd.DataFrame, kinds: dict[str, str], measured: dict[str, Roof]) -> None:
    options: dict[str, Roof | None] = {CAPTURE_ROOF: None}
    options.update({f"{name} (datasheet)": datasheet_roof(spec) for name, spec in DEVICES.items()})
    options.update({roof.label: roof for roof in measured.values()})
    for device in sorted(kernels["device"].dropna().unique()):
        found = ncu_roof(kernels, device)
        if found:
            options[found.label] = found
    label = _keyed_choice(st.sidebar.selectbox, "Roof", list(options), "roof")
    placed = place(kernels, options[label], measured)
    if placed.empty:
        st.info("No ncu-measured kernels in the selection: the roofline needs DRAM bytes and FLOPs.")
        return
    chosen = options[label]
    roofs = [chosen] if chosen else [capture_roof(d, measured) for d in sorted(placed["device"].dropna().unique())]
    reference = datasheet_roof(DEVICES[REFERENCE_DEVICE])
    st.plotly_chart(figures.roofline_figure(placed, roofs, reference, kinds), key="roofline")
    for roof in roofs:  # a GPU without a row of its own: said, never judged by another's roof in silence
        if not roof.judged:
            st.warning(f"Roof unknown: {md_text(roof.label)}; its points are not judged (bound, % of roof).")
    no_flops = int((placed["flops"].fillna(0) == 0).sum())
    st.caption("Points: one per ncu-profiled kernel, measured against the ceiling of the pipe that did most of its "
               "FLOPs (tensor-core FLOPs by source precision, SIMT FP16/FP32/FP64); bytes = DRAM read + write. "
               f"Black: the roof points are judged against; grey: the {REFERENCE_DEVICE} reference. Stars: a call's "
               "whole chain of kernels as one. × marks a kernel faster than its own GPU's DRAM (L2-resident), drawn "
               f"on the roof. {no_flops} kernels without FLOPs are in the table but not on the log axes. "
               "Formulas: `fuseprof columns`.")
    columns = ["bundle", "variant", "shape", "kernel_short", "flops", "dram_bytes", "duration_ns",
               "arithmetic_intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "roof_pipe", "peak_flops_per_s",
               "attainable_flops_per_s", "bound", "pct_of_roof", "l2_resident", "roof"]
    data_table(placed[columns], "roofline")


def occupancy_page(kernels: pd.DataFrame) -> None:
    table = occupancy_table(kernels)
    if table.empty:
        st.info("No ncu-measured kernels in the selection.")
        return
    st.plotly_chart(figures.occupancy_figure(table), key="occupancy")
    columns = ["bundle", "variant", "shape", "kernel_short", "registers_per_thread", "shared_mem_bytes",
               "threads_per_block", "blocks", "theoretical_occupancy_pct", "computed_occupancy_pct",
               "achieved_occupancy_pct", "occupancy_limiter", "computed_limiter", "spill_load_bytes",
               "spill_store_bytes"]
    data_table(table[columns], "occupancy")
    labels = figures.kernel_labels(table)
    chosen = st.selectbox("Start from kernel", range(len(labels)), format_func=lambda i: labels[i], key="occ-kernel")
    row = table.iloc[chosen]
    calculator(row, chosen)


def calculator(row: pd.Series, chosen: int) -> None:
    """The occupancy calculator on the kernel's own GPU's per-SM limits (``devices.SM_LIMITS`` by its compute
    capability), bounded by them; a GPU without limits in the table says so and gets none, never Hopper's."""
    device = row.get("device")
    limits = device_limits(device)
    if limits is None:
        st.subheader("Occupancy calculator")
        st.info(f"Per-SM limits unknown for {md_text(device) if isinstance(device, str) and device else 'this GPU'}: "
                "fuseprof's device table holds no registers, shared memory or warp slots for it (AMD CUs and "
                "unknown parts), so no occupancy is computed: unknown.")
        return
    st.subheader(f"Occupancy calculator ({md_text(device)}: {limits.max_warps} warps of {limits.warp_width} threads, "
                 f"{limits.registers:,} registers, {limits.shared_bytes:,} B shared memory per SM)")
    left, middle, right = st.columns(3)
    registers = left.number_input("registers per thread", 1, limits.max_registers_per_thread,
                                  min(int(row["registers_per_thread"]), limits.max_registers_per_thread),
                                  key=f"occ-regs-{chosen}")
    most_threads = min(1024, limits.max_warps * limits.warp_width)
    threads = middle.number_input("threads per block", 1, most_threads,
                                  min(int(row["threads_per_block"]), most_threads), key=f"occ-threads-{chosen}")
    most_shared = limits.shared_bytes - limits.shared_reserved_per_block
    shared = right.number_input("shared memory per block (bytes)", 0, most_shared,
                                min(int(row["shared_mem_bytes"]), most_shared), key=f"occ-smem-{chosen}")
    result = occupancy(int(threads), int(registers), int(shared), limits)
    st.metric("theoretical occupancy", f"{result.theoretical_pct:.1f}%", help=f"limited by {result.limiter}")
    st.dataframe(pd.DataFrame({"resource": ["warps", "registers", "shared memory", "block slots"],
                               "blocks per SM it allows": [result.blocks_by_warps, result.blocks_by_registers,
                                                           result.blocks_by_shared_mem, result.blocks_by_block_limit]}),
                 hide_index=True)
    st.caption(f"{result.blocks} resident blocks × {result.warps_per_block} warps of {result.limits.max_warps}; "
               f"limiter: {result.limiter} (as ncu's launch__occupancy_limit_* name it).")
    st.plotly_chart(figures.occupancy_curves_figure(int(threads), int(registers), int(shared), limits),
                    key="occupancy-curves")


def fusion_page(kernels: pd.DataFrame, timings: pd.DataFrame, kinds: dict[str, str]) -> None:
    summary = summarize(kernels, timings)
    summary = summary[summary["kernels_per_call"].notna() & summary["gpu_median_ns"].notna()]
    if summary.empty:
        st.info("Fusion needs capture bundles with both ncu kernels and timings.")
        return
    bundles = sorted(summary["bundle"].unique())
    bundle = _keyed_choice(st.selectbox, "Bundle", bundles, "fusion-bundle") if len(bundles) > 1 else bundles[0]
    part = summary[summary["bundle"] == bundle]
    st.subheader(md_text(part["case"].iloc[0]))
    st.caption(md_text(bundle))
    st.plotly_chart(figures.fusion_figure(part, kinds), key=f"fusion-{bundle}")
    data_table(part[["bundle", "variant", "shape", "kernels_per_call", "gpu_median_ns", "as_called_median_ns",
                     "dram_bytes", "l2_bytes", "nominal_bytes", "dram_bytes_over_nominal", "ncu_time_ns"]],
               f"fusion-{bundle}")


def launches_page(kernels: pd.DataFrame, repeats: dict[str, int], kinds: dict[str, str]) -> None:
    profiled = kernels[(kernels["source"] == "torch.profiler") & kernels["launch_start_ns"].notna()]
    if profiled.empty:
        st.info("No torch.profiler kernels in the selection.")
        return
    bundle = _keyed_choice(st.selectbox, "Bundle", sorted(profiled["bundle"].unique()), "launch-bundle")
    rows = profiled[profiled["bundle"] == bundle]
    if rows["variant"].notna().any():  # fuseprof's own capture: one call of each variant at a shape
        shape = _keyed_choice(st.selectbox, "Shape", rows["shape"].dropna().unique().tolist(), "launch-shape")
        one_call = launches.last_call(rows[rows["shape"] == shape], repeats.get(bundle, 1))
    else:  # someone else's trace: one profiler step, every stream
        steps = rows.drop_duplicates("step").sort_values("start_ns")["step"].dropna().tolist()
        if not steps:
            st.info(f"{md_text(bundle)} has no variants and no record_function ranges to split it by; showing it whole.")
            one_call = rows
        else:
            one_call = rows[rows["step"] == _keyed_choice(st.selectbox, "Profiler step", steps, "launch-step")]
    st.plotly_chart(figures.launches_figure(one_call, kinds), key="launches")
    data_table(launches.launch_gaps(one_call), "launch-gaps")


def kernel_pages(kernels: pd.DataFrame, timings: pd.DataFrame) -> list[str]:
    """The capture pages the bundles' kernel tables have something for (before any filter)."""
    if kernels.empty:
        return []
    ncu = kernels[kernels["source"] == "ncu"]
    shown = {
        "Roofline": bool(kernels["source"].isin(PLACED_SOURCES).any()),
        "Occupancy": bool(ncu[["threads_per_block", "registers_per_thread"]].notna().all(axis=1).any()),
        "Fusion": not ncu.empty and not timings.empty and bool(timings["gpu_median_ns"].notna().any()),
        "Launches": bool(((kernels["source"] == "torch.profiler") & kernels["launch_start_ns"].notna()).any()),
    }
    return [page for page, has in shown.items() if has]


def available_pages(inputs: Inputs, kernels: pd.DataFrame, timings: pd.DataFrame) -> list[str]:
    """The pages with something to show, in ``PAGES`` order: the Model page where there is a trace, the Layer
    page where there is a capture bundle, the others by what the kernel tables hold."""
    has = set(kernel_pages(kernels, timings))
    has |= {"Model"} if inputs.traces else set()
    has |= {"Diff"} if len(inputs.traces) >= 2 else set()  # two runs compared by what they compute
    has |= {"Layer"} if inputs.captures else set()
    return [page for page in PAGES if page in has]


EMPTY = pd.DataFrame({"bundle": pd.Series(dtype="object")})


def main(first: first_view.Drawn | None) -> None:
    """The page; ``first``: the Model page's top, drawn already in this run from the kept view."""
    if first is None:
        st.set_page_config(page_title="fuseprof", layout="wide")
    path = traces_dir()
    try:
        inputs, budget_mb = find_inputs(path), budget()
    except FuseprofError as exc:
        st.error(md_text(exc))
        return
    try:
        kernels, timings, kinds, repeats, roofs, damaged = (
            load_everything(str(path), folder_signature(inputs), budget_mb) if inputs.bundles
            else (EMPTY, EMPTY, {}, {}, {}, []))
    except FuseprofError as exc:
        if not inputs.traces:  # the bundles were all there was to show
            st.error(md_text(exc))
            return
        kernels, timings, kinds, repeats, roofs, damaged = EMPTY, EMPTY, {}, {}, {}, [str(exc)]
    for problem in damaged:
        st.warning(f"Left out: {md_text(problem)}")
    pages = available_pages(inputs, kernels, timings)
    if not pages:
        st.error(f"{md_text(path)}: nothing to show — no torch.profiler trace, and no bundle with kernels "
                 "(`fuseprof ingest TRACE` or `fuseprof profile CASE` makes one)")
        return
    later = Deferred()  # the sidebar's widgets come after the page's first chart (fuseprof_dashboards.deferred)
    page = _keyed_choice(later(st.sidebar.container().radio), "Page", pages, "page")  # its place: the sidebar's top
    if first is None or page != "Model":  # the view is the Model page's, the only page of a trace file alone
        first = None
        st.title(f"fuseprof — {page}")
    try:
        _page(page, path, inputs, kernels, timings, kinds, repeats, roofs, later, first)
    finally:
        later.draw()


def _page(page: str, path: Path, inputs: Inputs, kernels: pd.DataFrame, timings: pd.DataFrame,  # noqa: PLR0913
          kinds: dict[str, str], repeats: dict[str, int], roofs: dict[str, Roof], later: Deferred,
          first: first_view.Drawn | None = None) -> None:
    if page == "Model":  # a whole trace: the kernel filters do not apply
        from fuseprof_dashboards import model_page  # imported here so other pages never pay for it

        model_page.render(inputs.traces, data_table, _keyed_choice, later, first, first_view.slot(inputs))
        return
    if page == "Diff":  # two whole traces, aligned: the kernel filters do not apply
        from fuseprof_dashboards import diff_page

        diff_page.render(inputs.traces, data_table, _keyed_choice)
        return
    st.caption(f"{kernels['bundle'].nunique()} bundles with kernels from {md_text(path)}")
    if page == "Layer":  # one capture bundle's variants: the kernel filters do not apply
        from fuseprof_dashboards import layer_page

        layer_page.render(inputs.captures, data_table, _keyed_choice)
        return
    selected = filtered(kernels)
    selected_timings = timings[timings["bundle"].isin(selected["bundle"].unique())]
    if page == "Roofline":
        roofline_page(selected, kinds, roofs)
    elif page == "Occupancy":
        occupancy_page(selected)
    elif page == "Fusion":
        fusion_page(selected, selected_timings, kinds)
    else:
        launches_page(selected, repeats, kinds)


main(FIRST)
