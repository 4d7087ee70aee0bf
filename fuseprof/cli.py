"""The ``fuseprof`` command: builds its parser from the command table (``fuseprof.commands``) and
turns the toolkit's named errors into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fuseprof import __version__
from fuseprof.commands import COMMANDS
from fuseprof.commands.examples import epilog
from fuseprof.commands.help_format import DefaultsShown, HelpfulParser
from fuseprof.errors import FuseprofError
from fuseprof.output_paths import check_outputs


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, one subparser per row of ``COMMANDS``; ``only``: that verb's subparser alone, all a
    command line that names it needs (its help, its errors and its values are the same; the 26 verbs' cost 10 ms)."""
    parser = argparse.ArgumentParser(
        prog="fuseprof", formatter_class=DefaultsShown,
        description="Measure what fusing GPU kernels buys: capture kernels with torch.profiler and Nsight "
                    "Compute into trace bundles, read traces you already have, and compare fused with unfused.")
    parser.add_argument("--version", action="version", version=f"fuseprof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=HelpfulParser)
    for command in COMMANDS.values() if only is None else [COMMANDS[only]]:
        p = sub.add_parser(command.name, help=command.help, description=command.description or command.help,
                           epilog=epilog(command.name))
        if command.arguments is not None:
            command.arguments(p)
    return parser


def _said(error: object, code: int) -> int:
    print(f"fuseprof: error: {error}", file=sys.stderr)
    return code


def _remove_unfinished() -> None:
    from fuseprof.bundle.files import remove_unfinished  # half-written bundles and temporary files

    remove_unfinished()


def main(argv: Sequence[str] | None = None) -> int:
    """The command's exit status; everything it prints passes through ``fuseprof.console.terminal_streams``
    (control characters escaped, a reader that goes away leaves the status as the command made it)."""
    from fuseprof.console import terminal_streams

    with terminal_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    from fuseprof.console import one_line_warnings_and_sigterm, trace_verb_settings

    try:  # an input path that names nothing, or another tool's file, is said before any heavy import
        given = list(argv) if argv is not None else sys.argv[1:]
        args = build_parser(given[0] if given and given[0] in COMMANDS else None).parse_args(given)
    except FuseprofError as exc:
        return _said(exc, exc.exit_code)
    one_line_warnings_and_sigterm()
    command = COMMANDS[args.command]
    restore = trace_verb_settings() if command.kept is not None else None  # a trace verb: pandas comes next
    try:
        check_outputs(args)  # an output never replaces an input, whatever the flags
        if command.kept is not None and command.kept(args):
            from fuseprof.commands.answers import answered

            return answered(list(argv) if argv is not None else sys.argv[1:], args, lambda: command.run(args))
        return command.run(args)
    except FuseprofError as exc:
        return _said(exc, exc.exit_code)
    except ModuleNotFoundError as exc:  # an optional package of an extra this install lacks: one line naming it
        from fuseprof.errors import missing_extra

        missing = missing_extra(exc, f"fuseprof {args.command}")
        if missing is None:
            raise
        return _said(missing, missing.exit_code)
    except KeyboardInterrupt:
        _remove_unfinished()
        print("fuseprof: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # the trace outgrew the memory the process may use (ulimit -v, a container's limit)
        from fuseprof.errors import out_of_memory

        _remove_unfinished()
        return _said(out_of_memory(args.command), 2)
    finally:
        if restore is not None:
            restore()


if __name__ == "__main__":
    sys.exit(main())
