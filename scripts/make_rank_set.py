"""A distributed run's traces, one per rank, made from a real two-GPU capture, with a known straggler.

    python scripts/make_rank_set.py OUT [--ranks 32] [--steps 90] [--slow-rank 17] [--slow-category GEMM]
                                        [--factor 1.5] [--seed 0] [--late-start RANK:US]

Each rank's trace is the committed H200 tensor-parallel MLP trace (``tests/fixtures/tp2``: GEMM,
elementwise, GEMM, all-reduce per step) repeated to ``steps`` profiler steps, re-timed as a real run
would be: every kernel's duration jittered by a few percent (seeded), and each all-reduce a rendezvous,
starting on each rank when its work before it is done and ending for all when the last rank has arrived
plus the transfer. On ``slow-rank`` the kernels of ``slow-category`` (the op registry's category: GEMM
is the nvjet kernels) take ``factor`` × as long in every third step: that rank arrives last at those
collectives, because that category grew. CPU events keep their place relative to the kernels they
launched. Used by tests/test_many_ranks.py and scripts/bench_ranks.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "tp2" / "tp_mlp-rank0.json.gz"
_GPU = ("kernel", "gpu_memset", "gpu_memcpy")
_SLOW_NAMES = {"GEMM": ("nvjet",), "elementwise": ("elementwise",)}


def _template() -> tuple[dict, list[dict], float]:
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = [e for e in trace.pop("traceEvents") if e.get("ph") != "M" or e.get("name") == "process_name"]
    stamps = [e["ts"] for e in events if "ts" in e]
    return trace, events, max(stamps) - min(stamps) + 50.0


def _copies(events: list[dict], span: float, copies: int) -> list[dict]:
    """The template's events ``copies`` times, shifted in time, ids and step numbers kept unique."""
    ids = [e.get("args", {}).get(k, 0) for e in events for k in ("correlation", "External id")]
    id_step = max(v for v in ids if isinstance(v, int)) + 1
    out = []
    for c in range(copies):
        for e in events:
            e2 = dict(e, args=dict(e.get("args", {})))
            if "ts" in e2:
                e2["ts"] = e["ts"] + c * span
            for key in ("correlation", "External id"):
                if isinstance(e2["args"].get(key), int):
                    e2["args"][key] += c * id_step
            if isinstance(e.get("id"), int):
                e2["id"] = e["id"] + c * id_step
            if e2.get("name", "").startswith("ProfilerStep#"):
                e2["name"] = f"ProfilerStep#{c * 3 + int(e['name'].split('#')[1])}"
            out.append(e2)
    return out


def _retime(ranks: list[list[dict]], slow_rank: int, slow_names: tuple[str, ...], factor: float,
            rng: random.Random, late_start: dict[int, float]) -> None:
    """Re-time every rank's GPU events in place (see the module docstring), then its CPU events."""
    gpu = [sorted((e for e in events if e.get("cat") in _GPU), key=lambda e: e["ts"]) for events in ranks]
    original = [[(e["ts"], e["dur"]) for e in g] for g in gpu]
    clock = [original[r][0][0] + late_start.get(r, 0.0) for r in range(len(ranks))]
    transfer = 0.9 * min(d for (_, d), e in zip(original[0], gpu[0]) if e["name"].startswith("ncclDevKernel"))
    step_of = 0
    for i in range(len(gpu[0])):
        arrivals = []
        for r, g in enumerate(gpu):
            ts, dur = original[r][i]
            gap = max(0.0, ts - (original[r][i - 1][0] + original[r][i - 1][1])) if i else 0.0
            start = clock[r] + gap
            g[i]["ts"] = round(start, 3)
            if g[i]["name"].startswith("ncclDevKernel"):
                arrivals.append(start)
                continue
            grow = factor if r == slow_rank and step_of % 3 == 1 and any(n in g[i]["name"] for n in slow_names) else 1.0
            g[i]["dur"] = round(dur * grow * (1 + rng.uniform(-0.03, 0.03)), 3)
            clock[r] = start + g[i]["dur"]
        if arrivals:
            end = max(arrivals) + transfer
            for r, g in enumerate(gpu):
                g[i]["dur"] = round(end - g[i]["ts"], 3)
                clock[r] = end
            step_of += 1
    for r, events in enumerate(ranks):
        _follow(events, gpu[r], original[r])


def _follow(events: list[dict], gpu: list[dict], original: list[tuple[float, float]]) -> None:
    """Shift each CPU event by the smaller shift of the GPU events around it: a launch stays before
    the kernel it launched."""
    import bisect

    starts = [ts for ts, _ in original]
    shifts = [g["ts"] - ts for g, (ts, _) in zip(gpu, original)]
    for e in events:
        if e.get("cat") in _GPU or "ts" not in e:
            continue
        k = bisect.bisect_right(starts, e["ts"])
        around = [shifts[j] for j in (k - 1, k) if 0 <= j < len(shifts)]
        e["ts"] = round(e["ts"] + min(around), 3)


def make_rank_set(out: Path, ranks: int = 32, steps: int = 90, slow_rank: int = 17, slow_category: str = "GEMM",
                  factor: float = 1.5, seed: int = 0, late_start: dict[int, float] | None = None) -> list[Path]:
    """Write ``ranks`` traces into ``out`` (rank-NN.json); their paths. ``late_start``: rank → µs its process
    started after the others (its work before the first collective comes that much later; the first
    collective waits for it, as a real run's traces started apart do)."""
    header, template, span = _template()
    copies = max(1, steps // 3)
    rng = random.Random(seed)
    per_rank = [_copies(template, span, copies) for _ in range(ranks)]
    _retime(per_rank, slow_rank, _SLOW_NAMES[slow_category], factor, rng, late_start or {})
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, events in enumerate(per_rank):
        info = dict(header.get("distributedInfo", {}), rank=r, world_size=ranks)
        path = out / f"rank-{r:02d}.json"
        path.write_text(json.dumps({**header, "distributedInfo": info, "traceEvents": events}))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--slow-rank", type=int, default=17)
    parser.add_argument("--slow-category", choices=sorted(_SLOW_NAMES), default="GEMM")
    parser.add_argument("--factor", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--late-start", metavar="RANK:US", help="one rank's process started this many µs late")
    args = parser.parse_args()
    late = {int(args.late_start.split(":")[0]): float(args.late_start.split(":")[1])} if args.late_start else None
    paths = make_rank_set(args.out, args.ranks, args.steps, args.slow_rank, args.slow_category, args.factor, args.seed,
                          late)
    print(f"{len(paths)} traces in {args.out}, {sum(p.stat().st_size for p in paths) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
