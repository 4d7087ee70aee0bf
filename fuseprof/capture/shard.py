"""A grid of work sharded over several GPUs: one process per GPU under ``torchrun``.

``fuseprof bench … --gpus N`` and ``fuseprof profile … --gpus N`` start ``torchrun --nproc-per-node N
-m fuseprof.capture.shard SPEC``. torch.distributed gives each process its rank and the world
(gloo: the ranks only meet at a barrier, no tensors cross). Each rank sees its own GPU alone
(``CUDA_VISIBLE_DEVICES``; also what the ncu child of a profile rank sees), compiles into its own
Inductor and Triton caches in one thread, takes its share of the (case, shape) items (case by case,
largest first), runs them exactly as a one-GPU run would (the same correctness check, timing and
L2 policy, its GPU busy with nothing else), and leaves its part: timing rows (bench) or a whole
bundle (profile), and a status with the wall time of each item. The parent merges the parts into
one bundle with ``gpu`` and ``rank`` columns and the device facts of every GPU. A rank that fails
writes its error instead: the others' results are kept and the failed rank is named.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.errors import FuseprofError, InvalidArgumentError


def gpu_count(text: str, device: str) -> int:
    """'all' -> every visible GPU; N -> N (on --device cpu: N processes)."""
    if text == "all":
        if device == "cpu":
            raise InvalidArgumentError("--gpus all needs CUDA GPUs; on --device cpu give a number of processes")
        import torch

        count = torch.cuda.device_count()
        if count < 1:
            raise InvalidArgumentError("--gpus all: no CUDA GPU is visible")
        return count
    if not text.isdigit() or int(text) < 1:
        raise InvalidArgumentError(f"--gpus {text!r}: give a positive number or all")
    return int(text)


def check_device(device: str) -> None:
    """A sharded run is one process per GPU (cuda) or N CPU processes (cpu), not one named GPU."""
    if device not in ("cuda", "cpu"):
        raise InvalidArgumentError(f"--device {device!r} with --gpus: use cuda (one rank per GPU) or cpu")


def work_items(case_specs: list[str], shapes: list[str]) -> list[tuple[str, str]]:
    """The grid in a fixed order: every case at every shape."""
    return [(c, s) for c in case_specs for s in shapes]


# An item's fixed cost (compile, correctness check, graph capture), in elements of shape it is worth:
# item times of the H200 bench grid fit a + b * elements with a / b = 114M elements (--repeats 400:
# a = 1.83 s, b = 1.6e-8 s per element).
ITEM_FIXED_ELEMENTS = 2**27


def _cost(item: tuple[str, str]) -> int:
    """What an item's wall time grows with: a fixed part, and its shape's size (product of its dims)."""
    size = 1
    for d in item[1].split("x"):
        size *= int(d)
    return ITEM_FIXED_ELEMENTS + size


def share(items: list[tuple[str, str]], rank: int, world: int) -> list[tuple[str, str]]:
    """Rank ``rank``'s items: case by case, largest first, each to the least loaded rank (LPT).

    Every rank gets a similar amount of work (every-N-th by grid order gave one GPU both 32768-row
    shapes of every case) and a share of every case: cases differ in cost per item (rmsnorm_swiglu's
    took ~1.3x silu_mul's), and LPT over the whole grid paired equal-sized items so that one H200 got
    all of rmsnorm_swiglu (64.5 against 69.8 s). Replayed on the item times of ten measured runs,
    the gap between two ranks falls from 4.0% to 1.2% of the work on average (worst 6.4% -> 3.1%).
    The split is deterministic: a shape goes to the same rank, and its cache, every run."""
    loads = [0] * world
    mine = []
    for case in dict.fromkeys(c for c, _ in items):
        for item in sorted((i for i in items if i[0] == case), key=lambda i: (-_cost(i), i)):
            target = loads.index(min(loads))
            loads[target] += _cost(item)
            if target == rank:
                mine.append(item)
    return mine


def isolate_rank(local: int, cuda: bool) -> None:
    """Before torch starts: this process sees only GPU ``local`` (as cuda:0) and compiles into caches
    of its own, in one thread. Without this, on an H200 x2 rank 1 took 41-42 s against rank 0's
    19-22 s in two runs with different splits; with it the ranks took 50.9 and 49.5 s."""
    if cuda:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = visible.split(",")[local] if visible else str(local)
    user = getpass.getuser()
    caches = {"TORCHINDUCTOR_CACHE_DIR": Path(tempfile.gettempdir()) / f"torchinductor_{user}",
              "TRITON_CACHE_DIR": Path.home() / ".triton" / "cache"}
    for variable, default in caches.items():
        os.environ[variable] = str(Path(os.environ.get(variable, default)) / f"rank{local}")
    # Compile in the rank itself: Inductor's worker pool (a process per thread, each importing torch)
    # starts while the rank times its first items and gains nothing on graphs of a few kernels. On the
    # H200 x2 (32 CPUs), 4-case grid, cold caches: 2 ranks of 16 threads 36.2 s, of 1 thread 31.7 s.
    # A user's own setting wins.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def _bench_part(spec: dict[str, Any], mine: set[tuple[str, str]], part: Path, log: Callable[[str], None],
                done: Callable[[str], None]) -> dict[str, Any]:
    import torch

    from fuseprof.capture.bench import bench_rows
    from fuseprof.capture.device_facts import device_facts
    from fuseprof.case import parse_shapes

    device = torch.device("cuda:0" if spec["device"] != "cpu" else "cpu")
    rows, cases = bench_rows(spec["cases"], parse_shapes(",".join(spec["shapes"])), spec["dtype"], device,
                             spec["repeats"], spec["seed"], spec["variants"], log, only=mine, done=done)
    facts = device_facts(device)
    rows.assign(device=facts["name"]).to_parquet(part.with_suffix(".parquet"))
    return {"device": facts, "cases": cases}


def _profile_part(spec: dict[str, Any], mine: set[tuple[str, str]], part: Path, log: Callable[[str], None],
                  done: Callable[[str], None]) -> dict[str, Any]:
    from fuseprof.capture.profile import ProfileOptions, run_profile
    from fuseprof.case import parse_shapes

    shapes = [s for s in spec["shapes"] if (spec["cases"][0], s) in mine]
    if not shapes:
        return {}
    options = ProfileOptions(**spec["options"], shapes=parse_shapes(",".join(shapes)), device=spec["device"],
                             out_dir=part.parent, name=part.name)
    bundle = run_profile(options, log)
    done(f"{spec['cases'][0]} {','.join(shapes)}")  # one capture: its shapes share one trace and one ncu run
    return {"bundle": str(bundle)}


JOBS = {"bench": _bench_part, "profile": _profile_part}


def _rank_main(spec: dict[str, Any]) -> None:
    cuda = spec["device"] != "cpu"
    local, world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    isolate_rank(local, cuda)
    import torch.distributed as dist

    from fuseprof.capture.clock import ItemClock

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # seconds since the parent launched torchrun: torchrun's start, this rank's imports, the rendezvous
    ready_s = round(time.time() - spec["launched_at"], 2)
    part = Path(spec["parts"]) / f"rank{rank}"
    mine = set(share(work_items(spec["cases"], spec["shapes"]), rank, world))
    clock = ItemClock()

    def log(message: str) -> None:
        print(f"[rank {rank} +{time.monotonic() - clock.started:6.1f}s] {message}", file=sys.stderr, flush=True)

    status: dict[str, Any] = {"rank": rank, "gpu": local if cuda else None, "items": len(mine), "ready_s": ready_s}
    try:
        status.update(JOBS[spec["job"]](spec, mine, part, log, clock.done))
    except Exception as exc:  # reported by name by the parent; the other ranks' results are kept
        # fuseprof's own errors already say what and where (a user's bug: its file and line)
        said = str(exc) if isinstance(exc, FuseprofError) else f"{type(exc).__name__}: {exc}"
        status.update(error=said, traceback=traceback.format_exc()[-4000:])
    status.update(wall_s=clock.elapsed(), item_s=clock.items)
    written = part.with_suffix(".json.tmp")
    written.write_text(json.dumps(status, default=str))
    written.replace(part.with_suffix(".json"))  # whole or absent: the parent starts merging when it appears
    dist.barrier()
    dist.destroy_process_group()
    # Everything this rank made is written; skip the interpreter's teardown (compile worker pools,
    # GPU contexts) that torchrun, and the user, would otherwise wait for: ~1.3 s of a 2-rank CPU run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def read_statuses(parts: Path, world: int) -> list[dict[str, Any]]:
    """Each rank's status; a rank that left none was killed before it could write one."""
    statuses = []
    for rank in range(world):
        path = parts / f"rank{rank}.json"
        statuses.append(json.loads(path.read_text()) if path.exists()
                        else {"rank": rank, "error": "the process ended without a result (killed?)"})
    return statuses


def merge(parts: Path, world: int) -> tuple[pd.DataFrame, list[dict[str, Any]], list[dict[str, Any]]]:
    """Every rank's bench rows (ordered as the grid), the ranks' status, and the failed ones."""
    statuses = read_statuses(parts, world)
    frames = [pd.read_parquet(parts / f"rank{s['rank']}.parquet").assign(gpu=s["gpu"], rank=s["rank"])
              for s in statuses if "error" not in s and (parts / f"rank{s['rank']}.parquet").exists()]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return rows, statuses, [s for s in statuses if "error" in s]


class RankGroup:
    """``world`` ranks of this module under torchrun, leaving their parts in ``spec["parts"]``.

    ``wait_for_parts`` returns once every rank has left its status, so the parent merges while
    torchrun tears down (0.6-0.9 s on the H200 x2); leaving the ``with`` waits for torchrun, or
    stops it after an error, a timeout or Ctrl-C, so that no rank is left behind."""

    def __init__(self, spec: dict[str, Any], world: int, timeout_s: float) -> None:
        import subprocess

        self.parts, self.world, self.job, self.timeout_s = Path(spec["parts"]), world, spec["job"], timeout_s
        self.launched = time.monotonic()
        spec = {**spec, "launched_at": time.time()}
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world),
                "-m", "fuseprof.capture.shard", json.dumps(spec)]
        self._torchrun = subprocess.Popen(argv)

    def __enter__(self) -> RankGroup:
        return self

    def wait_for_parts(self) -> float:
        """Seconds from launch until every rank has left its status, or torchrun has ended (a rank
        that was killed leaves none)."""
        from fuseprof.errors import FuseprofError

        while not all((self.parts / f"rank{r}.json").exists() for r in range(self.world)):
            if self._torchrun.poll() is not None:
                break
            if time.monotonic() - self.launched > self.timeout_s:
                raise FuseprofError(f"the sharded {self.job} ran past {self.timeout_s:.0f} s")
            time.sleep(0.05)
        return time.monotonic() - self.launched

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
        import subprocess

        if error is None:
            try:
                self._torchrun.wait(timeout=60)  # the ranks are done: only their teardown is left
                return
            except subprocess.TimeoutExpired:
                pass
        self._torchrun.terminate()  # torchrun stops its workers on SIGTERM
        try:
            self._torchrun.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._torchrun.kill()
            self._torchrun.wait()


