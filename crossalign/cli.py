"""The ``crossalign`` command: each subcommand parses arguments and calls the library."""

from __future__ import annotations

import argparse
import sys

from crossalign.errors import CrossalignError


def _train(args: argparse.Namespace) -> int:
    from crossalign.config import load_config
    from crossalign.train import train

    cfg = load_config(args.config, args.overrides)
    train(cfg, resume=args.resume, overwrite=args.overwrite)
    return 0


def _ls(args: argparse.Namespace) -> int:
    from crossalign.objectives import OBJECTIVES

    if args.what == "objectives":
        for name in OBJECTIVES.names():
            doc = (OBJECTIVES.get(name).__doc__ or "").strip().splitlines()[0]
            print(f"{name:<12} {doc}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used to render ``--help``)."""
    from crossalign.align.commands import add_align_parser
    from crossalign.cooc.commands import add_cooc_parser
    from crossalign.data.commands import add_data_parser
    from crossalign.evals.commands import add_eval_parser
    from crossalign.lexicon.commands import add_lexicon_parser
    from crossalign.models.commands import add_backbone_parser
    from crossalign.study_commands import add_study_parser

    parser = argparse.ArgumentParser(
        prog="crossalign",
        description="Pre-train multilingual masked-LM encoders with cross-lingual alignment "
        "objectives, and measure how well languages align inside them.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    add_data_parser(sub)

    p = sub.add_parser(
        "train",
        help="pre-train a masked-LM with the objectives of a config",
        description="Pre-train with the objectives of a YAML config. Any config key can be "
        "overridden as key=value (e.g. train.steps=200 objectives.1.weight=0.5).",
    )
    p.add_argument("--config", "-c", help="YAML run config (see configs/)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--resume",
        nargs="?",
        const="last",
        default=None,
        metavar="CHECKPOINT",
        help="continue from the last good checkpoint in run_dir (or from CHECKPOINT: later "
        "checkpoints are then moved to checkpoints/abandoned/)",
    )
    start.add_argument(
        "--overwrite",
        action="store_true",
        help="start again in a run_dir that already holds a run (deletes its files)",
    )
    p.set_defaults(func=_train)

    p = sub.add_parser("ls", help="list registered components")
    p.add_argument("what", choices=["objectives"], help="what to list")
    p.set_defaults(func=_ls)

    add_backbone_parser(sub)
    add_cooc_parser(sub)
    add_align_parser(sub)
    add_eval_parser(sub)
    add_lexicon_parser(sub)
    add_study_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``crossalign`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except CrossalignError as e:
        print(f"crossalign: error: {e}", file=sys.stderr)
        return 2
