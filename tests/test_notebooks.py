"""Each notebook runs top to bottom on the committed traces, on a machine without a GPU, within a
minute; its committed outputs equal the fresh run's; its computed conclusions hold the values the bundles
give."""

from __future__ import annotations

import base64
import re
import time

import numpy as np
import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient
NOTEBOOKS = ROOT / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"


def _figure_values(node: object) -> object:
    """A Plotly figure's JSON with its numbers as a reader sees them: typed arrays (``bdata``, float64 bits)
    decoded and every float kept to 9 significant digits. Two machines' BLAS and SIMD paths sum in different
    orders, so the last bit of a float differs between a fresh CI install and the committing machine (c5fb8df,
    and CI at 58b4623 on this notebook's roofline): that is not a stale output, a changed digit is."""
    if isinstance(node, dict):
        if set(node) >= {"bdata", "dtype"}:
            values = np.frombuffer(base64.b64decode(node["bdata"]), dtype=node["dtype"])
            return _figure_values(values.tolist())
        return {k: _figure_values(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_figure_values(v) for v in node]
    if isinstance(node, float):
        return float(f"{node:.9g}")
    return node


def _outputs(book: object) -> list[list[dict]]:
    """Each code cell's outputs as a reader sees them (no execution counts or metadata); a figure's static
    PNG aside (drawn by scripts/run_notebooks.py, its pixels are this machine's fonts'), its numbers to 9
    significant digits (``_figure_values``)."""
    def seen(output: dict) -> dict:
        kept = {k: v for k, v in output.items() if k not in ("execution_count", "metadata")}
        if "data" in kept:
            kept["data"] = {k: _figure_values(v) if k == PLOTLY else v
                            for k, v in kept["data"].items() if k != "image/png"}
        return kept
    return [[seen(o) for o in c.get("outputs", [])] for c in book.cells if c.cell_type == "code"]  # type: ignore[attr-defined]


CDN = re.compile(r"<script[^>]*src=[\"']?https?://", re.I)  # a script the page would fetch (cdn.plot.ly, ...)


def self_contained(book: object) -> list[str]:
    """What keeps ``book``'s outputs from being read offline and on GitHub: a script loaded from the network,
    a Plotly figure without a static image (PNG or SVG) beside it. Empty when nothing does."""
    problems = []
    for i, cell in enumerate(book.cells):  # type: ignore[attr-defined]
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if any(isinstance(v, str) and CDN.search(v) for v in data.values()):
                problems.append(f"cell {i}: loads a script from the network")
            if PLOTLY in data and not {"image/png", "image/svg+xml"} & set(data):
                problems.append(f"cell {i}: a figure without a static image")
    return problems


def test_a_figure_differing_in_the_last_bit_is_the_same_output_and_a_changed_digit_is_not() -> None:
    def figure(values: list[float]) -> dict:
        bits = base64.b64encode(np.array(values, dtype="f8").tobytes()).decode()
        return {"data": [{"x": {"dtype": "f8", "bdata": bits}, "y": [values[0]]}]}
    x = 0.1 + 0.2  # 0.30000000000000004
    nudged = float(np.nextafter(x, 1.0))
    assert nudged != x
    assert _figure_values(figure([x, 2.5])) == _figure_values(figure([nudged, 2.5]))
    assert _figure_values(figure([x, 2.5])) == {"data": [{"x": [0.3, 2.5], "y": [0.3]}]}
    assert _figure_values(figure([x, 2.5])) != _figure_values(figure([0.3001, 2.5]))


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_committed_figure_has_a_static_image_beside_it(path) -> None:
    """GitHub draws a notebook's images and runs none of its scripts: each Plotly output carries a PNG of
    itself (kaleido's, at the figure's size or kaleido's 700 × 500), and no output loads a script."""
    import base64

    book = nbformat.read(path, as_version=4)
    assert not self_contained(book), self_contained(book)
    figures = [o["data"] for c in book.cells for o in c.get("outputs", []) if PLOTLY in o.get("data", {})]
    for data in figures:
        png = base64.b64decode(data.get("image/png", ""))
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000, path.name
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        layout = data[PLOTLY].get("layout", {})
        assert (width, height) == (layout.get("width", 700), layout.get("height", 500)), path.name


def execute(name: str) -> tuple[list[str], float]:
    """Run the notebook in a fresh kernel; return its Markdown outputs and the wall time. Its committed
    outputs must equal the fresh run's (``python scripts/run_notebooks.py`` writes them): a reader on GitHub
    sees what the committed traces give today."""
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    committed = _outputs(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    start = time.monotonic()
    NotebookClient(book, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    elapsed = time.monotonic() - start
    errors = [o for c in book.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors[0].get("evalue")
    assert not self_contained(book), f"{name}: {self_contained(book)}"  # the fresh run's own outputs, not the saved
    stale = [i for i, (a, b) in enumerate(zip(committed, _outputs(book))) if a != b]
    assert not stale and len(committed) == len(_outputs(book)), \
        f"{name}: committed outputs of code cells {stale} differ from a fresh run (python scripts/run_notebooks.py {name})"
    markdown = [o["data"]["text/markdown"] for c in book.cells for o in c.get("outputs", [])
                if "text/markdown" in o.get("data", {})]
    return markdown, elapsed


def test_fused_vs_unfused_traffic() -> None:
    markdown, elapsed = execute("fused_vs_unfused_traffic")
    assert elapsed < 60
    text = markdown[-1]
    for case in ("add_rms_norm", "rmsnorm_swiglu", "silu_and_mul"):
        assert f"**{case}**" in text
    assert "at 1024x8192 the best fused kernel" in text and "12 launches per call" in text


def test_register_pressure() -> None:
    markdown, elapsed = execute("register_pressure")
    assert elapsed < 60
    assert markdown[-1].startswith("Fastest at **warps16**: 40 registers per thread")
    assert "at **warps02** 242 registers" in markdown[-1]


def test_launch_overhead() -> None:
    markdown, elapsed = execute("launch_overhead")
    assert elapsed < 60
    assert "**fused_cuda**: host dispatch" in markdown[-1]
    assert "launch 2–13 kernels a call" in markdown[-1]


def test_model_fusion_opportunities() -> None:
    markdown, elapsed = execute("model_fusion_opportunities")
    assert elapsed < 60
    text = markdown[-1]
    assert "×36 (15 kernels" in text and "RMSNorm chain ×72 (9 kernels" in text
    assert "leaves neither chain in its trace: no RMSNorm chain and no rotary chain" in text
    assert "predicts the measured fused_cuda kernels at M ≥ 1024 within 17.7%" in text


def test_decoder_layer() -> None:
    import pandas as pd

    markdown, elapsed = execute("decoder_layer")
    assert elapsed < 60
    bundle = sorted((ROOT / "traces").glob("decoder_layer-bfloat16-h200-*"))[-1]
    called = pd.read_parquet(bundle / "timings.parquet").set_index(["variant", "shape"])["as_called_median_ns"] / 1e3
    batch1 = markdown[-1]
    for variant in ("eager", "fused_cuda", "eager_graph", "compiled", "compiled_graphs"):
        assert f"**{variant}** {called[variant, '1x1x2048']:,.1f} µs" in batch1
    graphs = markdown[2]
    assert f"eager {called['eager', '1x1x2048']:,.0f} µs as called (43 launches" in graphs
    assert f"replayed as a graph {called['eager_graph', '1x1x2048']:,.0f} µs (1 launch)" in graphs
    assert "kernels per call 43 -> 26" in markdown[1]


@pytest.mark.shared
def test_serving_trace_report() -> None:
    """The vLLM pair of the shared traces, displayed as the report's sections by `fuseprof.analyze`."""
    from tests.conftest import shared_traces

    shared_traces()
    book = nbformat.read(NOTEBOOKS / "serving_trace_report.ipynb", as_version=4)
    markdown, elapsed = execute("serving_trace_report")
    assert elapsed < 60
    assert markdown[-1].startswith("**100.0% of the replayed kernel time attributed**")
    assert "GPU-bound" in markdown[-1] and "flash attention" in markdown[-1]
    html = "".join(o["data"]["text/html"] for c in book.cells for o in c.get("outputs", [])
                   if "text/html" in o.get("data", {}))
    assert "Fusion audit" in html and "Worth doing" in html  # the committed outputs show the report
    figures = sum(PLOTLY in o.get("data", {}) for c in book.cells for o in c.get("outputs", []))
    assert figures >= 3  # the report's figures, each displayed as a figure (with its PNG), not drawn by a script


def test_horizontal_and_epilogue_fusion() -> None:
    """Seed 002's B and E on the H200 bundles: the gains and the DRAM traffic the notebook explains them by."""
    markdown, elapsed = execute("horizontal_and_epilogue_fusion")
    assert elapsed < 60
    text = markdown[-1]
    assert "three GEMMs 29.1 µs (6 kernels), one GEMM 19.8 µs (1 kernel): **1.47×**" in text
    assert "three GEMMs 142.4 µs (3 kernels), one GEMM 137.9 µs (1 kernel): **1.03×**" in text
    assert "separate kernels 474.6 µs (3 kernels, 641 MB), epilogue 373.3 µs (1 kernel, 411 MB): **1.27×**" in text
    assert "230 MB less DRAM traffic with the epilogue (3.4 passes over it)" in text


@pytest.mark.shared
def test_serving_trace_sql_and_perfetto() -> None:
    """The vLLM decode pair in SQL and exported for Perfetto: the numbers the notebook states, from the analysis."""
    from fuseprof.analysis import analyze
    from tests.conftest import shared_traces

    shared = shared_traces()
    markdown, elapsed = execute("serving_trace_sql_and_perfetto")
    assert elapsed < 60
    result = analyze([shared / "vllm_decode_full_graph_execution.json.gz",
                      shared / "vllm_decode_full_graph_capture.json.gz"])[0]
    per_module = result.events.groupby("module")["dur_ns"].agg(["sum", "size"]).sort_values("sum", ascending=False)
    module, top = per_module.index[0], per_module.iloc[0]
    assert f"`{module}`: {top['sum'] / 1e3:,.1f} µs in {top['size']} kernels" in markdown[-1]
    chains = int(result.fusion["count"].sum())
    assert markdown[-1].startswith("**") and "equal the analysis's categories table" in markdown[-1]
    assert f"beside the {sum(1 for _ in _events(shared / 'vllm_decode_full_graph_execution.json.gz')):,} original" \
        in markdown[-1] and chains > 0


def _events(path):  # type: ignore[no-untyped-def]
    import gzip
    import json

    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
