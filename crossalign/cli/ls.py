"""``crossalign ls objectives|evaluations|backbones``: list registered components."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal

from crossalign.cli.generate import options_from
from crossalign.options import add_options

ARROWS = {True: " ↑", False: " ↓", None: ""}
"""How a metric's direction is shown: higher is better, lower is better, not ranked."""


@dataclass
class LsOptions:
    """``crossalign ls``."""

    what: Literal["objectives", "evaluations", "backbones"]
    """What to list."""


def _objectives() -> None:
    from crossalign.objectives import OBJECTIVES

    for name in OBJECTIVES.names():
        doc = (OBJECTIVES.get(name).__doc__ or "").strip().splitlines()[0]
        print(f"{name:<12} {doc}")


def _evaluations() -> None:
    from crossalign.evals.registry import evaluations

    registry = evaluations()
    for name in registry.names():
        evaluation = registry.get(name)
        metrics = ", ".join(
            f"{key}{ARROWS[m.higher_is_better]} ({m.unit})" for key, m in evaluation.metrics.items()
        )
        print(f"{name:<16} {evaluation.summary}")
        print(f"{'':<16} metrics: {metrics}")


def _ls(args: argparse.Namespace) -> int:
    from crossalign.cli.backbone import print_backbones

    what = options_from(args, LsOptions).what
    {"objectives": _objectives, "evaluations": _evaluations, "backbones": print_backbones}[what]()
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign ls``."""
    p = sub.add_parser("ls", help="list registered components (objectives, evaluations, backbones)")
    add_options(p, LsOptions, positional=["what"])
    p.set_defaults(func=_ls)
