"""``crossalign induce-dict``: a token dictionary induced from a model's own embeddings."""

from __future__ import annotations

import argparse

from crossalign.cli.generate import options_from
from crossalign.options import add_options


def _induce(args: argparse.Namespace) -> int:
    from crossalign.lexicon.induce import induce_dictionary
    from crossalign.lexicon.options import InduceOptions

    o = options_from(args, InduceOptions, where="induce-dict")
    done = induce_dictionary(o)
    result = done.induction
    print(
        f"language-specific vocabularies: {o.src} {len(result.src_vocab)}, {o.tgt} "
        f"{len(result.tgt_vocab)} tokens (frequency > {o.threshold}, at most "
        f"{o.other_max} in the other language)"
    )
    print(
        f"wrote {done.forward_lines} {o.src}->{o.tgt} translations to {o.out} "
        f"({result.seconds:.1f} s)"
    )
    if done.backward_lines is not None:
        print(f"wrote {done.backward_lines} {o.tgt}->{o.src} translations to {o.backward}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign induce-dict``."""
    from crossalign.lexicon.options import InduceOptions

    p = sub.add_parser(
        "induce-dict",
        help="induce a token dictionary from a model's embeddings (CSLS)",
        description="Build the language-specific vocabularies of two languages (tokens with "
        "frequency > --threshold in one language's text and at most --other-max in the "
        "other's; the paper's 100 and 100 by default), then translate every source token to "
        "its CSLS-nearest target token (K = --k) using the embedding layer (--layer 0) or a "
        "layer's hidden states averaged over the token's occurrences in the text. Writes "
        "MUSE lines 'src tgt score', best first. See docs/lexicon.md.",
    )
    add_options(p, InduceOptions)
    p.set_defaults(func=_induce)
