"""The two-tensor form of SiLU-and-mul, as its own built-in case name; kernels live in silu_and_mul/."""

from fuseprof_kernels.silu_and_mul import SPLIT_CASE as CASE

__all__ = ["CASE"]
