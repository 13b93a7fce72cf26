"""``crossalign align``: word-align two line-aligned files with an encoder, Pharaoh output."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from crossalign.errors import CrossalignError

if TYPE_CHECKING:
    from crossalign.align.config import AlignConfig


def add_aligner_arguments(p: argparse.ArgumentParser) -> None:
    """The options shared by ``align`` and ``eval aer --model``: model, method and constants."""
    from crossalign.align.config import (
        METHODS,
        OT_FILTERS,
        SINKHORN_ORDERS,
        SUBWORD_MODES,
        AlignConfig,
    )

    d = AlignConfig()
    p.add_argument("--model", metavar="DIR", help="save_pretrained model + tokenizer directory")
    p.add_argument(
        "--method",
        choices=METHODS,
        default=d.method,
        help="ot: XLM-Align optimal transport + alignment filtering; itermax, argmax: SimAlign "
        f"on cosine similarity (default {d.method})",
    )
    enc = p.add_mutually_exclusive_group()
    enc.add_argument(
        "--joint",
        dest="joint",
        action="store_true",
        default=d.joint,
        help="encode each pair as one sequence [cls] src [sep] [cls] tgt [sep], positions "
        "restarting at the target (as TLM, XLM-Align)",
    )
    enc.add_argument(
        "--separate",
        dest="joint",
        action="store_false",
        help="encode each sentence on its own (as SimAlign; the default)",
    )
    p.add_argument(
        "--subwords",
        choices=SUBWORD_MODES,
        default=d.subwords,
        help="per-word: tokenize each word alone (SimAlign); word-ids: tokenize the sentence "
        f"and map with the fast tokenizer's word_ids() (default {d.subwords})",
    )
    p.add_argument(
        "--batch-size", type=int, default=d.batch_size, metavar="N", help="pairs per forward pass"
    )
    p.add_argument(
        "--sinkhorn-iters",
        type=int,
        default=d.sinkhorn_iters,
        metavar="N",
        help="Sinkhorn iterations (ot)",
    )
    p.add_argument(
        "--sinkhorn-order",
        choices=SINKHORN_ORDERS,
        default=d.sinkhorn_order,
        help="rows-first: XLM-Align Eq. 6 (default); columns-first: POT / the released aligner",
    )
    p.add_argument("--mu", type=float, default=d.mu, help="entropic regularisation μ (ot)")
    p.add_argument(
        "--ot-filter",
        choices=OT_FILTERS,
        default=d.ot_filter,
        help="links from the ot plan: iterative (XLM-Align Eq. 7-9, default), itermax "
        "(SimAlign's IterMax), union (forward ∪ backward argmax, no filtering)",
    )
    p.add_argument(
        "--filter-iters",
        type=int,
        default=d.filter_iters,
        metavar="N",
        help="rounds of alignment filtering (ot) / IterMax max_count (itermax); 1 = argmax only",
    )
    p.add_argument("--alpha", type=float, default=d.alpha, help="discount α of filtering/IterMax")
    p.add_argument(
        "--bf16",
        action="store_true",
        help="encoder in bfloat16 autocast (fast on GPUs, CPUs with AMX); links may change a bit",
    )
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")


def aligner_config(args: argparse.Namespace) -> AlignConfig:
    """The ``AlignConfig`` of parsed ``add_aligner_arguments`` options."""
    from crossalign.align.config import AlignConfig

    return AlignConfig(
        method=args.method,
        joint=args.joint,
        subwords=args.subwords,
        sinkhorn_iters=args.sinkhorn_iters,
        sinkhorn_order=args.sinkhorn_order,
        ot_filter=args.ot_filter,
        mu=args.mu,
        filter_iters=args.filter_iters,
        alpha=args.alpha,
        batch_size=args.batch_size,
        bf16=args.bf16,
    )


def parse_language_pair(spec: str | None) -> tuple[str, str] | None:
    """``de-en`` -> ("de", "en"); None stays None."""
    from crossalign.languages import check_language

    if spec is None:
        return None
    parts = spec.split("-")
    if len(parts) != 2:
        raise CrossalignError(f"--languages '{spec}' must be SRC-TGT, e.g. de-en")
    return check_language(parts[0], "--languages"), check_language(parts[1], "--languages")


def _align(args: argparse.Namespace) -> int:
    from crossalign.align.aligner import load_aligner
    from crossalign.align.words import format_pharaoh
    from crossalign.data.readers import iter_lines
    from crossalign.fileio import write_lines_atomic

    if not args.model:
        raise CrossalignError("--model DIR is required: a save_pretrained model directory")
    src = [text.split() for _, text in iter_lines(args.src_file)]
    tgt = [text.split() for _, text in iter_lines(args.tgt_file)]
    if len(src) != len(tgt):
        raise CrossalignError(
            f"{args.src_file} ({len(src)} lines) and {args.tgt_file} ({len(tgt)} lines) differ "
            f"in line count; they must be line-aligned"
        )
    cfg = aligner_config(args)
    languages = parse_language_pair(args.languages)
    aligner = load_aligner(args.model, cfg, [args.layer], languages, args.device)
    links = aligner.align(list(zip(src, tgt)), [args.layer], progress=True)[args.layer]
    lines = (format_pharaoh(x) for x in links)
    if args.output:
        write_lines_atomic(args.output, lines)
    else:
        sys.stdout.writelines(line + "\n" for line in lines)
    if warning := aligner.truncation_warning():
        print(warning, file=sys.stderr)
    return 0


def add_align_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign align``."""
    p = sub.add_parser(
        "align",
        help="word-align two line-aligned files with an encoder (Pharaoh i-j output)",
        description="Word-align the whitespace-tokenized sentences of SRC_FILE and TGT_FILE "
        "(line-aligned) from the hidden states of one layer of an encoder. Writes one line of "
        "sorted 0-based 'i-j' links per pair to stdout (or --output). A sentence longer than "
        "the model's positions hold (max_position_embeddings less the special tokens) is "
        "truncated to its first subwords: the words after them get no links, and a warning "
        "counts the pairs truncated. See docs/align.md.",
    )
    p.add_argument("src_file", metavar="SRC_FILE", help="source sentences, one per line")
    p.add_argument("tgt_file", metavar="TGT_FILE", help="target sentences, line-aligned")
    p.add_argument("--layer", type=int, default=8, help="hidden layer (0 = embeddings; default 8)")
    add_aligner_arguments(p)
    p.add_argument(
        "--languages",
        metavar="SRC-TGT",
        help="language codes of the two files, for a model trained with language embeddings",
    )
    p.add_argument("--output", "-o", metavar="FILE", help="write here (atomically), not stdout")
    p.set_defaults(func=_align)
