"""``crossalign report RUN_DIR... --out DIR``: the results and training logs of runs as one
Markdown and one self-contained HTML page."""

from __future__ import annotations

import argparse


def _report(args: argparse.Namespace) -> int:
    from crossalign.errors import CrossalignError
    from crossalign.report import write_report

    if args.study:
        from crossalign.study.run import report_study
        from crossalign.study.spec import load_study

        overrides = [*args.run_dirs, *([f"out={args.out}"] if args.out else [])]
        result = report_study(load_study(args.study, overrides))
        print(f"wrote {result.report} and {result.report.with_suffix('.html')}")
        return 0
    if not args.run_dirs or not args.out:
        raise CrossalignError("report: give run directories and --out DIR, or --study FILE")
    paths = write_report(args.run_dirs, args.out, title=args.title, contrasts=args.contrast)
    print(f"wrote {paths.markdown}, {paths.html}, {paths.json} and {len(paths.figures)} figures")
    return 0


def _pair(text: str) -> tuple[str, str]:
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise argparse.ArgumentTypeError(f"'{text}' is not BASELINE,METHOD")
    return names[0], names[1]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``report`` command."""
    p = sub.add_parser(
        "report",
        help="render the results and training curves of runs as Markdown and HTML",
        description="Render the result records (results.jsonl) and training logs "
        "(metrics.jsonl) of runs as OUT/report.md, a self-contained OUT/report.html, "
        "OUT/report.json and OUT/figures/. Runs whose configs differ only in train.seed (also "
        "where a path names it: seed-{seed}) form one row: the mean ± the 95% t interval over "
        "the seeds.",
    )
    p.add_argument(
        "run_dirs",
        nargs="*",
        metavar="RUN_DIR",
        help="run directories (with --study: the study file's KEY=VALUE overrides)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="report directory (replaced as a whole; new, empty or a previous report); with "
        "--study, the study's directory (default: the file's 'out')",
    )
    p.add_argument(
        "--study",
        metavar="STUDY.yaml",
        help="report a study from the records its run directories hold (nothing trained or "
        "evaluated): tables, contrasts and its pre-registered hypotheses judged, written to "
        "OUT/report",
    )
    p.add_argument("--title", default=None, help="page title (default: crossalign report)")
    p.add_argument(
        "--contrast",
        type=_pair,
        action="append",
        default=[],
        metavar="BASELINE,METHOD",
        help="two groups (as the report names them): list the measures on which METHOD is "
        "better or worse than BASELINE beyond seed noise (Holm-adjusted Welch p < 0.05 over "
        "the report's tests), with Welch's p, Holm p and BH q; repeatable",
    )
    p.set_defaults(func=_report)
