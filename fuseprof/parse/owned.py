"""Files fuseprof writes and may later remove: temporary names that say which host and process write them,
and the clean-up that removes only those of processes that are gone. The store (``fuseprof.parse.store``), the
bundle writer (``fuseprof.bundle.files``) and the report share them, so nothing they did not write is ever
removed; and whether a path is the user's own, which the store and the kept file keys trust nothing without."""

from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path


def owned_by_user(path: Path) -> bool:
    """The path is this user's and nobody else may write it (always true where there are no uids): what the store
    trusts an entry, and the hashing its kept keys, from; a file others can write could say another file's content
    is this one's."""
    if not hasattr(os, "getuid"):
        return True
    try:
        st = path.lstat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o022 and not path.is_symlink()


def make_private_folder(path: Path) -> bool:
    """``path`` and every missing folder above it made for this user alone (0o700, whatever the umask); whether
    this call made ``path`` itself. Under a umask of 002 (the default where each user has a group of their own),
    folders made with the default mode are group-writable, and ``owned_by_user`` rightly trusts nothing in them:
    the store would refuse all it had written."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    made = False
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
            made = True
        except FileExistsError:  # another process made it first
            made = False
    return made


def write_private(path: Path, data: bytes) -> None:
    """``data`` as the new file ``path``, readable and writable by this user alone (0o600, whatever the umask; a
    leftover at ``path`` is removed first, so its mode is not kept): what the store and the kept keys trust."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


PARTIAL_MARKER = ".fuseprof-partial"  # inside every half-written bundle: what proves fuseprof made it
_HOST = re.sub(r"[^A-Za-z0-9_.]+", "_", socket.gethostname()) or "host"
_OURS = re.compile(r"\.fuseprof-(partial|tmp)-(?P<host>[A-Za-z0-9_.]+)-(?P<pid>\d+)$")


def temporary_name(name: str, kind: str) -> str:
    """``.<name>.fuseprof-<kind>-<host>-<pid>``: a name no user file has, that says which machine and
    process write it (a folder on a shared disk is written from several machines)."""
    return f".{name}.fuseprof-{kind}-{_HOST}-{os.getpid()}"


def remove_stale_partials(folder: Path) -> list[Path]:
    """Half-written bundles and temporary files that fuseprof made (named by ``temporary_name``; a
    bundle also holding ``PARTIAL_MARKER``) on this machine for a process that is gone (killed with -9):
    removed, so none lingers unseen. Anything else — a user's ``notes.txt.tmp-4000000``, another
    machine's write in progress — is left alone."""
    removed = []
    for path in [*folder.glob(".*.fuseprof-partial-*"), *folder.glob(".*.fuseprof-tmp-*"),
                 *folder.glob("*/.*.fuseprof-tmp-*")]:
        match = _OURS.search(path.name)
        if match is None or match["host"] != _HOST or _alive(int(match["pid"])) or path.is_symlink():
            continue
        if match[1] == "partial" and not (path.is_dir() and (path / PARTIAL_MARKER).is_file()):
            continue
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        removed.append(path)
    return removed
