"""``crossalign align``: word-align two line-aligned files with an encoder, Pharaoh output."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from crossalign.align.config import AlignConfig, parse_language_pair
from crossalign.cli.generate import add_options, opt, options_from
from crossalign.errors import CrossalignError


@dataclass
class AlignFiles:
    """What ``crossalign align`` aligns, with which model, and where the links go."""

    src_file: str = opt(metavar="SRC_FILE", help="source sentences, one per line")
    tgt_file: str = opt(metavar="TGT_FILE", help="target sentences, line-aligned")
    layer: int = 8
    """Hidden layer (0 = embeddings)."""
    model: str | None = opt(None, metavar="DIR", help="save_pretrained model + tokenizer directory")
    device: str | None = None
    """Torch device (default: cuda if available, else cpu)."""
    languages: tuple[str, str] | None = opt(None, parse=parse_language_pair, metavar="SRC-TGT")
    """Language codes of the two files, for a model trained with language embeddings."""
    output: str | None = opt(None, short="-o", metavar="FILE")
    """Write here (atomically), not stdout."""


def _align(args: argparse.Namespace) -> int:
    from crossalign.align.files import align_files
    from crossalign.fileio import write_lines_atomic

    o, cfg = options_from(args, AlignFiles), options_from(args, AlignConfig)
    if not o.model:
        raise CrossalignError("--model DIR is required: a save_pretrained model directory")
    lines, warning = align_files(
        o.src_file, o.tgt_file, o.model, cfg, o.layer, o.languages, o.device
    )
    if o.output:
        write_lines_atomic(o.output, lines)
    else:
        sys.stdout.writelines(line + "\n" for line in lines)
    if warning:
        print(warning, file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    add_options(p, AlignFiles, positional=["src_file", "tgt_file"])
    add_options(p, AlignConfig)
    p.set_defaults(func=_align)
