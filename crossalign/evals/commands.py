"""``crossalign eval ...`` subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossalign.errors import CrossalignError


def parse_layers(spec: str) -> list[int] | None:
    """``all`` -> None (every layer); ``8`` -> [8]; ``0,4,8`` -> [0, 4, 8]."""
    if spec == "all":
        return None
    try:
        layers = sorted({int(x) for x in spec.split(",")})
    except ValueError:
        raise CrossalignError(
            f"--layers '{spec}' must be 'all', a layer (8) or a list (0,4,8)"
        ) from None
    return layers


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain-text table with left-aligned columns."""
    widths = [max(len(str(r[k])) for r in [headers, *rows]) for k in range(len(headers))]
    return "\n".join(
        "  ".join(f"{c:<{w}}" for c, w in zip(r, widths)).rstrip() for r in [headers, *rows]
    )


def _score_rows(scores: dict[str, dict[str, float]]) -> str:
    rows = [
        [name, *(f"{100 * s[k]:.2f}" for k in ("aer", "precision", "recall"))]
        for name, s in scores.items()
    ]
    return format_table(["", "AER", "P", "R"], rows)


def _aer(args: argparse.Namespace) -> int:
    from crossalign.evals.aer import aer_scores, read_pharaoh
    from crossalign.evals.gold import read_gold_links, read_testset
    from crossalign.fileio import write_json_atomic

    if args.pred and args.model:
        raise CrossalignError("give either --pred with --gold, or --model with --testset, not both")
    if args.pred:
        if not args.gold:
            raise CrossalignError("--pred needs --gold: a test-set folder or an alignv2.txt file")
        gold_path = Path(args.gold)
        if gold_path.is_dir():
            testset = read_testset(gold_path)
            lengths = [(len(s), len(t)) for s, t in zip(testset.src, testset.tgt)]
            pred = read_pharaoh(args.pred, lengths)
            gold = testset.gold
        else:
            pred = read_pharaoh(args.pred)
            gold = read_gold_links(gold_path, len(pred))
        scores = {Path(args.pred).name: aer_scores(pred, gold)}
    elif args.model:
        from crossalign.align.aligner import load_aligner
        from crossalign.align.commands import aligner_config

        if not args.testset:
            raise CrossalignError("--model needs --testset: a test-set folder such as de-en/")
        testset = read_testset(args.testset)
        layers = parse_layers(args.layers)
        languages = (testset.src_lang, testset.tgt_lang)
        aligner = load_aligner(args.model, aligner_config(args), layers, languages, args.device)
        if layers is None:
            layers = list(range(aligner.model.config.num_hidden_layers + 1))
        links = aligner.align(list(zip(testset.src, testset.tgt)), layers, progress=True)
        scores = {
            f"layer {x}": aer_scores([set(a) for a in links[x]], testset.gold) for x in layers
        }
        print(f"{testset.name}, {args.method}, {'joint' if args.joint else 'separate'} encoding")
    else:
        raise CrossalignError("give --pred with --gold, or --model with --testset")
    print(_score_rows(scores))
    if args.json:
        write_json_atomic(args.json, scores)
    return 0


def add_eval_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign eval`` with its actions: ``aer``, ``alignment-score``,
    ``transfer``, ``bli``, ``rsim``, ``layers``, ``retrieval``."""
    from crossalign.align.commands import add_aligner_arguments

    p = sub.add_parser("eval", help="evaluate models and outputs")
    actions = p.add_subparsers(dest="eval_command", required=True, metavar="EVALUATION")
    from crossalign.evals.derived_commands import add_derived_eval_parsers
    from crossalign.evals.lexicon_commands import add_lexicon_eval_parsers

    add_derived_eval_parsers(actions)
    add_lexicon_eval_parsers(actions)

    a = actions.add_parser(
        "aer",
        help="alignment error rate, precision and recall against gold word alignments",
        description="Score Pharaoh alignments (--pred) against gold sure/possible links "
        "(--gold), or align a test set with a model (--model, --testset) and score every "
        "layer of --layers. AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|). See docs/align.md.",
    )
    a.add_argument("--pred", metavar="FILE", help="predicted alignments, Pharaoh i-j lines")
    a.add_argument(
        "--gold",
        metavar="DIR_OR_FILE",
        help="a test-set folder <src>-<tgt>/ (test.<src>, test.<tgt>, alignv2.txt) or a "
        "'SENTID I J S|P' file",
    )
    a.add_argument("--testset", metavar="DIR", help="test-set folder to align with --model")
    a.add_argument(
        "--layers", default="8", help="layers to score with --model: all, 8 or 0,4,8 (default 8)"
    )
    add_aligner_arguments(a)
    a.add_argument("--json", metavar="FILE", help="also write the scores (fractions) as JSON")
    a.set_defaults(func=_aer)
