"""The program ncu profiles: each variant and shape called once inside its NVTX range.

Warm-up calls (compilation, autotuning, allocator growth) run before the range opens, so
ncu, filtering on the range, replays only the kernels of one measured call.
Run as ``python -m fuseprof.capture.ncu_target --case ... --variants ... --shapes ... --dtype ...``.
"""

from __future__ import annotations

import argparse

import torch

from fuseprof.case import load_case, parse_shapes, select_variants, shape_label, shape_seed
from fuseprof.ranges import range_label

WARMUP_CALLS = 2


def target_argv(python: str, case: str, variants: list[str], shapes: str, dtype: str, seed: int) -> list[str]:
    """The command line that runs this module; kept beside ``main`` so the two cannot drift."""
    return [python, "-m", "fuseprof.capture.ncu_target", "--case", case, "--variants", ",".join(variants),
            "--shapes", shapes, "--dtype", dtype, "--seed", str(seed)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", required=True)
    parser.add_argument("--variants", required=True)
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    case = load_case(args.case)
    variants = select_variants(case, args.variants.split(","))
    generator = torch.Generator(device="cuda")
    for shape in parse_shapes(args.shapes):
        inputs = case.make_inputs(shape, args.dtype, "cuda", generator.manual_seed(shape_seed(args.seed, shape)))
        for variant in variants:
            for _ in range(WARMUP_CALLS):
                variant.fn(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(range_label(variant.name, shape_label(shape)))
            variant.fn(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main()
