"""``crossalign compare STUDY.yaml``: run a study file's comparison and write its report."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossalign.options import seed_list


def _compare(args: argparse.Namespace) -> int:
    from crossalign.errors import CrossalignError
    from crossalign.study.run import run_study
    from crossalign.study.spec import load_study, select_runs

    overrides = list(args.overrides)
    records_dir = Path(args.records) if args.records else None
    if args.out:
        overrides.append(f"out={args.out}")
    if args.prepare_only:
        flags = {"--dry-run": args.dry_run, "--seeds": args.seeds, "--jobs": args.jobs > 1,
                 "--records": args.records,
                 "--prune-checkpoints": args.prune_checkpoints}  # fmt: skip
        given = [flag for flag, value in flags.items() if value]
        if given:
            raise CrossalignError(f"--prepare-only trains and evaluates nothing; drop {given[0]}")
    if args.jobs > 1 and not args.dry_run:
        if args.seeds is not None:
            raise CrossalignError("--jobs runs every seed in its own process; drop --seeds")
        from crossalign.study.parallel import run_parallel

        page = run_parallel(
            args.study,
            overrides,
            args.jobs,
            args.runs,
            not args.no_report,
            records_dir,
            args.prune_checkpoints,
        )
        if page is not None:
            print(f"wrote {page} and {page.with_suffix('.html')}")
        return 0
    study = select_runs(load_study(args.study, overrides), args.runs)
    if args.prepare_only:
        run_study(study, report=False, prepare_only=True)
        print(f"prepared {study.out}: every derived corpus and prepare output")
        return 0
    result = run_study(
        study,
        report=not args.no_report,
        dry_run=args.dry_run,
        seeds=args.seeds,
        records_dir=records_dir,
        prune_checkpoints=args.prune_checkpoints,
    )
    if args.dry_run:
        return 0
    print(f"{len(result.runs)} runs in {study.out}")
    if result.report is not None:
        print(f"wrote {result.report} and {result.report.with_suffix('.html')}")
    return 0


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of processes (1 or more)")
    return int(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign compare``."""
    p = sub.add_parser(
        "compare",
        help="train and evaluate a study file's runs at equal budget, then report",
        description="Run a study file (configs/studies/*.yaml): for every matrix cell, run and "
        "seed, derive the corpus it names, train the run (reused when its run_dir holds a "
        "finished run of the same config, resumed when it holds checkpoints), run the "
        "evaluations (reused when RUN/results.jsonl holds the same measurement), then write "
        "OUT/report/report.{md,html}. Study keys can be overridden as key=value "
        "(e.g. seeds=[0,1,2] vars.steps=2000).",
    )
    p.add_argument("study", metavar="STUDY.yaml", help="the study file")
    p.add_argument("--out", help="study directory (default: the file's 'out')")
    p.add_argument(
        "--runs",
        type=_names,
        metavar="NAME,...",
        help="run only these runs, in this order (default: every run not marked optional)",
    )
    p.add_argument(
        "--seeds",
        type=seed_list,
        metavar="N,...",
        help="run only these of the study's seeds, in the directories the whole study gives "
        "them, and write no report (e.g. one process per seed; then run without --seeds for "
        "the report)",
    )
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="train and evaluate the runs in N processes at once (one per seed and run, or "
        "per seed where one of its runs continues from another; e.g. small models sharing a "
        "GPU under CUDA MPS), each with cores/N CPU threads: shared steps and runs first, "
        "then the seeds' runs, then the report; each process's log in OUT/logs/",
    )
    p.add_argument("--no-report", action="store_true", help="train and evaluate only")
    p.add_argument(
        "--records",
        metavar="DIR",
        help="also keep each run's records (config.yaml, results.jsonl, metrics.jsonl and "
        "the digests model.sha256/start.sha256; no models) in DIR, at their place under the "
        "study directory, as each run is measured, and start from the records DIR holds for "
        "run directories that have none: a study longer than the machine keeps its files goes "
        "on where it stopped (e.g. commit docs/studies/NAME/records between sessions)",
    )
    p.add_argument(
        "--prune-checkpoints",
        action="store_true",
        help="delete a trained run's checkpoints once its model is saved and every evaluation "
        "of it recorded (they are what --resume needs, and a continued e5-small checkpoint "
        "takes 1.8 GB); checkpoints something of the study names (a run's model.path or "
        "evaluation options, a prepare step; runs left out by --runs too) are kept, those "
        "another study or a script reads are not. To measure a pruned run at a new checkpoint "
        "step, delete its model/ to train it again",
    )
    p.add_argument(
        "--prepare-only",
        action="store_true",
        help="make every derived corpus and prepare output, nothing more (e.g. on a CPU "
        "machine before the runs go to a GPU machine)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the study and print each step and run with what would be done; do nothing",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="study-file overrides")
    p.set_defaults(func=_compare)
