"""Capture whole-model torch.profiler traces of the small Llama decoder on a GPU.

One prefill of PROMPT tokens and DECODE greedy decode steps, each a profiler step, with
``record_shapes``, ``with_stack`` and ``with_modules`` on, as a user would capture a model; eager
and torch.compile(dynamic=False) (one prefill and one decode graph: positions are tensors and the
KV cache is static). Writes ``<out>/llama4l-<variant>.json.gz``; ``fuseprof ingest`` makes bundles.

    python scripts/capture_model_trace.py --out DIR [--variants eager,compiled]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from fuseprof_kernels._llama_model.model import Config, Decoder

from fuseprof.capture.torch_profile import export_gzipped_trace, profiler_activities

PROMPT, DECODE = 256, 8


def generate(forward, model: Decoder, prompt: torch.Tensor, steps: int, prof=None) -> list[int]:  # type: ignore[no-untyped-def]
    """Greedy decoding; ``prof.step()`` after the prefill and after each decode step."""
    device = prompt.device
    with torch.profiler.record_function("prefill"):
        logits = forward(prompt, torch.arange(prompt.shape[1], device=device))
    token = logits[:, -1].argmax(-1, keepdim=True)
    out = [int(token)]
    if prof:
        prof.step()
    for i in range(steps):
        with torch.profiler.record_function("decode_step"):
            logits = forward(token, torch.full((1,), prompt.shape[1] + i, device=device, dtype=torch.long))
            token = logits[:, -1].argmax(-1, keepdim=True)
        out.append(int(token))  # a host sync per token, as a real generation loop has
        if prof:
            prof.step()
    return out


def capture(variant: str, out_dir: Path) -> Path:
    torch.manual_seed(0)
    cfg = Config()
    model = Decoder(cfg).to("cuda", torch.bfloat16).eval()
    forward = torch.compile(model, dynamic=False) if variant == "compiled" else model
    prompt = torch.randint(0, cfg.vocab, (1, PROMPT), device="cuda")
    with torch.inference_mode():
        for _ in range(2):  # warm-up: compilation, cuBLAS handles, autotuning
            warm = generate(forward, model, prompt, DECODE)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=profiler_activities(True), record_shapes=True, with_stack=True,
                                    with_modules=True) as prof:
            tokens = generate(forward, model, prompt, DECODE, prof)
    assert tokens == warm, "decoding is not deterministic across runs"
    gz = export_gzipped_trace(prof, out_dir / f"llama4l-{variant}.json.gz")
    print(f"{variant}: tokens {tokens}; {gz} {gz.stat().st_size / 1e6:.2f} MB")
    return gz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variants", default="eager,compiled")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for variant in args.variants.split(","):
        capture(variant, args.out)


if __name__ == "__main__":
    main()
