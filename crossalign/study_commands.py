"""``crossalign study derived``: the controlled derived-language study (``crossalign.study``)."""

from __future__ import annotations

import argparse


def _derived(args: argparse.Namespace) -> int:
    from crossalign.data.derive_settings import DeriveSettings
    from crossalign.evals.derived_commands import finetune_config
    from crossalign.study import format_results, run_study

    objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    transforms = [t.strip() for t in args.transform.split(",") if t.strip()]
    derives = []
    for transform in transforms:
        settings = DeriveSettings.from_args(args, transform)
        derives.append((settings, settings.command_line(f"{args.out}/{transform}/derived")))
    train = {
        "preset": args.preset,
        "steps": args.steps,
        "batch_size": args.train_batch_size,
        "lr": args.train_lr,
        "max_length": args.train_max_length,
        "seed": args.seed,
    }
    results = run_study(
        args.out,
        objectives,
        derives,
        train,
        finetune_config(args),
        task=args.task,
        download=args.download,
        overrides=args.overrides,
    )
    print(f"\n{args.task}: SUP / ZS / Δ word accuracy, Δ macro-F1, alignment scores (%)\n")
    print(format_results(results["rows"], results["spearman_alignment_delta"]))
    print(f"\nwrote {args.out}/results.json and {args.out}/results.md")
    return 0


def add_study_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign study`` and its ``derived`` study."""
    from crossalign.data.derive_commands import add_derive_arguments
    from crossalign.evals.derived_commands import add_finetune_arguments
    from crossalign.study import STUDY_OBJECTIVES, VARIANT_OBJECTIVES

    p = sub.add_parser("study", help="multi-run studies that reproduce a paper's comparison")
    studies = p.add_subparsers(dest="study_command", required=True, metavar="STUDY")
    s = studies.add_parser(
        "derived",
        help="objectives compared on English + derived languages: SUP, ZS, Δ, alignment",
        description="For each transform, derive a language from English (as crossalign data "
        "derive), pre-train one model per objective with the same budget and seed, score each "
        "model's alignment (crossalign eval alignment-score) and transfer (crossalign eval "
        "transfer); report a table with the Spearman correlation (and p-value) between "
        "alignment and Δ over every objective x transform point. Writes "
        "OUT/<transform>/{derived,configs,runs/<objective>}/ and OUT/results.{json,md}; "
        "finished runs are reused.",
    )
    add_derive_arguments(
        s,
        out=False,
        transform_help="comma-separated derived languages, each trans or a composition with "
        "it, e.g. trans,trans+inv,trans+syn",
    )
    s.add_argument("--out", required=True, help="study directory")
    s.add_argument(
        "--objectives",
        default=",".join(STUDY_OBJECTIVES),
        help=f"comma-separated, from {', '.join(STUDY_OBJECTIVES + VARIANT_OBJECTIVES)} "
        f"(default {','.join(STUDY_OBJECTIVES)}; mlm_lang: MLM with language embeddings)",
    )
    s.add_argument("--preset", default="small", help="model size preset (small)")
    s.add_argument("--steps", type=int, default=1000, help="optimizer steps per objective (1000)")
    s.add_argument(
        "--train-batch-size", type=int, default=32, help="sequences per objective per step (32)"
    )
    s.add_argument("--train-lr", type=float, default=5e-4, help="pre-training peak lr (5e-4)")
    s.add_argument(
        "--train-max-length", type=int, default=128, help="tokens per MLM sequence (128)"
    )
    add_finetune_arguments(s)
    s.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="run-config overrides applied to every pre-training (e.g. train.lr=3e-4)",
    )
    s.set_defaults(func=_derived)
