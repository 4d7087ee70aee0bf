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


def run_on_cluster(address: str, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]],
                   progress: Callable[[str, int, int], None] | None, what: str) -> list[Any]:
    """``fn(*call)`` for each call on the cluster at ``address``, answers in call order."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise FuseprofError("--scheduler needs dask.distributed: pip install 'fuseprof[dask]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise FuseprofError(f"--scheduler {address}: cannot reach a Dask scheduler there ({exc})") from None
    with client:
        futures = [client.submit(fn, *call, pure=False) for call in calls]
        for done, _ in enumerate(as_completed(futures), start=1):
            if progress:
                progress(what, done, len(calls))
        return client.gather(futures)  # type: ignore[no-any-return]
