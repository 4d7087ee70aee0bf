"""The fused CUDA and Triton kernels against float64, for every shape class, with poisoned outputs.

GPU tests: run on the H200 (scripts/h200.sh tests). Inputs are fresh random normals for every
example (never zeros); outputs are filled with NaN first, so an element a kernel forgets to write
fails the check.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from fuseprof_kernels._inputs import activations, norm_weight  # noqa: E402
from fuseprof_kernels.add_rms_norm.reference import reference as add_rms_norm_ref  # noqa: E402
from fuseprof_kernels.rmsnorm_swiglu.reference import reference as rmsnorm_swiglu_ref  # noqa: E402
from fuseprof_kernels.silu_and_mul.reference import reference_packed, reference_split  # noqa: E402

from fuseprof.capture.correctness import compare  # noqa: E402
from fuseprof.case import DEFAULT_TOLERANCES  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = ["float16", "bfloat16"]
# N: scalar path (not a multiple of 8), seed 000's broken 96-thread width, the usual widths,
# rows past one block's register cache (16384 fp16 = 2048 vectors > 128 threads x 4), very wide.
WIDTHS = [1, 13, 768, 771, 4096, 8192, 16384, 65536]
ROWS = [1, 3, 128]


def _ops():
    from fuseprof_kernels._cuda import cuda_ops

    return cuda_ops()


def _nan_like(t):
    return torch.full_like(t, float("nan"))


def _run_rmsnorm_swiglu(impl, x, g, w):
    out = _nan_like(x)
    if impl == "cuda":
        _ops().rmsnorm_swiglu_out(x, g, w, 1e-6, out)
    else:
        from fuseprof_kernels.rmsnorm_swiglu.fused_triton import rmsnorm_swiglu_triton

        rmsnorm_swiglu_triton(x, g, w, 1e-6, out=out)
    return out


def _run_add_rms_norm(impl, x, r, w):
    out, h = _nan_like(x), _nan_like(x)
    if impl == "cuda":
        _ops().add_rms_norm_out(x, r, w, 1e-6, out, h)
    else:
        from fuseprof_kernels.add_rms_norm.fused_triton import add_rms_norm_triton

        add_rms_norm_triton(x, r, w, 1e-6, out=out, residual_out=h)
    return out, h


def _run_silu_and_mul(impl, gate_up):
    out = torch.full((gate_up.shape[0], gate_up.shape[1] // 2), float("nan"), dtype=gate_up.dtype,
                     device=gate_up.device)
    if impl == "cuda":
        _ops().silu_and_mul_out(gate_up, out)
    else:
        from fuseprof_kernels.silu_and_mul.fused_triton import silu_and_mul_triton

        silu_and_mul_triton(gate_up, out=out)
    return out


def _run_silu_mul(impl, gate, up):
    out = _nan_like(gate)
    if impl == "cuda":
        _ops().silu_mul_out(gate, up, out)
    else:
        from fuseprof_kernels.silu_and_mul.fused_triton import silu_mul_triton

        silu_mul_triton(gate, up, out=out)
    return out


def _check_all(m: int, n: int, dtype: str, impl: str, seed: int) -> None:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tol = DEFAULT_TOLERANCES[dtype]
    x, y = activations((m, n), dtype, "cuda", gen), activations((m, n), dtype, "cuda", gen)
    w = norm_weight(n, dtype, "cuda", gen)
    results = {
        "rmsnorm_swiglu": compare(_run_rmsnorm_swiglu(impl, x, y, w), rmsnorm_swiglu_ref(x, y, w), tol),
        "add_rms_norm": compare(_run_add_rms_norm(impl, x, y, w), add_rms_norm_ref(x, y, w), tol),
        "silu_mul": compare(_run_silu_mul(impl, x, y), reference_split(x, y), tol),
    }
    packed = activations((m, 2 * n), dtype, "cuda", gen)
    results["silu_and_mul"] = compare(_run_silu_and_mul(impl, packed), reference_packed(packed), tol)
    wrong = {op: r["problem"] for op, r in results.items() if not r["correct"]}
    assert not wrong, f"{impl} {dtype} {m}x{n}: {wrong}"


@pytest.mark.parametrize("impl", ["cuda", "triton"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("m", ROWS)
def test_every_shape_class(m: int, n: int, dtype: str, impl: str) -> None:
    _check_all(m, n, dtype, impl, seed=m * 100003 + n)


@pytest.mark.parametrize("impl", ["cuda", "triton"])
def test_more_rows_than_a_grid_y_dimension_allows(impl: str) -> None:
    _check_all(70_001, 24, "bfloat16", impl, seed=7)


@pytest.mark.parametrize("impl", ["cuda", "triton"])
@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 20_000), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31))
def test_random_shapes(impl: str, m: int, n: int, dtype: str, seed: int) -> None:
    _check_all(m, n, dtype, impl, seed)


def test_strided_rows_take_the_right_path() -> None:
    gen = torch.Generator(device="cuda").manual_seed(3)
    base = activations((64, 4096 + 8), "float16", "cuda", gen)
    x = base[:, :4096]  # row stride 4104: rows are 16-byte aligned, not contiguous
    g = activations((64, 4096), "float16", "cuda", gen)
    w = norm_weight(4096, "float16", "cuda", gen)
    result = compare(_ops().rmsnorm_swiglu(x, g, w, 1e-6), rmsnorm_swiglu_ref(x, g, w), 2e-3)
    assert result["correct"], result["problem"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda x, g, w: (x.cpu(), g, w), "must be a CUDA tensor"),
        (lambda x, g, w: (x, g.bfloat16(), w), "gate dtype BFloat16 differs from x dtype Half"),
        (lambda x, g, w: (x.float(), g.float(), w.float()), "must be float16 or bfloat16"),
        (lambda x, g, w: (x, g[:, :-1], w), r"x \(64, 64\), gate \(64, 63\) and out \(64, 64\) must have the same"),
        (lambda x, g, w: (x.t(), g.t(), w), "last dimension must be contiguous"),
        (lambda x, g, w: (x, g, w[:-1]), r"weight must have shape \(64\), got \(63\)"),
        (lambda x, g, w: (x.unsqueeze(0), g.unsqueeze(0), w), "x must be 2-D \\(M, N\\), got 3-D"),
    ],
)
def test_input_contract_errors_are_clear(make, message: str) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x, g = activations((64, 64), "float16", "cuda", gen), activations((64, 64), "float16", "cuda", gen)
    w = norm_weight(64, "float16", "cuda", gen)
    with pytest.raises(RuntimeError, match=message):
        _ops().rmsnorm_swiglu(*make(x, g, w), 1e-6)


def test_kernels_launch_on_the_current_stream(tmp_path) -> None:
    from fuseprof.capture.torch_profile import Call, record_trace
    from fuseprof.parse.chrome_trace import read_chrome_trace

    gen = torch.Generator(device="cuda").manual_seed(1)
    x, g = activations((256, 4096), "float16", "cuda", gen), activations((256, 4096), "float16", "cuda", gen)
    w = norm_weight(4096, "float16", "cuda", gen)
    side = torch.cuda.Stream()
    _ops().rmsnorm_swiglu(x, g, w, 1e-6)

    def default_then_side_stream(x, g, w):
        x.add(1)  # a kernel on the default stream, for comparison
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            return _ops().rmsnorm_swiglu(x, g, w, 1e-6)

    record_trace([Call("fuseprof:side:256x4096", default_then_side_stream, (x, g, w))], 1,
                 tmp_path / "t.json.gz", True)
    kernels = read_chrome_trace(tmp_path / "t.json.gz")
    fused = kernels[kernels["kernel"].str.contains("rmsnorm_swiglu_kernel")]
    added = kernels[~kernels["kernel"].str.contains("rmsnorm_swiglu_kernel")]
    assert len(fused) == 1 and len(added) == 1
    assert fused["stream"].iloc[0] != added["stream"].iloc[0]  # seed 000 launched on the default stream


def test_custom_ops_work_under_torch_compile_and_cuda_graphs() -> None:
    gen = torch.Generator(device="cuda").manual_seed(2)
    x, r = activations((512, 4096), "bfloat16", "cuda", gen), activations((512, 4096), "bfloat16", "cuda", gen)
    w = norm_weight(4096, "bfloat16", "cuda", gen)
    ops = _ops()

    def block(x, r, w):
        y, h = ops.add_rms_norm(x, r, w, 1e-6)
        return ops.silu_mul(y, h)

    compiled = torch.compile(block, fullgraph=True, dynamic=False)
    expected = block(x, r, w)
    torch.testing.assert_close(compiled(x, r, w), expected)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(x, r, w)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)
