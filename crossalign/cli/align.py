"""``crossalign align``: word-align sentence pairs with an encoder, Pharaoh output, streamed."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from crossalign.align.config import AlignConfig, parse_language_pair
from crossalign.cli.generate import options_from
from crossalign.errors import CrossalignError
from crossalign.options import add_options, opt


@dataclass
class AlignFiles:
    """What ``crossalign align`` aligns, with which model, and where the links go."""

    src_file: str | None = opt(None, metavar="SRC_FILE", help="source sentences, one per line")
    tgt_file: str | None = opt(None, metavar="TGT_FILE", help="target sentences, line-aligned")
    input: str | None = opt(None, metavar="FILE")
    """Read 'source ||| target' lines from FILE ('-': stdin) instead of SRC_FILE TGT_FILE."""
    layer: int = 8
    """Hidden layer (0 = embeddings)."""
    model: str | None = opt(None, metavar="DIR")
    """save_pretrained model + tokenizer directory, a run directory (its model/) or a hub id."""
    device: str | None = None
    """Torch device (default: cuda if available, else cpu)."""
    languages: tuple[str, str] | None = opt(None, parse=parse_language_pair, metavar="SRC-TGT")
    """Language codes of the two sides, for a model trained with language embeddings."""
    out: str = opt("-", short="-o", metavar="FILE")
    """Pharaoh i-j lines: a file (written atomically) or - for stdout."""
    output_prob: str | None = opt(None, metavar="FILE")
    """Also write each link's score, 'i-j:score' per link (ot: transport plan entry; softmax,
    argmax, itermax: mean of the two directional softmax probabilities)."""
    output_words: str | None = opt(None, metavar="FILE")
    """Also write the linked words, 'src_word<sep>tgt_word' per link (awesome-align's format)."""


def _align(args: argparse.Namespace) -> int:
    from crossalign.align.files import AlignOutputs, align_files, read_pair_file, read_two_files

    o, cfg = options_from(args, AlignFiles), options_from(args, AlignConfig)
    if not o.model:
        raise CrossalignError(
            "--model DIR is required: a save_pretrained model directory or a run directory"
        )
    if o.input is not None and (o.src_file or o.tgt_file):
        raise CrossalignError("give either --input FILE or SRC_FILE TGT_FILE, not both")
    if o.input is None and not (o.src_file and o.tgt_file):
        raise CrossalignError("give SRC_FILE TGT_FILE, or --input FILE of 'src ||| tgt' lines")
    outputs = AlignOutputs(o.out, o.output_prob, o.output_words)
    outputs.check()  # before the inputs are read through and the model loads
    pairs = read_pair_file(o.input) if o.input else read_two_files(o.src_file, o.tgt_file)
    _, warning = align_files(pairs, o.model, cfg, outputs, o.layer, o.languages, o.device)
    if warning:
        print(warning, file=sys.stderr)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign align``."""
    p = sub.add_parser(
        "align",
        help="word-align sentence pairs with an encoder (Pharaoh i-j output)",
        description="Word-align whitespace-tokenized sentence pairs, from SRC_FILE and TGT_FILE "
        "(line-aligned) or from --input FILE of 'src ||| tgt' lines ('-': stdin), with the "
        "hidden states of one layer of an encoder. Writes one line of sorted 0-based 'i-j' "
        "links per pair to stdout (or --out FILE), a chunk of pairs at a time, so memory stays "
        "bounded on large files. A sentence longer than the model's positions hold "
        "(max_position_embeddings less the special tokens) is truncated to its first subwords: "
        "the words after them get no links, and a warning counts the pairs truncated. See "
        "docs/align.md.",
    )
    add_options(p, AlignFiles, positional=["src_file", "tgt_file"])
    add_options(p, AlignConfig)
    p.set_defaults(func=_align)
