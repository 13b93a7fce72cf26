"""``crossalign eval NAME``: one subcommand per registered evaluation
(``crossalign.evals.catalog``), its flags generated from the evaluation's options dataclass.
Each run prints the evaluation's notes and its table and appends one result record."""

from __future__ import annotations

import argparse

from crossalign.cli.generate import options_from
from crossalign.options import add_options


def _eval(args: argparse.Namespace) -> int:
    from crossalign.evals.registry import evaluations
    from crossalign.evals.results import RecordNotWritten, run_evaluation
    from crossalign.fileio import check_writable, write_json_atomic
    from crossalign.report.tables import evaluation_table

    evaluation = evaluations().get(args.evaluation)
    opts = options_from(args, evaluation.options, args.overrides, f"eval {evaluation.name}")
    results = False if args.no_results else args.results
    model = getattr(args, "model", None)
    if args.json:
        check_writable(args.json, "--json")  # before the model loads
    not_written = None
    try:
        record, out = run_evaluation(evaluation, model, opts, results=results)
    except RecordNotWritten as e:  # the result is shown all the same, then the error
        record, out, not_written = e.record, e.output, e
    for note in out.notes:
        print(note)
    print(evaluation_table(evaluation, record.metrics), flush=True)
    if args.json:
        write_json_atomic(args.json, out.legacy if out.legacy is not None else record.metrics)
    if not_written is not None:
        raise not_written
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign eval`` with one action per registered evaluation."""
    from crossalign.evals.registry import evaluations

    p = sub.add_parser(
        "eval",
        help="evaluate models and outputs (crossalign ls evaluations)",
        description="Run one registered evaluation: it prints its notes and a table of its "
        "metrics, and appends a result record {eval, model, options, metrics, versions, "
        "time} to RUN/results.jsonl (a run's model), MODEL/results.jsonl, or beside --out / "
        "--pred for evaluations without a model. Options can also be given as key=value.",
    )
    actions = p.add_subparsers(dest="eval_command", required=True, metavar="EVALUATION")
    registry = evaluations()
    for name in registry.names():
        evaluation = registry.get(name)
        a = actions.add_parser(
            name, help=evaluation.summary, description=evaluation.options.__doc__.replace("``", "")
        )
        if evaluation.model != "none":
            a.add_argument(
                "--model",
                required=evaluation.model == "required",
                metavar="DIR",
                help="a save_pretrained model directory, a run directory (its model/) or a "
                "Hugging Face hub id (from the local cache when HF_HUB_OFFLINE=1)",
            )
        add_options(a, evaluation.options)
        record = a.add_mutually_exclusive_group()
        record.add_argument(
            "--results",
            metavar="FILE",
            help="append the result record here (default: RUN/results.jsonl of a run's model, "
            "else MODEL/results.jsonl, or beside --out/--pred)",
        )
        record.add_argument("--no-results", action="store_true", help="write no result record")
        a.add_argument("--json", metavar="FILE", help="also write the evaluation's scores as JSON")
        a.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="options as key=value")
        a.set_defaults(func=_eval, evaluation=name)
