"""Per-trace work on a Dask cluster (``--scheduler ADDRESS``): the same calls as the local pool.

The calls go as tasks of several calls each (``batches``: large groups first, one call a task at the end, so the
workers finish together), fewer tasks for the scheduler, the workers' event loops and the client to handle (128
ranks on two threads: 32 tasks, not 128). On a 2-core machine what that saves is within the machine's drift
(docs/traces.md); fixed groups of 4 or 16 ranks, tried before, were not faster: their last group left one worker
running alone. The answers (a store key, or a small analysis) come back through the scheduler. The workers read
the traces and write the trace store at the paths the parent gives, so both must be on a filesystem every worker
mounts at the same path (NFS, Lustre, a shared volume); an object store works where it is mounted as a filesystem
(s3fs, gcsfuse).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fuseprof.errors import FuseprofError

ANSWER_S = 30.0  # a scheduler that does not complete Dask's handshake in this time is none


def client_of(address: str, client: Callable[..., Any]) -> Any:
    """A Dask ``client`` connected to ``address``, or one clear error: an address Dask cannot parse (``ValueError``:
    'not a url', an http:// URL), nothing listening there, or a server that accepts the connection but never
    answers Dask's handshake (a web server, a silent socket: Dask would wait forever) within ``ANSWER_S``."""
    import threading

    made: list[Any] = []
    failed: list[BaseException] = []

    def connect() -> None:
        try:
            made.append(client(address, timeout="10s"))
        except Exception as exc:  # ValueError, OSError, TimeoutError, a protocol error: all mean no scheduler
            failed.append(exc)

    thread = threading.Thread(target=connect, name="fuseprof-dask-connect", daemon=True)
    thread.start()
    thread.join(ANSWER_S)
    if failed or not made:
        why = f"{type(failed[0]).__name__}: {failed[0]}" if failed else f"no Dask answer within {ANSWER_S:.0f} s"
        raise FuseprofError(f"--scheduler {address}: cannot reach a Dask scheduler there ({why})")
    return made[0]


def run_on_cluster(address: str, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]],
                   progress: Callable[[str, int, int], None] | None, what: str) -> list[Any]:
    """``fn(*call)`` for each call on the cluster at ``address``, answers in call order. A worker that dies is
    one clear error, never a wait without end: Dask retries a task whose worker died and gives up after a few
    (``KilledWorker``); a cluster left with no worker, or a scheduler that stops answering, for ``ANSWER_S``
    ends the run."""
    try:
        from distributed import Client, KilledWorker, wait
        from distributed.client import FuturesCancelledError
    except ImportError:
        raise FuseprofError("--scheduler needs dask.distributed: pip install 'fuseprof[dask]'") from None
    with _quiet("distributed.client"), client_of(address, Client) as client:
        threads = sum(client.nthreads().values())
        groups = batches(len(calls), threads)
        futures = [client.submit(in_turn, fn, [calls[k] for k in group], pure=False) for group in groups]
        size = {future.key: len(group) for future, group in zip(futures, groups)}
        pending, done, stalled_since = set(futures), 0, None
        while pending:
            try:
                finished, pending = wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED")
            except TimeoutError:
                stalled_since = _still_served(client, address, stalled_since, done, len(calls), what)
                continue
            except FuturesCancelledError:  # what Dask does to every future when the scheduler goes
                raise FuseprofError(f"--scheduler {address}: the connection to the scheduler was lost ({done} of "
                                    f"{len(calls)} {what} done)") from None
            stalled_since = None
            for future in finished:
                if future.status == "error" and isinstance(future.exception(), KilledWorker):
                    task = f", in a task of {size[future.key]}" if size[future.key] > 1 else ""
                    raise FuseprofError(f"--scheduler {address}: the workers died on every try at one of the "
                                        f"{what}{task} ({done} of {len(calls)} done); see the workers' logs (memory?)")
                done += size[future.key]
                if progress:
                    progress(what, done, len(calls))
        return [answer for answers in client.gather(futures) for answer in answers]


def batches(count: int, threads: int) -> list[range]:
    """``count`` calls as consecutive groups, one task each, for a cluster of ``threads`` worker threads: each
    group a quarter of what is left over the threads (guided self-scheduling), at least one call. The large groups go
    first and the one-call groups last, so no worker is left running a large group while the others idle:
    128 calls on 2 threads are 32 tasks, not 128. With no worker yet (an adaptive cluster, still to grow) the size
    of the cluster is unknown: one call a task, as a cluster of any size can share them."""
    if threads < 1:
        return [range(k, k + 1) for k in range(count)]
    out, start, share = [], 0, 4 * threads
    while start < count:
        size = max(1, (count - start) // share)
        out.append(range(start, start + size))
        start += size
    return out


def in_turn(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``fn(*call)`` for each of ``calls``, in order: one task's work on a worker."""
    return [fn(*call) for call in calls]


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Dask's client logs a lost scheduler as tracebacks; this run says it in one line instead."""
    log = logging.getLogger(logger)
    before = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(before)


POLL_S = 2.0  # how often a wait with nothing finished asks whether anything can still finish


def _still_served(client: Any, address: str, stalled_since: float | None, done: int, total: int, what: str
                  ) -> float | None:
    """While nothing finishes: whether the scheduler answers and holds a worker. Returns when this stall
    began (None: not stalled); raises once it has lasted ``ANSWER_S``."""
    import time

    try:
        workers = len(client.scheduler_info(n_workers=-1).get("workers", {}))
    except Exception:  # the scheduler is gone: its connection closed, or it no longer answers
        workers = -1
    if workers > 0:
        return None
    now = time.monotonic()
    since = stalled_since if stalled_since is not None else now
    if now - since >= ANSWER_S:
        state = "the scheduler stopped answering" if workers < 0 else "the cluster has no worker left"
        raise FuseprofError(f"--scheduler {address}: {state} for {ANSWER_S:.0f} s ({done} of {total} {what} done)")
    return since
