"""The command line's parser: ``Parser`` (one-line errors with "did you mean", help read
lazily) and ``options_from``, the options dataclass of a parsed namespace. The flags themselves
are generated from the dataclass fields by ``crossalign.options.add_options``."""

from __future__ import annotations

import argparse
import re
import typing
from collections.abc import Iterable
from typing import Any

from crossalign.checks import choice_hint
from crossalign.options import build_options, fill_help


def options_from(
    ns: argparse.Namespace, cls: type, overrides: Iterable[str] = (), where: str = ""
) -> Any:
    """Dataclass ``cls`` from the parsed flags of ``add_options``, then ``key=value`` pairs
    (``crossalign.options.build_options`` of the namespace's values)."""
    return build_options(vars(ns), cls, overrides, where)


_DEEPEST = "_crossalign_parser"
_CHOICE = re.compile(r"invalid choice: '(.*?)' \(choose from (.*)\)$")


OVERRIDES = "overrides"
"""The dest of a command's trailing ``KEY=VALUE`` positional."""


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` whose errors are one line, ``crossalign: error: ...``, with "did you
    mean" for an unknown option or choice (argparse's prefix matching is kept), and whose
    options' help is read from their fields' docstrings only when it is printed."""

    crossalign_lazy_help = True

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(ns, _DEEPEST):
            setattr(ns, _DEEPEST, self)  # the subcommand whose options the extras missed
        return ns, extras

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = self.parse_known_args(args, namespace)
        deepest = vars(ns).pop(_DEEPEST, self)
        late = [x for x in extras if "=" in x and not x.startswith("-")]
        if late and isinstance(getattr(ns, OVERRIDES, None), list):
            # argparse fills a nargs="*" positional once: key=value pairs after options land here
            setattr(ns, OVERRIDES, [*getattr(ns, OVERRIDES), *late])
            extras = [x for x in extras if x not in late]
        if extras:
            deepest.error(f"unrecognized arguments: {' '.join(extras)}{deepest._hint(extras)}")
        return ns

    def _hint(self, extras: list[str]) -> str:
        """did-you-mean for the first unknown ``--option`` among ``extras``."""
        unknown = next((x for x in extras if x.startswith("--")), None)
        if unknown is None:
            return ""
        options = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        return choice_hint(unknown.partition("=")[0], options)

    def format_help(self) -> str:
        """The help, with each option's docstring read now."""
        fill_help(self)
        return super().format_help()

    def error(self, message: str) -> typing.NoReturn:
        """Print ``crossalign: error: MESSAGE`` (one line) and exit with status 2."""
        if match := _CHOICE.search(message):
            choices = re.findall(r"'(.*?)'", match.group(2))
            message += choice_hint(match.group(1), choices)
        self.exit(2, f"crossalign: error: {message} (see '{self.prog} --help')\n")
