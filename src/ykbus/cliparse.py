"""The argument parser of every `ykbus` command: `--help` shows each option's default."""

from __future__ import annotations

import argparse
import copy


class DefaultsShown(argparse.HelpFormatter):
    """Appends `(default: X)` to an option that has a default and whose help does not
    already say it; options without help get one that is only their default."""

    def _format_action(self, action: argparse.Action) -> str:
        default = action.default
        shown = (action.option_strings and default is not None and default is not argparse.SUPPRESS
                 and not isinstance(default, bool) and default != [] and "default" not in (action.help or ""))
        if shown:
            action = copy.copy(action)
            action.help = f"{action.help} (default: %(default)s)" if action.help else "(default: %(default)s)"
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser with DefaultsShown; subcommands' parsers are Parsers too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)
