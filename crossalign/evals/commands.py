"""``crossalign eval ...`` subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crossalign.errors import CrossalignError
from crossalign.evals.gold import ID_RULES, READ_AS, GoldAlignments


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


def _gold_summary(name: str, gold: GoldAlignments, asked: str) -> str:
    """One line saying how the gold's sentence ids were read and how many sentences it has."""
    rule = f"ids read {READ_AS[gold.ids]} (--gold-ids {asked})"
    line = f"gold {name}: {len(gold.sure)} sentences, {rule}"
    unlinked = sum(not p for p in gold.possible)
    return f"{line}; {unlinked} without gold links" if unlinked else line


def _text_beside(gold_path: Path) -> tuple[Path, Path] | None:
    """``test.<l1>``, ``test.<l2>`` next to a links file in a test-set folder ``<l1>-<l2>/``."""
    from crossalign.evals.gold import testset_text

    text = testset_text(gold_path.parent)
    return text if text is not None and all(f.is_file() for f in text) else None


def _aer(args: argparse.Namespace) -> int:
    from crossalign.evals.aer import aer_scores, read_pharaoh
    from crossalign.evals.gold import read_gold_links, read_parallel, read_testset
    from crossalign.fileio import write_json_atomic

    if args.pred and args.model:
        raise CrossalignError("give either --pred with --gold, or --model with --testset, not both")
    if args.text and not (args.gold and Path(args.gold).is_file()):
        raise CrossalignError(
            "--text goes with a links file as --gold; a test-set folder has its own text files"
        )
    if args.pred:
        if not args.gold:
            raise CrossalignError("--pred needs --gold: a test-set folder or an alignv2.txt file")
        gold_path = Path(args.gold)
        name = gold_path.name
        if gold_path.is_dir():
            testset = read_testset(gold_path, args.gold_ids)
            lengths = [(len(s), len(t)) for s, t in zip(testset.src, testset.tgt)]
            pred = read_pharaoh(args.pred, lengths)
            gold = testset.gold
        elif text := args.text or _text_beside(gold_path):
            src, tgt = read_parallel(*text)
            lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
            gold = read_gold_links(gold_path, lengths, args.gold_ids)
            pred = read_pharaoh(args.pred, lengths)
            name = f"{name} on {Path(text[0]).name}, {Path(text[1]).name}"
        else:
            gold = read_gold_links(gold_path, ids=args.gold_ids)
            pred = read_pharaoh(args.pred)
            if len(pred) != len(gold.sure):
                raise CrossalignError(
                    f"{args.pred} has {len(pred)} lines but the gold {gold_path} has "
                    f"{len(gold.sure)} sentences when its ids are read {READ_AS[gold.ids]}; "
                    f"give the text files with --text SRC_FILE TGT_FILE, or the id rule with "
                    f"--gold-ids"
                )
            print(
                f"note: no test.<l1>, test.<l2> beside {gold_path} and no --text SRC_FILE "
                f"TGT_FILE: word positions of gold and predicted links are not checked",
                file=sys.stderr,
            )
        print(_gold_summary(name, gold, args.gold_ids))
        scores = {Path(args.pred).name: aer_scores(pred, gold)}
    elif args.model:
        from crossalign.align.aligner import load_aligner
        from crossalign.align.commands import aligner_config

        if not args.testset:
            raise CrossalignError("--model needs --testset: a test-set folder such as de-en/")
        testset = read_testset(args.testset, args.gold_ids)
        layers = parse_layers(args.layers)
        languages = (testset.src_lang, testset.tgt_lang)
        aligner = load_aligner(args.model, aligner_config(args), layers, languages, args.device)
        if layers is None:
            layers = list(range(aligner.model.config.num_hidden_layers + 1))
        links = aligner.align(list(zip(testset.src, testset.tgt)), layers, progress=True)
        if warning := aligner.truncation_warning():
            print(warning, file=sys.stderr)
        scores = {
            f"layer {x}": aer_scores([set(a) for a in links[x]], testset.gold) for x in layers
        }
        print(f"{testset.name}, {args.method}, {'joint' if args.joint else 'separate'} encoding")
        print(_gold_summary(testset.name, testset.gold, args.gold_ids))
    else:
        raise CrossalignError("give --pred with --gold, or --model with --testset")
    print(_score_rows(scores))
    if args.json:
        write_json_atomic(args.json, scores)
    return 0


def add_eval_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign eval`` with its actions: ``aer``, ``alignment-score``,
    ``transfer``, ``bli``, ``induced-dict``, ``rsim``, ``layers``, ``retrieval``."""
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
        "'SENTID I J S|P' file (checked against the test.<l1>, test.<l2> beside it in a "
        "folder <l1>-<l2>/, or against --text)",
    )
    a.add_argument(
        "--text",
        nargs=2,
        metavar=("SRC_FILE", "TGT_FILE"),
        help="with a links file as --gold: its line-aligned sentences, so the sentence count "
        "and every link's word positions are checked",
    )
    a.add_argument(
        "--gold-ids",
        choices=ID_RULES,
        default="auto",
        help="how the gold's sentence ids map to sentences: zero (0-based), one (1-based), rank "
        "(k-th smallest id is sentence k), auto (zero or one for exactly 0..n-1 or 1..n, rank "
        "otherwise; refuses ids that do not cover every sentence of the text; the default)",
    )
    a.add_argument("--testset", metavar="DIR", help="test-set folder to align with --model")
    a.add_argument(
        "--layers", default="8", help="layers to score with --model: all, 8 or 0,4,8 (default 8)"
    )
    add_aligner_arguments(a)
    a.add_argument("--json", metavar="FILE", help="also write the scores (fractions) as JSON")
    a.set_defaults(func=_aer)
