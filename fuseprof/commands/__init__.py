"""The command table: every ``fuseprof`` verb, in the order ``--help`` lists them, grouped by what
it works on. ``fuseprof.cli`` builds its parser from ``COMMANDS`` alone; the command reference
(docs/commands.md) and the help test read the same table."""

from __future__ import annotations

from fuseprof.commands import bundles, capture, dashboard, interop, tables, traces, whatif
from fuseprof.commands.base import Command

GROUPS: dict[str, tuple[Command, ...]] = {
    "capture on a GPU": capture.COMMANDS,
    "traces you already have": traces.COMMANDS + whatif.COMMANDS,
    "findings where you already look": interop.COMMANDS,
    "tables over capture bundles": tables.COMMANDS,
    "bundles": bundles.COMMANDS,
    "dashboard": dashboard.COMMANDS,
}
COMMANDS: dict[str, Command] = {c.name: c for group in GROUPS.values() for c in group}

__all__ = ["COMMANDS", "GROUPS", "Command"]
