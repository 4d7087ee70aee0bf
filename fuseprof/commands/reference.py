"""The command reference (docs/commands.md), written from the command table and the parser it
builds, so the reference cannot drift from the CLI: ``python -m fuseprof.commands.reference``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = ", ".join(action.option_strings) or (action.metavar if isinstance(action.metavar, str) else action.dest)
        quiet = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        default = "" if quiet or not action.option_strings else f" (default: {action.default})"
        text = (action.help or "").replace("%%", "%").replace("|", "\\|")
        rows.append(f"| `{name}` | {text}{default} |")
    return rows


def markdown() -> str:
    """Every verb, grouped as the command table groups them, with its description and options."""
    from fuseprof.cli import build_parser
    from fuseprof.commands import GROUPS
    from fuseprof.commands.examples import EXAMPLES

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = ["# Command reference", "",
             "Written from the command table (`fuseprof/commands/`) by `python -m fuseprof.commands.reference`;",
             "`fuseprof COMMAND --help` prints the same.", ""]
    for group, commands in GROUPS.items():
        lines += [f"## {group[0].upper()}{group[1:]}", ""]
        for command in commands:
            lines += [f"### `fuseprof {command.name}`", "", (command.description or command.help).replace("%%", "%"),
                      "", "| argument | meaning |", "|---|---|", *_options(sub.choices[command.name]), ""]
            if command.name in EXAMPLES:
                lines += ["```bash", *EXAMPLES[command.name], "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/commands.md")
    target.write_text(markdown())
    print(target)
