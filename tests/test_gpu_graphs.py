"""GPU tests: variants that replay CUDA graphs of their own. Run on the H200 through the device tool."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import fuseprof
from fuseprof.capture.profile import ProfileOptions, run_profile
from fuseprof.case import graph_replayed

pytestmark = pytest.mark.gpu
FIXTURE = Path(__file__).parent / "fixtures" / "graph_case.py"


def test_a_kept_graph_survives_cublas_workspace_clears() -> None:
    """torch.compile's CUDA graphs clear cuBLAS's workspaces around each recording; a graph kept
    from before must not have captured one of them (the decoder-layer crash)."""
    fn = graph_replayed(lambda x, w: x @ w)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = [torch.randn(shape, generator=gen, device="cuda", dtype=torch.bfloat16) for shape in ((512, 4096), (4096, 512))]
    b = [torch.randn(shape, generator=gen, device="cuda", dtype=torch.bfloat16) for shape in ((64, 2048), (2048, 64))]
    expected = (a[0].double() @ a[1].double()).float()
    fn(*a)
    fn(*b)  # a second graph, captured with its own workspace
    torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()
    junk = torch.full((1 << 28,), 7.0, device="cuda")  # reuse what the clear released
    out = fn(*a).float()
    torch.cuda.synchronize()
    del junk
    assert float((out - expected).norm() / expected.norm()) < 1e-2


def test_own_graph_variant_is_timed_as_called_and_traced_without_recapture(tmp_path: Path) -> None:
    path = run_profile(ProfileOptions(case=f"{FIXTURE}:CASE", ncu=False, out_dir=tmp_path, repeats=10,
                                      repo_root=tmp_path), log=lambda _: None)
    timings = fuseprof.load_timings(path).set_index(["variant", "shape"])
    assert timings["correct"].all()
    assert timings.loc["graph", "gpu_median_ns"].isna().all()
    assert timings.loc["graph", "timing_method"].eq("cuda-events (own graph)").all()
    assert timings.loc["eager", "gpu_median_ns"].notna().all()
    kernels = fuseprof.load(path)
    kernels = kernels[kernels["kind"] == "kernel"]
    per_call = kernels.groupby(["variant", "shape"]).size() / 3  # 3 profiled calls per range
    # the graph replays exactly the eager call's kernels: no warm-up or capture inside the range
    for shape in ("256x1024", "64x2048"):
        assert per_call["graph", shape] == per_call["eager", shape]
    launches = kernels[kernels["variant"] == "graph"]["launch_api"]
    assert launches.eq("cudaGraphLaunch").all()
