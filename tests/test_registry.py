"""The op registry as a value: a user extends it (in Python or a TOML file) with a new op family, op role,
known fusion and catalogue entry, and sees them in analyze, fusion and audit — with the trace store on, where
an answer made with the default registry is never returned for an extended one. The expected numbers are
counted from the raw BERT trace with plain json."""

from __future__ import annotations

import gzip
import json
import math
import pickle
import random
import re
import time
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from fuseprof.cli import main
from fuseprof.errors import InvalidArgumentError
from fuseprof.model.op_models import PerElement
from fuseprof.model.registry import CatalogueEntry, KnownFusion, OpFamily, OpRole
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.registry_schema import load_registry
from tests.conftest import FIXTURES

BERT = FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"
ADD_NORM = "aten::add → aten::native_layer_norm"


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("FUSEPROF_CACHE", str(root))
    return root


def _layer_norms() -> list[dict]:
    events = json.loads(gzip.decompress(BERT.read_bytes()))["traceEvents"]
    return [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::native_layer_norm"]


MINE = DEFAULT.extend(
    families=[OpFamily("normalization", op=r"^aten::native_layer_norm$", cost=PerElement(11), family="my LayerNorm")],
    known_fusions=[KnownFusion(ADD_NORM, "my fused add + LayerNorm")],
    catalogue=[CatalogueEntry("add + LayerNorm", "chain", fused=r"my_add_layer_norm",
                              kinds=("add", "native_layer_norm"))])

TOML = '''
[[family]]
category = "normalization"
op = "^aten::native_layer_norm$"
cost = {model = "per_element", flops_per_element = 11}
family = "my LayerNorm"

[[known_fusion]]
pattern = "aten::add → aten::native_layer_norm"
kernel = "my fused add + LayerNorm"

[[catalogue]]
name = "add + LayerNorm"
pattern = "chain"
fused = "my_add_layer_norm"
kinds = ["add", "native_layer_norm"]
'''


def _check_extended(result) -> None:  # type: ignore[no-untyped-def]
    """The new family's cost model in the per-op roofline, the known fusion in the fusion table, the new
    entry in the audit."""
    norm = result.op_roofline[result.op_roofline["op"] == "aten::native_layer_norm"].iloc[0]
    dims = _layer_norms()[0]["args"]["Input Dims"][0]
    assert norm["flops"] == 11 * math.prod(dims)  # PerElement(11): 11 FLOPs per element of its input
    row = result.fusion.set_index("signature").loc[ADD_NORM]
    assert row["known_fusion"] == "my fused add + LayerNorm"
    audit = result.audit.set_index("fusion")
    assert audit.loc["add + LayerNorm", "verdict"] == "not fused" and ADD_NORM in audit.loc["add + LayerNorm", "evidence"]


def _check_default(result) -> None:  # type: ignore[no-untyped-def]
    norm = result.op_roofline[result.op_roofline["op"] == "aten::native_layer_norm"].iloc[0]
    assert norm["flops"] == 5 * math.prod(_layer_norms()[0]["args"]["Input Dims"][0])
    assert result.fusion.set_index("signature").loc[ADD_NORM, "known_fusion"] == "torch.compile"
    assert "add + LayerNorm" not in set(result.audit["fusion"])


def test_an_extended_registry_changes_every_judgement_with_the_store_on(store: Path) -> None:
    (before,) = analyze(BERT)  # stored with the default registry
    _check_default(before)
    (mine,) = analyze(BERT, registry=MINE)  # the same trace, warm: must not get the default's answer
    _check_extended(mine)
    (again,) = analyze(BERT)
    _check_default(again)
    assert MINE.fingerprint() != DEFAULT.fingerprint()
    assert len(list(store.rglob("analysis-*"))) == 2  # one stored analysis per registry


def test_a_registry_file_does_the_same_through_the_cli(store: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(TOML)
    assert load_registry(path, DEFAULT).fingerprint() == MINE.fingerprint()  # the file and the code are one registry
    (result,) = analyze(BERT, registry=path)
    _check_extended(result)
    assert main(["audit", str(BERT), "--registry", str(path), "--format", "json"]) == 0
    rows = {r["fusion"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["add + LayerNorm"]["verdict"] == "not fused"
    assert main(["fusion", str(BERT), "--registry", str(path), "--format", "json"]) == 0
    fused_by = {r["signature"]: r["known_fusion"] for r in json.loads(capsys.readouterr().out)}
    assert fused_by[ADD_NORM] == "my fused add + LayerNorm"


@pytest.mark.parametrize(("text", "said"), [
    ("[[family]]\ncategory = 'gemm'\nop = 'x'\n", "category: expected one of 'GEMM', 'convolution'"),
    ("[[family]]\ncategory = 'GEMM'\nop = '('\n", "op: not a valid regular expression"),
    ("[[family]]\ncategory = 'GEMM'\nop = 'x'\ncost = {model = 'nope'}\n", "model one of"),
    ("[[familly]]\ncategory = 'GEMM'\nop = 'x'\n", "unknown table 'familly'; did you mean [[family]]?"),
    ("[[role]]\nname = 'aten::x'\nepilogu = true\n", "epilogu'; did you mean 'epilogue'?"),
    ("not toml = = 1", "not valid TOML"),
])
def test_a_wrong_registry_file_is_one_line(text: str, said: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match=re.escape(said)):
        load_registry(path, DEFAULT)
    assert main(["analyze", str(BERT), "--registry", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and len(err.strip().splitlines()) == 1


def test_a_registry_is_a_value() -> None:
    """Equal content, equal fingerprint; it travels to worker processes whole; extending returns a new one."""
    assert DEFAULT.extend().fingerprint() == DEFAULT.fingerprint()
    copied = pickle.loads(pickle.dumps(MINE))
    assert copied.fingerprint() == MINE.fingerprint() and copied.role("aten::copy_").first_argument == "overwritten"
    assert copied.families == MINE.families and copied.roles == MINE.roles and copied == MINE
    # a process receiving it again (a worker given rank after rank) keeps the one it has, its memos warm
    assert pickle.loads(pickle.dumps(MINE)) is copied and pickle.loads(pickle.dumps(DEFAULT)) is not copied
    assert DEFAULT.match("kernel", "aten::native_layer_norm", "").family == "aten norm"
    assert MINE.match("kernel", "aten::native_layer_norm", "").family == "my LayerNorm"
    role = DEFAULT.extend(roles=[OpRole("aten::copy_")]).role("aten::copy_")
    assert role.first_argument == "read" and DEFAULT.role("aten::copy_").first_argument == "overwritten"


def test_a_known_fusion_is_searched_only_where_it_can_match_and_then_as_its_regex_says() -> None:
    """The literal-op filter before each known fusion's regex never hides a match: over 5,000 random chains of
    the patterns' ops, their in-place and overload spellings and others, the kernel named is the one a plain
    ``re.search`` over every pattern names; a 100,000-op chain no pattern fits is answered in well under a
    second (the search alone was quadratic)."""
    def plain(signature: str) -> str:
        return next((row.kernel for row in DEFAULT.known_fusions if re.search(row.pattern, signature)),
                    DEFAULT.default_fusion)

    names = sorted({n for row in DEFAULT.known_fusions for n in re.findall(r"\w+::\w+", row.pattern)})
    spellings = [*names, *(n + "_" for n in names), *(n + ".Tensor" for n in names), "aten::sub", "aten::exp"]
    chooser = random.Random(7)
    chains = [" → ".join(chooser.choices(spellings, k=chooser.randint(1, 9))) for _ in range(5000)]
    assert sum(plain(c) != DEFAULT.default_fusion for c in chains) > 50  # the sample holds matches
    assert [DEFAULT.known_fusion(c) for c in chains] == [plain(c) for c in chains]
    started = time.process_time()
    assert DEFAULT.known_fusion(" → ".join(["aten::add"] * 100_000)) == DEFAULT.default_fusion
    assert time.process_time() - started < 0.5
