"""The ``crossalign`` command. Each ``crossalign.cli.<name>`` module registers its subcommands
with ``add_parser(sub)``; building the parser imports no torch (tests/unit/test_cli_startup.py)."""

from __future__ import annotations

import importlib
import sys

from crossalign.cli.generate import Parser
from crossalign.errors import CrossalignError

COMMAND_MODULES = (
    "data",
    "train",
    "align",
    "symmetrize",
    "cooc",
    "backbone",
    "evaluate",
    "lexicon",
    "study",
    "compare",
    "report",
    "ls",
)
"""The modules under ``crossalign.cli`` that register subcommands, in ``--help`` order."""


def build_parser() -> Parser:
    """The full argument parser (also used to render ``--help``)."""
    parser = Parser(
        prog="crossalign",
        description="Pre-train multilingual masked-LM encoders with cross-lingual alignment "
        "objectives, and measure how well languages align inside them.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"crossalign.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``crossalign`` console script; returns the exit status."""
    try:  # a ``parse`` function of an option may raise too
        args = build_parser().parse_args(argv)
        return args.func(args) or 0
    except CrossalignError as e:
        print(f"crossalign: error: {e}", file=sys.stderr)
        return 2
