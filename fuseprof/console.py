"""Progress messages: to stderr, so stdout carries only results (a bundle path, a table).

Torch-free on purpose: ``ingest`` uses it on machines where importing torch is slow or absent.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

Log = Callable[[str], None]


def log_to_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
