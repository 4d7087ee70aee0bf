"""Launch settings shared by the Triton kernels."""

from __future__ import annotations

# Rows up to this many elements are held whole in one program; wider rows loop in two passes.
MAX_SINGLE_PASS = 16384
LOOP_BLOCK = 4096


def row_block(n: int) -> tuple[int, bool, int]:
    """(BLOCK, single_pass, num_warps) for a row of n elements."""
    if n <= MAX_SINGLE_PASS:
        block = 1 << max(n - 1, 1).bit_length()
        return block, True, 4 if block <= 2048 else 8 if block <= 8192 else 16
    return LOOP_BLOCK, False, 8