def timeline(statuses: list[dict[str, Any]], parts_s: float) -> dict[str, Any]:
    """Where a sharded run's time went besides the ranks' work: each rank's start (torchrun, imports,
    rendezvous; seconds after launch) and when the last part was written."""
    return {"parts_s": round(parts_s, 2), "ranks_ready_s": [s.get("ready_s") for s in statuses],
            "ranks_work_s": [s.get("wall_s") for s in statuses]}


def timeline_line(shards: dict[str, Any]) -> str:
    """'ranks ready after 4.1, 4.3 s; worked 49.5, 50.9 s; every part written after 55.6 s'."""
    def seconds(values: list[Any]) -> str:
        return ", ".join("?" if v is None else f"{v:.1f}" for v in values)

    return (f"ranks ready after {seconds(shards['ranks_ready_s'])} s; worked {seconds(shards['ranks_work_s'])} s; "
            f"every part written after {shards['parts_s']:.1f} s")


def failure_message(failed: list[dict[str, Any]], world: int) -> str:
    """'1 of 2 ranks failed (rank 0: RuntimeError: …)'."""
    names = "; ".join(f"rank {s['rank']}: {s['error']}" for s in failed)
    return f"{len(failed)} of {world} ranks failed ({names})"


def main() -> None:
    _rank_main(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
