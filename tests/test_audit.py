"""The catalogue audit on traces whose answer is known: the committed H200 Llama traces, eager (nothing
fused but attention, which cuDNN's SDPA does) and torch.compile (Inductor fuses RMSNorm, SiLU·mul and
RoPE with the cache write); and the serving engines of the shared traces. The kernels named as evidence
are checked in the raw trace with plain json."""

from __future__ import annotations

import gzip
import json

import pytest

from fuseprof.analysis import analyze
from fuseprof.cli import main
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import TRACES, shared_traces

EAGER, COMPILED = TRACES / "llama4l-eager-h200", TRACES / "llama4l-compiled-h200"


def _verdicts(result) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return dict(zip(result.audit["fusion"], result.audit["verdict"]))


def _kernel_names(bundle) -> set[str]:  # type: ignore[no-untyped-def]
    (trace,) = (bundle / "raw").glob("*.json.gz")
    return {e["name"] for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"] if e.get("cat") == "kernel"}


def test_eager_llama_fuses_nothing_of_the_catalogue_but_attention() -> None:
    (result,) = analyze(EAGER)
    verdicts = _verdicts(result)
    for name in ("add + RMSNorm", "SiLU · mul", "RoPE + KV-cache write"):
        assert verdicts[name] == "not fused", name
    assert verdicts["flash attention"] == "fused"
    audit = result.audit.set_index("fusion")
    assert (audit.loc[["add + RMSNorm", "SiLU · mul", "RoPE + KV-cache write"], "predicted_saving_ns"] > 0).all()
    # the unfused SiLU and mul: one of each per layer and step (4 x 9), separate kernels in the raw trace
    names = _kernel_names(EAGER)
    assert not any("silu" in n.lower() and "mul" in n.lower() for n in names)
    assert "×36" in audit.loc["SiLU · mul", "evidence"]


def test_compiled_llama_has_them_fused_by_inductor() -> None:
    (result,) = analyze(COMPILED)
    verdicts = _verdicts(result)
    for name in ("add + RMSNorm", "SiLU · mul", "RoPE + KV-cache write", "flash attention"):
        assert verdicts[name] == "fused", name
    audit = result.audit.set_index("fusion")
    names = _kernel_names(COMPILED)
    for name, words in (("add + RMSNorm", ("add", "rsqrt")), ("SiLU · mul", ("mul", "silu")),
                        ("RoPE + KV-cache write", ("cat", "cos", "index_copy"))):
        kernel = audit.loc[name, "evidence"].split(" (")[0]
        assert kernel in names and kernel.startswith("triton_") and all(w in kernel for w in words), name


@pytest.mark.parametrize(("trace", "fused"), [
    ("sglang_qwen3_8b_prefilldecode.json.gz", ("add + RMSNorm", "SiLU · mul", "flash attention")),
    ("vllm_prefilldecode_piecewise_graph_execution.json.gz",
     ("add + RMSNorm", "SiLU · mul", "gate / up projection", "flash attention", "dequant + GEMM")),
])
@pytest.mark.shared
def test_serving_engines_fuse_what_docs_say(trace: str, fused: tuple[str, ...]) -> None:
    paths = [shared_traces() / trace]
    if trace.startswith("vllm"):
        paths.append(shared_traces() / "vllm_prefilldecode_piecewise_graph_capture.json.gz")
    (result,) = analyze(paths)
    verdicts = _verdicts(result)
    for name in fused:
        assert verdicts[name] == "fused", (name, verdicts[name])


def test_audit_command(capsys) -> None:
    assert main(["audit", str(EAGER), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["fusion"] for r in rows] == [e.name for e in DEFAULT.catalogue]
    assert {r["verdict"] for r in rows} >= {"fused", "not fused", "not present"}
    assert main(["audit", str(EAGER)]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 120


def test_fusion_table_and_audit_run_each_shared_finder_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The fusion table's classes and the audit ask the attention and epilogue finders of one window's units once
    (``patterns.found_once``), and the table's epilogue rows are those the finder gives an entry without a ``fused``
    regex (what the table asked it before): the regex adds fused instances only."""
    from collections import Counter

    from fuseprof.analysis.judgements import fusion_classes, patterns
    from fuseprof.model.registry import CatalogueEntry

    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    calls: Counter[str] = Counter()
    entries: list[CatalogueEntry] = []
    for name in ("attention", "epilogue"):
        def counted(units, entry, costs, _real=getattr(patterns, name), _name=name):  # type: ignore[no-untyped-def]
            calls[_name] += 1
            entries.append(entry)
            found = _real(units, entry, costs)
            if _name == "epilogue":  # the unfused instances, whatever the entry's regex
                plain = _real(units, CatalogueEntry("epilogue", "epilogue"), costs)
                assert [f for f in found if not f.fused] == [f for f in plain if not f.fused]
            return found
        monkeypatch.setitem(patterns.PATTERNS, name, counted)
        monkeypatch.setattr(fusion_classes, name, counted)
    (result,) = analyze(EAGER)
    assert calls == {"attention": 1, "epilogue": 1}
    assert {e.name for e in entries} == {"flash attention", "GEMM + bias + activation epilogue"}
    assert (result.fusion["class"] == "GEMM epilogue").any() or not result.audit.set_index("fusion").loc[
        "GEMM + bias + activation epilogue", "unfused_instances"]


def test_held_by_splits_a_row_by_the_members_each_entry_holds() -> None:
    """Two entries on one row share its saving by how many of its members each holds (3 and 1 of 4), an entry alone
    on a row quotes all of it (its GPU saving where the row has no step saving), and one holding nothing has none."""
    import math

    import pandas as pd

    from fuseprof.analysis.paths.savings import held_by

    fusion = pd.DataFrame({"members": [[1, 2, 3, 4], [5, 6]], "saving_ns": [100.0, 50.0],
                           "step_saving_ns": pd.array([80, None], dtype="Float64")})
    got = held_by(fusion, [{1, 2, 3}, {4, 5}, set(), {99}])
    assert got[:2] == [(80 * 3 / 4, 100 * 3 / 4), (80 * 1 / 4 + 50, 100 * 1 / 4 + 50)]
    assert all(math.isnan(x) for pair in got[2:] for x in pair)
