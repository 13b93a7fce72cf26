"""``crossalign backbone ...`` subcommands."""

from __future__ import annotations

import argparse


def add_backbone_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign backbone``."""
    p = sub.add_parser("backbone", help="import pretrained backbones from local packages")
    p.add_subparsers(dest="backbone_command", required=True, metavar="ACTION")
