"""Mixed precisions in the shape-rule dataflow (``fuseprof.model.dataflow.promoted_dtype``): an op's output dtype
is what torch's type promotion gives, so that an eager attention whose bf16 scores meet an fp32 causal mask is found
on a plain torch.profiler capture (no execution trace: the op graph is the shape rule's). The captures are those of
tests/fixtures/truth_unprofiled, whose truth names the fusion it measured (``fusion_is``); the expected counts come
from the raw trace files.
"""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from fuseprof.analysis import analyze
from fuseprof.model.dataflow import Value, promoted_dtype
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import FIXTURES

ROLE = DEFAULT.role  # the registry's row for an op: whether it promotes is data there

TRUTH = FIXTURES / "truth_unprofiled"
BF16, HALF, FP32 = "c10::BFloat16", "c10::Half", "float"


def test_promotion_follows_torch_for_arithmetic_only() -> None:
    """Out-of-place arithmetic takes the widest floating dtype (bf16 and half together: float, as torch gives); an
    in-place op, a copy and anything that is not arithmetic keep the first argument's."""
    scores, mask = Value((4, 8, 1024, 1024), BF16), Value((1024, 1024), FP32)
    assert promoted_dtype(ROLE("aten::add"), [scores, mask]) == FP32
    assert promoted_dtype(ROLE("aten::add"), [mask, scores]) == FP32
    assert promoted_dtype(ROLE("aten::mul"), [Value((8,), BF16), Value((8,), HALF)]) == FP32
    assert promoted_dtype(ROLE("aten::where"), [Value((8,), "long"), Value((8,), HALF), Value((8,), HALF)]) == HALF
    assert promoted_dtype(ROLE("aten::add_"), [scores, mask]) == BF16  # in place: the destination's dtype
    assert promoted_dtype(ROLE("aten::copy_"), [scores, mask]) == BF16
    assert promoted_dtype(ROLE("aten::_softmax"), [mask]) == FP32
    assert promoted_dtype(ROLE("aten::add"), [scores, scores]) == BF16


def _in_steps(path: Path, name: str) -> list[dict[str, Any]]:
    """The raw file's CPU ops called ``name`` that start inside a ProfilerStep range."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    return [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == name
            and any(lo <= e["ts"] < hi for lo, hi in steps)]


@pytest.mark.parametrize("folder", ["h100", "h100b"])
def test_an_eager_attention_with_an_fp32_mask_is_found(folder: str) -> None:
    """prefill_eager (4 Llama layers, attention written eagerly, bf16 with an fp32 causal mask): every softmax of
    the profiled steps is one eager attention, advised first as the fusion its truth measured (SDPA). Before the
    promotion the mask add read as bf16, no attention was found, and a RoPE chain was advised."""
    trace = TRUTH / folder / "prefill_eager.json.gz"
    truth = json.loads((TRUTH / folder / "prefill_eager.truth.json").read_text())
    assert "scaled_dot_product_attention" in truth["fusion_is"]
    softmaxes = _in_steps(trace, "aten::_softmax")
    mixed = [e for e in _in_steps(trace, "aten::add") if e["args"].get("Input type", [])[:2] == [BF16, FP32]
             and len(e["args"]["Input Dims"][0]) == 4]
    assert len(softmaxes) == len(mixed) == 12  # 4 layers x 3 profiled steps, each softmax after a mixed add
    assert all(e["args"]["Input type"][0] == FP32 for e in softmaxes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = analyze(trace)[0]
    fusion = result.frames["fusion"]
    rows = fusion[fusion["class"] == "eager attention → SDPA"]
    assert int(rows["count"].sum()) == len(softmaxes)
    assert str(result.frames["worth_doing"]["what"].iloc[0]).startswith("fuse: eager attention → SDPA")
