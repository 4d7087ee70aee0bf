"""The ``fuseprof`` command: builds its parser from the command table (``fuseprof.commands``) and
turns the toolkit's named errors into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fuseprof import __version__
from fuseprof.commands import COMMANDS
from fuseprof.commands.examples import epilog
from fuseprof.errors import FuseprofError
from fuseprof.output_paths import check_outputs


class _DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """An option's default after its help, where there is one to say: not "(default: None)" or "(default:
    False)", nor a second time where the help already says its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action) or text

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """The ``examples:`` block (``fuseprof.commands.examples``) line by line as written; other text wrapped."""
        if text.startswith("examples:\n"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _HelpfulParser(argparse.ArgumentParser):
    """Every subcommand shows each option's default in --help."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, one subparser per row of ``COMMANDS``."""
    parser = argparse.ArgumentParser(
        prog="fuseprof", formatter_class=_DefaultsShown,
        description="Measure what fusing GPU kernels buys: capture kernels with torch.profiler and Nsight "
                    "Compute into trace bundles, read traces you already have, and compare fused with unfused.")
    parser.add_argument("--version", action="version", version=f"fuseprof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_HelpfulParser)
    for command in COMMANDS.values():
        p = sub.add_parser(command.name, help=command.help, description=command.description or command.help,
                           epilog=epilog(command.name))
        if command.arguments is not None:
            command.arguments(p)
    return parser


def _warn_in_one_line(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
    print(f"fuseprof: warning: {message}", file=sys.stderr)


def _terminated(signum, frame):  # type: ignore[no-untyped-def]
    raise KeyboardInterrupt  # unwinds like Ctrl-C: half-written bundles and temporary files are removed


def main(argv: Sequence[str] | None = None) -> int:
    """The command's exit status; everything it prints passes through ``fuseprof.console.terminal_streams``
    (control characters escaped, a reader that goes away leaves the status as the command made it)."""
    from fuseprof.console import terminal_streams

    with terminal_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    import signal
    import threading
    import warnings

    try:  # an input path that names nothing, or another tool's file, is said before any heavy import
        args = build_parser().parse_args(argv)
    except FuseprofError as exc:
        print(f"fuseprof: error: {exc}", file=sys.stderr)
        return exc.exit_code
    warnings.showwarning = _warn_in_one_line
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    command = COMMANDS[args.command]
    try:
        check_outputs(args)  # an output never replaces an input, whatever the flags
        if command.kept is not None and command.kept(args):
            from fuseprof.commands.answers import answered

            return answered(list(argv) if argv is not None else sys.argv[1:], args, lambda: command.run(args))
        return command.run(args)
    except FuseprofError as exc:
        print(f"fuseprof: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as exc:  # an optional package of an extra this install lacks: one line naming it
        from fuseprof.errors import missing_extra

        missing = missing_extra(exc, f"fuseprof {args.command}")
        if missing is None:
            raise
        print(f"fuseprof: error: {missing}", file=sys.stderr)
        return missing.exit_code
    except KeyboardInterrupt:
        from fuseprof.bundle.files import remove_unfinished

        remove_unfinished()
        print("fuseprof: interrupted", file=sys.stderr)
        return 130
    except MemoryError:  # the trace outgrew the memory the process may use (ulimit -v, a container's limit)
        from fuseprof.bundle.files import remove_unfinished

        remove_unfinished()
        print(f"fuseprof: error: {args.command}: out of memory (the limit this process runs under, or the machine's); "
              "read fewer traces at once, a --window of fewer steps, or run where more memory is free", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
