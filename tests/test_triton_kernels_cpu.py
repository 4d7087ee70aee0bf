"""The fused Triton kernels in Triton's interpreter on CPU tensors (TRITON_INTERPRET=1, set by
conftest where there is no GPU), against float64, with NaN-poisoned outputs. The same kernels
run compiled on the H200 in tests/test_gpu_kernels.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from fuseprof_kernels._inputs import activations, norm_weight  # noqa: E402
from fuseprof_kernels.add_rms_norm.fused_triton import add_rms_norm_triton  # noqa: E402
from fuseprof_kernels.add_rms_norm.reference import reference as add_rms_norm_ref  # noqa: E402
from fuseprof_kernels.rmsnorm_swiglu.fused_triton import rmsnorm_swiglu_triton  # noqa: E402
from fuseprof_kernels.rmsnorm_swiglu.reference import reference as rmsnorm_swiglu_ref  # noqa: E402
from fuseprof_kernels.silu_and_mul.fused_triton import silu_and_mul_triton, silu_mul_triton  # noqa: E402
from fuseprof_kernels.silu_and_mul.reference import reference_packed, reference_split  # noqa: E402

from fuseprof.capture.correctness import compare  # noqa: E402
from fuseprof.case import DEFAULT_TOLERANCES  # noqa: E402

if torch.cuda.is_available():
    pytest.skip("a GPU is present: tests/test_gpu_kernels.py runs these kernels compiled", allow_module_level=True)

# N: one element, not a multiple of 8, seed 000's 768, a power of two, past one program's row (16384)
SHAPES = [(1, 1), (3, 13), (2, 768), (5, 771), (4, 4096), (1, 20_000)]


def _nan(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_triton_kernels_in_the_interpreter(m: int, n: int, dtype: str) -> None:
    gen = torch.Generator().manual_seed(m * 1000 + n)
    tol = DEFAULT_TOLERANCES[dtype]
    x, y = activations((m, n), dtype, "cpu", gen), activations((m, n), dtype, "cpu", gen)
    w = norm_weight(n, dtype, "cpu", gen)
    out, h = _nan((m, n), x.dtype), _nan((m, n), x.dtype)
    results = {
        "rmsnorm_swiglu": compare(rmsnorm_swiglu_triton(x, y, w, out=_nan((m, n), x.dtype)),
                                  rmsnorm_swiglu_ref(x, y, w), tol),
        "add_rms_norm": compare(add_rms_norm_triton(x, y, w, out=out, residual_out=h), add_rms_norm_ref(x, y, w), tol),
        "silu_mul": compare(silu_mul_triton(x, y, out=_nan((m, n), x.dtype)), reference_split(x, y), tol),
    }
    packed = torch.cat([x, y], dim=1)
    results["silu_and_mul"] = compare(silu_and_mul_triton(packed, out=_nan((m, n), x.dtype)),
                                      reference_packed(packed), tol)
    wrong = {op: r["problem"] for op, r in results.items() if not r["correct"]}
    assert not wrong, wrong
