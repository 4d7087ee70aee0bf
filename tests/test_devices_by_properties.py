"""GPUs by their properties (issue 60, point 4): every device a trace's ``deviceProperties`` names resolves to its
own row of the datasheet table, or to an explicit "unknown GPU" — never silently another GPU's roof.

The expected rows below are written from the devices' names and properties (compute capability or gfx arch, SM or
CU count, memory) and the vendors' data sheets, not from the code: an A100-PG509-200 with 42 GB is the 40 GB part
(its roof 1,555 GB/s, not the 80 GB part's 2,039 — 31% too high), 104 CUs of gfx 9.0 is one GCD of an MI250 (the
HTA file's name says MI250; an MI210 has the same CUs, memory and rates), an H800 is not an H100 (FP64 cut to 1
TFLOPS)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.figures import occupancy_curves_figure
from fuseprof.model.devices import DEVICES, identify, limits_for
from fuseprof.model.occupancy import HOPPER, occupancy, occupancy_table
from fuseprof.model.roofline import capture_roof, judge
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, FUZZ_RESULTS, shared_traces

# (name, compute major, minor, SMs/CUs, memory GB rounded) -> the table row it is, from the data sheets
EXPECTED: dict[tuple[str, int, int, int, int], str] = {
    ("", 9, 4, 304, 206): "MI300X",  # vLLM's traces: names left empty, SOURCE.md says MI300X
    ("AMD Instinct MI300X VF", 9, 4, 304, 206): "MI300X",
    ("AMD Instinct MI300X", 9, 4, 304, 206): "MI300X",
    ("AMD Radeon Graphics", 9, 0, 104, 69): "MI250",  # one MI250 GCD (104 of 208 CUs, 64 GiB)
    ("NVIDIA A100-PG509-200", 8, 0, 108, 42): "A100 40GB",
    ("NVIDIA A100-PG509-200", 8, 0, 108, 43): "A100 40GB",
    ("NVIDIA A100-SXM4-80GB", 8, 0, 108, 85): "A100 80GB",
    ("NVIDIA B200", 10, 0, 148, 192): "B200",
    ("NVIDIA H100 80GB HBM3", 9, 0, 132, 85): "H100 SXM",
    ("NVIDIA H200", 9, 0, 132, 150): "H200",
    ("NVIDIA H800", 9, 0, 132, 85): "H800",
    ("Tesla V100-SXM2-32GB", 7, 0, 80, 34): "V100",
}


def _devices(paths: list[Path]) -> dict[tuple[str, int, int, int, int], tuple[Path, dict[str, Any]]]:
    """Every distinct deviceProperties entry of the traces, read from the raw JSON (not through fuseprof)."""
    found: dict[tuple[str, int, int, int, int], tuple[Path, dict[str, Any]]] = {}
    for path in paths:
        raw = json.loads(gzip.decompress(path.read_bytes()))
        for d in (raw.get("deviceProperties") or []) if isinstance(raw, dict) else []:
            key = (d.get("name", ""), int(d["computeMajor"]), int(d["computeMinor"]), int(d["numSms"]),
                   round(int(d["totalGlobalMem"]) / 1e9))
            found.setdefault(key, (path, d))
    return found


def _properties(d: dict[str, Any]) -> dict[str, int]:
    return {"sms": int(d["numSms"]), "memory_bytes": int(d["totalGlobalMem"]), "major": int(d["computeMajor"]),
            "minor": int(d["computeMinor"]), "warp": int(d["warpSize"])}


def _check_all(found: dict[tuple[str, int, int, int, int], tuple[Path, dict[str, Any]]]) -> None:
    unlisted = sorted(set(found) - set(EXPECTED))
    assert unlisted == [], f"devices with no expected row in this test (add each, from its data sheet): {unlisted}"
    wrong = {k: (identify(k[0], _properties(d)).key, EXPECTED[k]) for k, (_, d) in found.items()
             if identify(k[0], _properties(d)).key != EXPECTED[k]}
    assert wrong == {}
    for key, (_, d) in found.items():  # the roof is the row's datasheet, never an assumption
        assert capture_roof(key[0] or None, None, _properties(d)).label == f"{EXPECTED[key]} (datasheet)"


def test_every_committed_trace_device_resolves_to_its_own_row() -> None:
    found = _devices(sorted(FIXTURES.glob("**/*.json.gz")))
    assert {EXPECTED[k] for k in found} >= {"H200", "H100 SXM", "B200"}
    _check_all(found)


@pytest.mark.shared
def test_every_shared_trace_device_resolves_to_its_own_row() -> None:
    found = _devices(sorted(shared_traces().glob("**/*.json.gz")))
    assert {EXPECTED[k] for k in found if k in EXPECTED} >= {"MI300X", "MI250", "A100 40GB", "H800", "V100"}
    _check_all(found)


def test_the_parser_keeps_the_properties_identification_and_occupancy_read() -> None:
    path = FIXTURES / "thirdparty" / "b200_eager.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["deviceProperties"][0]
    tables = read_trace_tables(path)
    parsed = tables.device_properties[int(raw["id"])]
    assert parsed == {**_properties(raw), "registers": raw["regsPerMultiprocessor"],
                      "shared_bytes": raw["sharedMemPerMultiprocessor"],
                      "max_threads": raw["maxThreadsPerMultiprocessor"]}
    limits = limits_for("B200", parsed)
    assert limits is not None and limits.shared_bytes == 233472 and limits.max_warps == 2048 // 32


def _props(sms: int, gb: float, major: int, minor: int, warp: int = 32) -> dict[str, int]:
    return {"sms": sms, "memory_bytes": int(gb * 2**30), "major": major, "minor": minor, "warp": warp}


# the cases, each from a properties dict and a name as the driver writes it
@pytest.mark.parametrize(("name", "properties", "key", "dram_tb_per_s"), [
    ("NVIDIA B300 SXM6 AC", _props(148, 268, 10, 3), "B300", 8.0),
    ("", _props(148, 268, 10, 3), "B300", 8.0),
    ("NVIDIA A100-PG509-200", _props(108, 39.4, 8, 0), "A100 40GB", 1.555),
    ("AMD Instinct MI250X/MI250", _props(110, 64, 9, 0, 64), "MI250X", 1.6),  # one GCD of the module's 220 CUs
    ("AMD Radeon Graphics", _props(110, 64, 9, 0, 64), "MI250X", 1.6),
    ("", _props(110, 64, 9, 0, 64), "MI250X", 1.6),
    ("NVIDIA GeForce RTX 2080 Ti", _props(68, 10.75, 7, 5), "RTX 2080 Ti", 0.616),
    ("", _props(68, 10.75, 7, 5), "RTX 2080 Ti", 0.616),
    ("Quadro GP100", _props(56, 15.9, 6, 0), "Quadro GP100", 0.717),
    ("NVIDIA H800", _props(132, 79.1, 9, 0), "H800", 3.35),
    ("NVIDIA GeForce RTX 4090", _props(128, 23.6, 8, 9), "RTX 4090", 1.008),
    ("NVIDIA GeForce RTX 3090", _props(82, 23.7, 8, 6), "RTX 3090", 0.936),
    ("NVIDIA RTX A6000", _props(84, 47.5, 8, 6), "RTX A6000", 0.768),
    ("NVIDIA RTX 6000 Ada Generation", _props(142, 47.5, 8, 9), "RTX 6000 Ada", 0.96),
    ("NVIDIA L40S", _props(142, 44.5, 8, 9), "L40S", 0.864),
])
def test_a_device_gets_its_own_roof(name: str, properties: dict[str, int], key: str, dram_tb_per_s: float) -> None:
    assert identify(name, properties).key == key
    roof = capture_roof(name or None, None, properties)
    assert roof.judged and roof.label == f"{key} (datasheet)"
    assert roof.dram_bytes_per_s == pytest.approx(dram_tb_per_s * 1e12)


def test_the_h800_is_not_judged_as_an_h100() -> None:
    roof = capture_roof("NVIDIA H800", None, _props(132, 79.1, 9, 0))
    assert roof.peak("fp64") == pytest.approx(1e12) and DEVICES["H100 SXM"].dense["fp64"] == pytest.approx(34e12)


def test_rocm_gfx9_is_not_hopper() -> None:
    """ROCm writes gfx arch 9.x into computeMajor/Minor: a 64-wide device of arch 9.0 with the H100's 132 units
    is no H100 (an unknown AMD part), and a name alone cannot make it one."""
    assert identify("", _props(132, 80, 9, 0, 64)).key is None
    assert identify("AMD Instinct MI308X", _props(80, 192, 9, 4, 64)).key is None


def test_an_unknown_gpu_is_named_and_judges_nothing() -> None:
    roof = capture_roof("NVIDIA GeForce GTX 1050", None, _props(5, 2, 6, 1))
    assert not roof.judged and "unknown GPU 'NVIDIA GeForce GTX 1050'" in roof.label and "--device" in roof.label
    rows = pd.DataFrame({"roof_pipe": ["fp32"], "flops": [1e9], "arithmetic_intensity": [1.0],
                         "achieved_flops_per_s": [1e12], "achieved_bytes_per_s": [1e12]})
    judged = judge(rows, roof)
    assert judged["pct_of_roof"].isna().all() and judged["bound"].isna().all()
    assert judged["roof"].iloc[0] == roof.label


@pytest.mark.shared
def test_a_shared_trace_on_a_gpu_its_name_hides_is_judged_against_its_own_roof() -> None:
    """HTA's MI250 trace names its GPU 'AMD Radeon Graphics': judged against an H100 before, now one MI250 GCD."""
    (result,) = analyze(shared_traces() / "fresh4" / "hta_mi250_minitoy_train.json.gz")
    assert result.roof.label == "MI250 (datasheet)" and result.roof.dram_bytes_per_s == pytest.approx(1.6e12)
    assert any("recognised from deviceProperties (104 SMs/CUs" in n for n in result.notes)


