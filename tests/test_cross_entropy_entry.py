"""The catalogue's ``cross-entropy`` entry: a loss over class scores whatever the number of classes (issue 60: a
ResNet's and a recommender's binary cross-entropy read "not present" once the entry became "linear cross-entropy",
LM heads of 8,192 classes and more only). Expected verdicts from what each model computes; instance counts from the
raw traces' ``aten::cross_entropy_loss`` calls, read with plain json."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from tests.conftest import ROOT, shared_traces

TRUTH = ROOT / "tests" / "fixtures" / "truth"


def _ops(path: Path) -> list[str]:
    return [e["name"] for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("cat") == "cpu_op"]


def _row(path: Path) -> dict[str, object]:
    (result,) = analyze(path)
    return result.audit.set_index("fusion").loc["cross-entropy"].to_dict()


def test_an_lm_head_loss_eager_and_liger() -> None:
    """F.cross_entropy over a 32k vocabulary (log_softmax, nll_loss, their backward), and Liger's fused linear
    cross-entropy (one kernel computing the loss over each chunk of logits)."""
    assert _row(TRUTH / "lm_head_eager.json.gz")["verdict"] == "not fused"
    assert _row(TRUTH / "lm_head_liger.json.gz")["verdict"] == "fused"


@pytest.mark.shared
def test_a_resnet_cross_entropy_over_1000_classes_is_not_fused() -> None:
    """HTA's V100 DDP ResNet: nn.CrossEntropyLoss as aten::cross_entropy_loss = _log_softmax + nll_loss, each
    its own kernel, forward and backward; one instance per call."""
    path = shared_traces() / "fresh4" / "hta_ns_resolution_v100_ddp_resnet.json.gz"
    calls = _ops(path).count("aten::cross_entropy_loss")
    row = _row(path)
    assert row["verdict"] == "not fused" and calls == 5 and row["unfused_instances"] == calls
    assert "log_softmax" in str(row["evidence"])


@pytest.mark.shared
def test_a_recommenders_binary_cross_entropy_is_not_fused() -> None:
    """TorchRec's DLRM-style model: aten::binary_cross_entropy_with_logits, decomposed into elementwise kernels."""
    path = shared_traces() / "fresh4" / "hta_torchrec_a100_rank0_of16_graphs_triton.json.gz"
    assert "aten::binary_cross_entropy_with_logits" in _ops(path)
    row = _row(path)
    assert row["verdict"] == "not fused" and "binary_cross_entropy_with_logits" in str(row["evidence"])


@pytest.mark.shared
def test_a_mean_squared_error_is_no_cross_entropy() -> None:
    path = shared_traces() / "fresh4" / "hta_mi250_minitoy_train.json.gz"
    ops = _ops(path)
    assert "aten::mse_loss" in ops and not any("softmax" in o or "entropy" in o or "nll" in o for o in ops)
    assert _row(path)["verdict"] == "not present"
