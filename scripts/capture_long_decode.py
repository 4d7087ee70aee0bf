"""Regenerate issue 61's bench trace: an eager decode of a few thousand tokens with no ProfilerStep (100+ MB of JSON).

    python scripts/capture_long_decode.py --out long_decode.json.gz [--steps 560] [--batch 4]

The truth set's 2-layer decoder (scripts/capture_truth_set.py's ``Decoder``: d 1024, vocabulary 8192, static KV
cache, argmax written back into the step's input), batch 4, ``--steps`` greedy steps (560 x 4 = 2,240 tokens)
with the cache position advanced each step, bf16, under one plain ``torch.profiler.profile`` (CPU and CUDA
activities, record_shapes and with_modules, no schedule and no ``prof.step()``: no ProfilerStep, so nothing in
the trace repeats by name). The trace is too large to commit (about 150 MB of JSON, ~60k GPU events): the copy
this session made on an H100 lies outside the repository at ``/work/bench-traces/long_decode.json.gz``; run this
on a GPU to make another.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_truth_set as base  # noqa: E402  (the model: one definition)


def decode(steps: int, batch: int) -> base.Decoder:
    """A decoder whose cache holds every step's position, warmed up outside the profiler."""
    decoder = base.Decoder(batch, context=steps + 8)
    for _ in range(3):
        decoder.step()
    decoder.pos.zero_()
    return decoder


def capture(out: Path, steps: int, batch: int) -> None:
    decoder = decode(steps, batch)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    t0 = time.monotonic()
    with profile(activities=activities, record_shapes=True, with_modules=True) as prof:
        for _ in range(steps):
            decoder.step()
            decoder.pos.add_(1)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    traced = time.monotonic() - t0
    raw = out.with_name(out.name.removesuffix(".gz"))
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 24)
    print(f"{out}: {steps} steps x batch {batch} in {traced:.1f} s traced, {raw.stat().st_size / 1e6:.1f} MB JSON, "
          f"{out.stat().st_size / 1e6:.1f} MB gzipped", flush=True)
    raw.unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the gzipped trace to write (.json.gz)")
    parser.add_argument("--steps", type=int, default=560, help="decode steps (default 560)")
    parser.add_argument("--batch", type=int, default=4, help="sequences decoded at once (default 4)")
    args = parser.parse_args(argv)
    if not args.out.name.endswith(".json.gz") or args.steps < 1 or args.batch < 1:
        parser.error("--out must end in .json.gz; --steps and --batch must be positive")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    capture(args.out, args.steps, args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