def test_occupancy_uses_the_devices_own_limits() -> None:
    """256 threads at 64 registers: 64 x 32 = 2,048 registers a warp, 65,536 / 2,048 = 32 warps resident. Hopper
    holds 64 warps an SM, so 50%; Turing (7.5) holds 32, so 100% (programming guide's compute-capability table)."""
    assert occupancy(256, 64, 0, HOPPER).theoretical_pct == 50.0
    turing = limits_for("RTX 2080 Ti")
    assert turing is not None and occupancy(256, 64, 0, turing).theoretical_pct == 100.0
    kernels = pd.DataFrame({"source": ["ncu"] * 3, "threads_per_block": [256] * 3, "registers_per_thread": [64] * 3,
                            "shared_mem_bytes": [0] * 3,
                            "device": ["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 2080 Ti", "AMD Instinct MI300X"]})
    table = occupancy_table(kernels)
    assert table["computed_occupancy_pct"].iloc[:2].tolist() == [50.0, 100.0]
    assert math.isnan(table["computed_occupancy_pct"].iloc[2]) and table["computed_limiter"].iloc[2] == "unknown"
    marked = occupancy_curves_figure(256, 64, 0, turing).data[2]  # the calculator's chart, on the kernel's GPU
    assert marked.y == (100.0,) and occupancy_curves_figure(256, 64, 0).data[2].y == (50.0,)


