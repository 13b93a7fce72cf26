"""``crossalign study derived``: the controlled derived-language study (``crossalign.study``)."""

from __future__ import annotations

import argparse


def _derived(args: argparse.Namespace) -> int:
    from crossalign.data.derive_commands import derive_command_line
    from crossalign.evals.derived_commands import finetune_config
    from crossalign.study import format_results, run_study

    objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    derived_out = f"{args.out}/derived"
    args_for_derive = argparse.Namespace(**{**vars(args), "out": derived_out})
    derive = {
        "corpora": args.corpus,
        "transform": args.transform,
        "overlap": args.overlap / 100.0,
        "dict_fraction": args.dict_fraction,
        "parallel_fraction": args.parallel_fraction,
        "tokenizer": args.tokenizer,
        "vocab_size": args.vocab_size,
        "max_lines": args.max_lines,
        "seed": args.seed,
        "n_valid": args.valid,
        "n_test": args.test,
    }
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
        derive,
        derive_command_line(args_for_derive),
        train,
        finetune_config(args),
        task=args.task,
        download=args.download,
        overrides=args.overrides,
    )
    print(f"\n{args.transform}, {args.task}: SUP / ZS / Δ accuracy (%), alignment score (%)\n")
    print(format_results(results["rows"], results["spearman_alignment_delta"]))
    print(f"\nwrote {args.out}/results.json and {args.out}/results.md")
    return 0


def add_study_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign study`` and its ``derived`` study."""
    from crossalign.data.derive_commands import add_derive_arguments
    from crossalign.evals.derived_commands import add_finetune_arguments
    from crossalign.study import STUDY_OBJECTIVES

    p = sub.add_parser("study", help="multi-run studies that reproduce a paper's comparison")
    studies = p.add_subparsers(dest="study_command", required=True, metavar="STUDY")
    s = studies.add_parser(
        "derived",
        help="objectives compared on English + a derived language: SUP, ZS, Δ, alignment",
        description="Derive a language from English (as crossalign data derive), pre-train one "
        "model per objective with the same budget and seed, score each model's alignment "
        "(crossalign eval alignment-score) and transfer (crossalign eval transfer), and report "
        "a table with the Spearman correlation between alignment and Δ. Writes OUT/derived/, "
        "OUT/configs/, OUT/runs/<objective>/, OUT/results.{json,md}; finished runs are reused.",
    )
    add_derive_arguments(s, out=False)
    s.add_argument("--out", required=True, help="study directory")
    s.add_argument(
        "--objectives",
        default=",".join(STUDY_OBJECTIVES),
        help=f"comma-separated, from {', '.join(STUDY_OBJECTIVES)} (all)",
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
