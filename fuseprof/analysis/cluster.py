"""Per-trace work on a Dask cluster (``--scheduler ADDRESS``): the same calls as the local pool.

Each call is submitted as a task; its answer (a store key, or a small analysis) comes back through
the scheduler. The workers read the traces and write the trace store at the paths the parent gives,
so both must be on a filesystem every worker mounts at the same path (NFS, Lustre, a shared volume);
an object store works where it is mounted as a filesystem (s3fs, gcsfuse).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    """``fn(*call)`` for each call on the cluster at ``address``, answers in call order."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise FuseprofError("--scheduler needs dask.distributed: pip install 'fuseprof[dask]'") from None
    with client_of(address, Client) as client:
        futures = [client.submit(fn, *call, pure=False) for call in calls]
        for done, _ in enumerate(as_completed(futures), start=1):
            if progress:
                progress(what, done, len(calls))
        return client.gather(futures)  # type: ignore[no-any-return]
