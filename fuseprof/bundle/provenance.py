"""Versions, git commit and command line: what a reader needs to reproduce a bundle."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(cwd: Path) -> dict[str, Any]:
    """Commit of the code that captured; FUSEPROF_GIT_COMMIT stands in where the tree has no .git
    (a copy of the working tree sent to a GPU machine)."""
    commit = _git(["rev-parse", "HEAD"], cwd) or os.environ.get("FUSEPROF_GIT_COMMIT")
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    try:
        import torch

        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
    except ImportError:
        pass
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    from fuseprof import __version__

    out["fuseprof"] = __version__
    return out


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def bundle_name(prefix: str, device_name: str, created_utc: str) -> str:
    """'<prefix>-<device>-<UTC time>', e.g. 'bench-H200-20261129T093240Z' (the bundle writer lower-cases)."""
    device = device_name.replace("NVIDIA ", "").replace(" ", "")
    return f"{prefix}-{device}-{created_utc.replace(':', '').replace('-', '')}"


def command_line() -> list[str]:
    return list(sys.argv)
