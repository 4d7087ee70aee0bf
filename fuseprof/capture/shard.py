"""A benchmark grid sharded over several GPUs: one process per GPU under ``torchrun``.

``fuseprof bench … --gpus N`` starts ``torchrun --nproc-per-node N -m fuseprof.capture.shard SPEC``.
Each rank (torch.distributed gives rank and world; NCCL on GPUs, gloo on CPU) takes every N-th
(case, shape) item of the grid, runs it on its own device exactly as a one-GPU run would (the same
correctness check, timing and L2 policy; its GPU busy with nothing else), and writes its rows to a
part file. After a barrier rank 0 merges the parts into one bundle, with ``gpu`` and ``rank``
columns and every rank's device facts. A rank that fails writes its error instead of rows: rank 0
keeps the others' rows and names the failed rank and its error.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pandas as pd


def work_items(case_specs: list[str], shapes: list[str]) -> list[tuple[str, str]]:
    """The grid in a fixed order: every case at every shape."""
    return [(c, s) for c in case_specs for s in shapes]


def _cost(item: tuple[str, str]) -> int:
    """A shape's size (the product of its dimensions): what its timing and compilation cost grow with."""
    size = 1
    for d in item[1].split("x"):
        size *= int(d)
    return size


def share(items: list[tuple[str, str]], rank: int, world: int) -> list[tuple[str, str]]:
    """Rank ``rank``'s items: largest first, each to the least loaded rank (LPT), so every GPU gets a
    similar amount of work. Every-N-th by grid order gave one H200 both 32768-row shapes of every
    case: 18.8 s of work on one GPU and 41.1 s on the other."""
    loads = [0] * world
    mine = []
    for item in sorted(items, key=lambda i: (-_cost(i), i)):
        target = loads.index(min(loads))
        loads[target] += _cost(item)
        if target == rank:
            mine.append(item)
    return mine


def _rank_main(spec: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    from fuseprof.capture.bench import bench_rows
    from fuseprof.capture.device_facts import device_facts
    from fuseprof.case import parse_shapes

    cuda = spec["device"] != "cpu"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device(f"cuda:{local}" if cuda else "cpu")
    parts = Path(spec["parts"])
    mine = set(share(work_items(spec["cases"], spec["shapes"]), rank, world))
    started = time.monotonic()
    status: dict[str, Any]
    try:
        rows, cases = bench_rows(spec["cases"], parse_shapes(",".join(spec["shapes"])), spec["dtype"], device,
                                 spec["repeats"], spec["seed"], spec["variants"], lambda m: print(f"[rank {rank}] {m}",
                                                                                                   file=sys.stderr,
                                                                                                   flush=True),
                                 only=mine)
        facts = device_facts(device)
        rows = rows.assign(device=facts["name"], gpu=local if cuda else None, rank=rank)
        rows.to_parquet(parts / f"rank{rank}.parquet")
        status = {"rank": rank, "gpu": local if cuda else None, "device": facts, "cases": cases, "items": len(mine),
                  "wall_s": round(time.monotonic() - started, 2)}
    except Exception as exc:  # reported by name on rank 0; the other ranks' rows are kept
        status = {"rank": rank, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
    (parts / f"rank{rank}.json").write_text(json.dumps(status, default=str))
    dist.barrier(device_ids=[local]) if cuda else dist.barrier()
    dist.destroy_process_group()


def merge(parts: Path, world: int) -> tuple[pd.DataFrame, list[dict[str, Any]], list[dict[str, Any]]]:
    """Every rank's rows (ordered as the grid), the ranks' status, and the failed ones."""
    statuses = []
    for rank in range(world):
        path = parts / f"rank{rank}.json"
        statuses.append(json.loads(path.read_text()) if path.exists()
                        else {"rank": rank, "error": "the process ended without a result (killed?)"})
    frames = [pd.read_parquet(parts / f"rank{s['rank']}.parquet") for s in statuses
              if "error" not in s and (parts / f"rank{s['rank']}.parquet").exists()]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return rows, statuses, [s for s in statuses if "error" in s]


def main() -> None:
    _rank_main(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
