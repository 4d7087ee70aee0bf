"""How every ``--help`` reads: an option's default after its help where there is one to say, and the
``examples:`` block (``fuseprof.commands.examples``) kept line by line."""

from __future__ import annotations

import argparse


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
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


class HelpfulParser(argparse.ArgumentParser):
    """Every subcommand shows each option's default in --help."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)
