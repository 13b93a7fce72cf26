"""``crossalign train``: pre-train with the objectives of a run config."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from crossalign.cli.generate import options_from
from crossalign.options import add_options, opt


@dataclass
class TrainOptions:
    """``crossalign train``."""

    config: str | None = opt(None, short="-c", help="YAML run config (see configs/)")
    overrides: list[str] = opt([], metavar="KEY=VALUE", help="config overrides")
    resume: str | None = opt(None, nargs="?", const="last", metavar="CHECKPOINT", exclusive="start")
    """Continue from the last good checkpoint in run_dir (or from CHECKPOINT: later checkpoints
    are then moved to checkpoints/abandoned/)."""
    overwrite: bool = opt(False, exclusive="start")
    """Start again in a run_dir that already holds a run (deletes its files)."""


def _train(args: argparse.Namespace) -> int:
    from crossalign.config import load_config
    from crossalign.training.loop import train

    o = options_from(args, TrainOptions)
    train(load_config(o.config, o.overrides), resume=o.resume, overwrite=o.overwrite)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign train``."""
    p = sub.add_parser(
        "train",
        help="pre-train a masked-LM with the objectives of a config",
        description="Pre-train with the objectives of a YAML config. Any config key can be "
        "overridden as key=value (e.g. train.steps=200 objectives.1.weight=0.5).",
    )
    add_options(p, TrainOptions, positional=["overrides"])
    p.set_defaults(func=_train)
