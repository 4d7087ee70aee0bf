"""The benchmark grid, apart from the inputs: a sharded bench's parent reads it without importing torch."""

from __future__ import annotations

# The benchmark grid of issue 3: decode-sized to prefill-sized M, two hidden widths.
BENCH_SHAPES: tuple[tuple[int, int], ...] = tuple(
    (m, n) for n in (4096, 8192) for m in (1, 128, 1024, 4096, 8192, 32768)
)
