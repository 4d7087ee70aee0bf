"""The Streamlit app run headless by AppTest on the committed traces: every page renders, and its
charts and tables hold the values of a known kernel."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fuseprof
from fuseprof.model.roofline import measured_roofs
from tests.conftest import ROOT, SEED_BUNDLE, TRACES, covered_ns

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
APP = str(ROOT / "dashboards" / "app.py")


@pytest.fixture(autouse=True)
def frozen_bundles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app reads the frozen fixture bundles, not the checkout's growing traces/ (a test may point it
    elsewhere with its own FUSEPROF_TRACES)."""
    monkeypatch.setenv("FUSEPROF_TRACES", str(TRACES))


def run_page(page: str, **params: str | list[str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = page
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _values(array: object) -> list:
    """Plotly's JSON writes numeric arrays as {"dtype", "bdata": base64}; decode those."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array or [])


def figure(at: AppTest, index: int = 0) -> dict:
    """The chart's traces (name, x, y) and title, from the JSON Streamlit sends the browser."""
    spec = json.loads(at.get("plotly_chart")[index].proto.spec)
    traces = [{"name": t.get("name"), "x": _values(t.get("x")), "y": _values(t.get("y"))} for t in spec["data"]]
    return {"data": traces, "title": spec["layout"]["title"]["text"]}


def seed_only(**extra: str | list[str]) -> dict:
    return {"bundle": [SEED_BUNDLE.name], **extra}


def test_roofline_draws_the_known_kernel_where_the_model_puts_it() -> None:
    at = run_page("Roofline", **seed_only(variant=["compiled"], shape=["1024x8192"]))
    fig = figure(at)
    compiled = next(t for t in fig["data"] if t.get("name") == "compiled")
    # raw ncu: FLOPs 89,128,960 (fp32) + 69,206,016 (packed fp16) = 158,334,976 over 35,713,536 DRAM bytes
    assert list(compiled["x"]) == [pytest.approx(158_334_976 / 35_713_536)]
    assert list(compiled["y"]) == [pytest.approx(158_334_976 / 15_008e-9)]
    names = [t["name"] for t in fig["data"]]
    # by default the capture GPU's own roof (measured by fuseprof ceilings), the H100 SXM beside it
    assert names[0] == "NVIDIA H200 (measured): DRAM 4.25 TB/s"
    assert "H100 SXM (datasheet): DRAM 3.35 TB/s (reference)" in names
    table = at.dataframe[0].value
    measured = measured_roofs(TRACES)["NVIDIA H200"].dram_bytes_per_s
    assert len(table) == 1 and table["roof_pipe"].iloc[0] == "fp32" and table["bound"].iloc[0] == "memory"
    assert table["pct_of_roof"].iloc[0] == pytest.approx(100 * 35_713_536 / 15_008e-9 / measured)  # 55.9 %


def test_roofline_against_a_chosen_roof_keeps_the_reference() -> None:
    at = run_page("Roofline", roof="H100 SXM (datasheet)", **seed_only())
    fig = figure(at)
    assert fig["title"] == "Roofline: each kernel against its pipe's ceiling on H100 SXM (datasheet)"
    assert fig["data"][0]["name"] == "H100 SXM (datasheet): DRAM 3.35 TB/s"
    stars = next(t for t in fig["data"] if t.get("name") == "whole chain of a call")
    assert len(stars["x"]) == 4  # the eager chain at each of the seed's four shapes


def test_gemms_sit_on_their_bf16_tensor_roof() -> None:
    at = run_page("Roofline", bundle=["llama_mlp-bfloat16-h200-20261129t150856z"], shape=["2048x4096"])
    names = [t["name"] for t in figure(at)["data"]]
    assert "NVIDIA H200 (measured): BF16 tensor 751.6 TFLOP/s" in names
    table = at.dataframe[0].value
    gemms = table[table["roof_pipe"] == "tensor_bf16"]
    assert len(gemms) == 9 and (gemms["bound"] == "compute").all()


def test_occupancy_page_sets_computed_beside_measured() -> None:
    at = run_page("Occupancy", **seed_only(variant=["compiled"]))
    table = at.dataframe[0].value
    assert len(table) == 4
    assert (table["computed_occupancy_pct"] == table["theoretical_occupancy_pct"]).all()
    assert table["achieved_occupancy_pct"].between(5, 100).all()
    bars = figure(at, 0)["data"]
    assert [t["name"] for t in bars] == ["theoretical (ncu)", "theoretical (computed)", "achieved (ncu)"]
    curves = figure(at, 1)["data"]
    # 27 registers (ptxas, via ncu), 512 threads: 100%, limited by registers and warps alike
    assert curves[2]["name"] == "this launch: 100.0% (registers+warps)" and list(curves[2]["x"]) == [27]


def test_occupancy_calculator_takes_new_inputs() -> None:
    at = run_page("Occupancy", **seed_only(variant=["compiled"]))
    at.number_input(key="occ-regs-0").set_value(128).run()
    assert not at.exception
    # 128 registers x 512 threads = 64K registers: one block of 16 warps = 25%, the register file decides
    assert at.metric[0].value == "25.0%"
    curves = figure(at, 1)["data"]
    assert curves[2]["name"] == "this launch: 25.0% (registers)"


def test_occupancy_curves_equal_the_calculator_for_every_committed_kernel() -> None:
    import fuseprof
    from fuseprof.model.occupancy import block_size_curve, occupancy, occupancy_curve, occupancy_table

    table = occupancy_table(fuseprof.load(TRACES))
    configs = table[["threads_per_block", "registers_per_thread", "shared_mem_bytes"]].drop_duplicates()
    assert len(configs) > 20
    for threads, regs, smem in configs.astype(int).itertuples(index=False):
        by_regs = occupancy_curve(threads, smem).set_index("registers_per_thread")["theoretical_occupancy_pct"]
        assert by_regs.index.tolist() == list(range(1, 256))  # every register count, nothing held over
        for r in range(1, 256):
            assert by_regs[r] == occupancy(threads, r, smem).theoretical_pct
        by_block = block_size_curve(regs, smem).set_index("threads_per_block")["theoretical_occupancy_pct"]
        for b, pct in by_block.items():
            assert pct == occupancy(b, regs, smem).theoretical_pct
    # and at each kernel's own registers the curve gives ncu's theoretical occupancy
    for row in table.itertuples():
        curve = occupancy_curve(int(row.threads_per_block), int(row.shared_mem_bytes)).set_index("registers_per_thread")
        assert curve.loc[int(row.registers_per_thread), "theoretical_occupancy_pct"] == pytest.approx(
            row.theoretical_occupancy_pct)


def test_fusion_page_shows_bytes_and_launches_per_call() -> None:
    at = run_page("Fusion", **seed_only())
    table = at.dataframe[0].value.set_index(["variant", "shape"])
    # shown in MB (the header says so); the CSV download keeps bytes
    assert table.loc[("eager", "1024x4096"), "dram MB"] == 192.692
    assert table.loc[("compiled", "1024x4096"), "dram MB"] == 16.812
    assert table.loc[("eager", "1024x4096"), "kernels_per_call"] == 13
    assert table.loc[("eager", "1024x4096"), "nominal MB"] == round(2 * (3 * 1024 * 4096 + 4096) / 1e6, 3)


def test_launches_page_times_one_call() -> None:
    at = run_page("Launches", **seed_only())
    gaps = at.dataframe[0].value.set_index("variant")
    assert gaps.loc["eager", "kernels"] == 13 and gaps.loc["compiled", "kernels"] == 1
    assert gaps.loc["eager", "gap µs"] > 0  # 13 launches leave the GPU idle between kernels
    names = [t["name"] for t in figure(at)["data"]]
    assert "eager kernels" in names and "eager launch calls" in names


def test_launches_page_on_a_trace_without_variants_shows_one_step() -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = "Launches"
    at.query_params["bundle"] = ["llama4l-eager-h200"]
    at.run()
    assert not at.exception and not at.error
    assert [s.label for s in at.selectbox][-1] == "Profiler step"
    assert at.selectbox[-1].value == "prefill"  # steps in time order
    at.selectbox[-1].select("decode_step #2").run()
    gaps = at.dataframe[0].value
    assert len(gaps) == 1 and gaps["step"].iloc[0] == "decode_step #2"
    step = fuseprof.load(TRACES / "llama4l-eager-h200").query("step == 'decode_step #2'")
    busy = covered_ns(list(zip(step["start_ns"], step["start_ns"] + step["duration_ns"])))
    assert gaps["gpu_busy µs"].iloc[0] == round(busy / 1e3, 3)  # shown in µs, the header says so
    assert gaps["span µs"].iloc[0] == round(((step["start_ns"] + step["duration_ns"]).max() - step["start_ns"].min()) / 1e3, 3)


def test_every_chart_has_a_csv_download() -> None:
    for page in ("Roofline", "Occupancy", "Fusion", "Launches"):
        at = run_page(page, **seed_only())
        assert len(at.get("download_button")) >= 1, page


def test_model_page_shows_the_trace_its_opportunities_and_a_diff() -> None:
    at = run_page("Model", section="every section")
    assert at.selectbox(key="choice-trace").value == "llama4l-compiled-h200"  # the llama traces come first
    at.selectbox(key="choice-trace").select("llama4l-eager-h200").run()
    at.selectbox(key="choice-diff").select("llama4l-compiled-h200").run()
    assert not at.exception and not at.error
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles[:2] == ["GPU timeline: prefill", "Time by category"]
    # rates from the trace's own GPU: the folder's ceilings bundle is not the trace's (--ceilings names one)
    assert titles[2].startswith("Per-op roofline from recorded shapes, against H200 (datasheet)")
    assert titles[3] == "A against B, per category"
    fusion = next(d.value for d in at.dataframe if "fused by" in d.value.columns)
    assert fusion["×"].iloc[0] == 36 and fusion["kernels"].iloc[0] == 15
    diff = next(d.value for d in at.dataframe if "metric" in d.value.columns).set_index("metric")
    assert diff.loc["events", "a"] == 1742 and diff.loc["events", "b"] == 574


def test_model_page_takes_measured_rates_only_from_a_named_ceilings_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    ceilings = next(p for p in TRACES.iterdir() if p.name.startswith("ceilings-"))
    monkeypatch.setenv("FUSEPROF_CEILINGS", str(ceilings))
    at = run_page("Model", section="roofline", trace="llama4l-eager-h200")
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert titles[1].startswith("Per-op roofline from recorded shapes, against NVIDIA H200 (measured)")


@pytest.mark.parametrize("roof", ["H100 SXM", "H100 PCIe", "H200", "A100 80GB", "B200"])
def test_every_datasheet_roof_draws(roof: str) -> None:
    # B200 and A100 lack some pipes' peaks (no SIMT FP16 rate printed, no FP8): drawn without them
    at = run_page("Roofline", roof=f"{roof} (datasheet)")
    assert figure(at)["title"].endswith(f"{roof} (datasheet)")


def test_layer_page_breaks_the_decoder_layer_down_per_variant() -> None:
    at = run_page("Layer")
    assert at.selectbox(key="choice-layer-bundle").value == "decoder_layer-bfloat16-h200-20261129t174445z"
    assert at.selectbox(key="choice-layer-shape").value == "1x1x2048"
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert title == "Where one call's time goes, 1x1x2048"
    timings = pd.read_parquet(TRACES / "decoder_layer-bfloat16-h200-20261129t174445z" / "timings.parquet")
    table = at.dataframe[0].value.set_index(["variant", "shape"])
    expected = timings.set_index(["variant", "shape"]).loc[("eager", "1x1x2048"), "as_called_median_ns"] / 1e3
    assert table.loc[("eager", "1x1x2048"), "as_called_us"] == expected
    assert table.loc[("eager_graph", "1x1x2048"), "launches_per_call"] == 1
    amdahl = at.dataframe[1].value
    assert list(amdahl["shape"]) == ["1x1x2048", "1x2048x2048", "8x1x2048", "64x1x2048"]
    at.selectbox(key="choice-layer-shape").select("64x1x2048").run()
    assert not at.exception
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert title.endswith("64x1x2048")


def _app_over(folder: Path, page: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("FUSEPROF_TRACES", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = page
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_damaged_bundle_is_left_out_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    shutil.copytree(SEED_BUNDLE, tmp_path / SEED_BUNDLE.name)
    broken = shutil.copytree(SEED_BUNDLE, tmp_path / "broken-copy")
    (broken / "kernels.parquet").write_bytes((broken / "kernels.parquet").read_bytes()[:300])
    at = _app_over(tmp_path, "Roofline", monkeypatch)
    assert any("Left out" in w.value and "broken\\-copy" in w.value for w in at.warning)  # Markdown-escaped
    assert "1 bundles with kernels" in at.caption[0].value and figure(at)["data"]


def test_bundles_added_after_start_are_seen_without_a_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    shutil.copytree(SEED_BUNDLE, tmp_path / SEED_BUNDLE.name)
    at = _app_over(tmp_path, "Roofline", monkeypatch)
    assert at.caption[0].value.startswith("1 bundles")
    shutil.copytree(TRACES / "llama_mlp-bfloat16-h200-20261129t150856z", tmp_path / "llama_mlp-new")
    at.run()
    assert at.caption[0].value.startswith("2 bundles")


def test_the_model_page_says_why_a_cpu_run_has_no_trace_analysis(tmp_path: Path, monkeypatch) -> None:
    """`fuseprof run` on a machine without a GPU writes a bundle of CPU ops (as the README's quick start
    does): the Model page explains instead of failing."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "fuseprof.cli", "run", "--out", str(tmp_path),
                           str(ROOT / "examples" / "region_demo.py"), "--steps", "1"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    at = _app_over(tmp_path, "Model", monkeypatch)
    assert any("no GPU kernels" in e.value for e in at.error)


def _big_bundle(folder: Path, kernels: int) -> Path:
    """A copy of the eager Llama bundle whose kernel table repeats its rows to ``kernels`` rows."""
    import shutil

    source = TRACES / "llama4l-eager-h200"
    big = shutil.copytree(source, folder / "llama-big")
    table = pd.read_parquet(source / "kernels.parquet")
    pd.concat([table] * (kernels // len(table) + 1), ignore_index=True).to_parquet(big / "kernels.parquet",
                                                                                   index=False)
    return big


def test_the_frame_estimate_is_near_what_pandas_holds(tmp_path: Path) -> None:
    """The estimate read from a Parquet footer against pandas' own count of the loaded frame, on a
    committed bundle and on one of 200,000 kernels: within a factor the budget can rest on."""
    from fuseprof.bundle.loading import frame_bytes

    for bundle in (TRACES / "llama4l-eager-h200", _big_bundle(tmp_path, 200_000)):
        held = fuseprof.load(bundle).memory_usage(deep=True).sum()
        assert 0.8 * held < frame_bytes(bundle) < 1.6 * held, (bundle.name, frame_bytes(bundle), held)


def test_a_bundle_past_the_memory_budget_is_left_out_with_a_note(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """200,000 kernels take ~190 MB as a frame; under a 100 MB budget the dashboard shows the seed bundle
    and names the big one with its size; under 10 kB it shows nothing and says why; a budget that is no
    number above 0 is refused by name."""
    import shutil

    shutil.copytree(SEED_BUNDLE, tmp_path / SEED_BUNDLE.name)
    _big_bundle(tmp_path, 200_000)
    monkeypatch.setenv("FUSEPROF_DASHBOARD_MB", "100")
    at = _app_over(tmp_path, "Roofline", monkeypatch)
    notes = [w.value for w in at.warning if "Left out" in w.value]
    assert len(notes) == 1 and "llama\\-big" in notes[0] and "past the budget of 100 MB" in notes[0], notes
    assert "1 bundles with kernels" in at.caption[0].value and figure(at)["data"]
    monkeypatch.setenv("FUSEPROF_DASHBOARD_MB", "0.01")
    at = _app_over(tmp_path, "Roofline", monkeypatch)
    # the bundles' traces still open on the Model page (and, two of them, the Diff page since 2e10872): the note
    # says why the kernel pages are gone
    assert any("no bundle fits" in w.value for w in at.warning) and at.radio(key="choice-page").options == ["Model", "Diff", "Layer"]
    for bad in ("0", "-5", "a lot"):  # refused by name, as --memory-mb is, not read as a budget nothing fits
        monkeypatch.setenv("FUSEPROF_DASHBOARD_MB", bad)
        at = _app_over(tmp_path, "Roofline", monkeypatch)
        assert [e.value for e in at.error] and "a number above 0" in at.error[0].value, (bad, at.error)


def test_a_two_million_kernel_bundle_leaves_the_server_small(tmp_path: Path) -> None:
    """The case that took the dashboard to 4 GB: the default budget declines the table from its footer,
    so loading the folder grows the process by little (measured in a child: RSS before and after)."""
    import subprocess
    import sys

    _big_bundle(tmp_path, 2_000_000)
    code = ("import resource, sys; from fuseprof.bundle.loading import past_budget, load; "
            "from fuseprof.commands.dashboard import DEFAULT_MEMORY_MB; "
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            "out, notes = past_budget(sys.argv[1], DEFAULT_MEMORY_MB); load(sys.argv[1], out); "
            "print(len(out), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    left_out, grown_mb = map(int, done.stdout.split())
    assert left_out == 1 and grown_mb < 100, done.stdout