def test_a_trace_s_recorded_limits_override_the_table() -> None:
    limits = limits_for(None, {"major": 8, "minor": 9, "warp": 32, "registers": 65536, "shared_bytes": 102400,
                               "max_threads": 1536})
    assert limits is not None and limits.max_warps == 48 and limits.shared_bytes == 102400
    assert limits_for("MI300X") is None  # AMD CUs: no per-SM model, occupancy reads "unknown"


# hostile or odd deviceProperties: each resolves to the right row or to an explicit unknown, never a wrong roof
@pytest.mark.parametrize(("name", "properties", "key"), [
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", _props(14, 4.75, 8, 0), None),  # a MIG slice: not the whole A100's roof
    ("AMD Instinct MI300X", _props(38, 24, 9, 4, 64), None),  # CPX partition: 38 of 304 CUs
    ("NVIDIA H100 (warp 64?)", _props(132, 80, 9, 0, 64), None),  # the name says NVIDIA; the warp says otherwise
    ("", _props(-1, 80, 9, 0), None),
    ("", _props(132, 0, 9, 0), "H100 SXM"),  # no memory: the first of the alike rows, named as alike
    ("", {"sms": 132}, None),  # no arch
    ("", {}, None),
    ("(((H100", {}, "H100 SXM"),  # regex-looking text is text
    ("X" * 100_000, _props(132, 80, 9, 0), "H100 SXM"),
    ("NVIDIA B300 SXM6 AC", {}, "B300"),  # a name and nothing else: the name decides
])
def test_odd_properties_resolve_to_a_row_or_an_explicit_unknown(name: str, properties: dict[str, int],
                                                                 key: str | None) -> None:
    found = identify(name, properties)
    outcome = "warning" if found.key is None and "unknown GPU" in found.why else \
        "identical" if found.key == key else "silently wrong"
    FUZZ_RESULTS[outcome] += 1
    assert found.key == key and outcome != "silently wrong"


def test_a_trace_on_an_unknown_gpu_is_judged_against_no_roof(tmp_path: Path) -> None:
    """The decode trace recaptured, as it were, on a GTX 1050 (CC 6.1, 5 SMs: no row): every per-op roofline row
    has no judgement, the notes name the GPU and --device, and the tables that predict (fusion) still come."""
    path = FIXTURES / "truth" / "decode_eager.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    for device in raw["deviceProperties"]:
        device.update(name="NVIDIA GeForce GTX 1050", computeMajor=6, computeMinor=1, numSms=5,
                      totalGlobalMem=2 * 2**30)
    target = tmp_path / "gtx1050.json.gz"
    target.write_bytes(gzip.compress(json.dumps(raw).encode()))
    (known,), (unknown,) = analyze(path), analyze(target)
    assert shown_tables(known)["op_roofline"]["pct_of_roof"].notna().any()
    roofline = shown_tables(unknown)["op_roofline"]
    assert len(roofline) == len(shown_tables(known)["op_roofline"]) and roofline["pct_of_roof"].isna().all()
    assert not unknown.roof.judged and any("unknown GPU 'NVIDIA GeForce GTX 1050'" in n and "--device" in n
                                           for n in unknown.notes)
    assert not shown_tables(unknown)["fusion"].empty  # priced at the H100 reference's rates, as the roof's label says
    assert "H100 SXM reference" in unknown.roof.label
