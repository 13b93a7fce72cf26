"""``crossalign cooc build``: the global token co-occurrence matrix (``crossalign eval
cooc-compare`` analyses it)."""

from __future__ import annotations

import argparse

from crossalign.cli.generate import options_from
from crossalign.cooc.options import CoocBuildOptions
from crossalign.options import add_options


def _build(args: argparse.Namespace) -> int:
    from crossalign.cooc.build import build_from_options

    o = options_from(args, CoocBuildOptions)
    meta = build_from_options(o)
    total = sum(x["tokens"] for x in meta["languages"].values())
    seconds = meta["count_seconds"]
    for lang, x in meta["languages"].items():
        print(f"{lang}: {x['tokens']:,} tokens, {x['lines']:,} lines, scale {x['scale']:.4g}")
    print(
        f"counted {total:,} tokens in {seconds:.1f} s ({total / max(seconds, 1e-9):,.0f} "
        f"tokens/s); {meta['nnz']:,} stored entries (upper triangle), window {meta['window']}, "
        f"reference {meta['reference']}"
    )
    print(f"wrote {o.out} (see {o.out}/meta.json)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign cooc`` with its ``build`` action."""
    p = sub.add_parser(
        "cooc",
        help="global token co-occurrence matrix (MLM-GC)",
        description="Build the token co-occurrence matrix X that the mlm_gc objective "
        "regresses on (compare translated phrases with 'crossalign eval cooc-compare'). See "
        "docs/cooc.md.",
    )
    actions = p.add_subparsers(dest="cooc_command", required=True, metavar="ACTION")
    b = actions.add_parser(
        "build",
        help="count token co-occurrences of multilingual text into a sparse matrix",
        description="One streaming pass over the text: each line is tokenized with the given "
        "tokenizer, every pair of tokens at distance d <= --window in the same line adds "
        "1/(d+1) to X, and the counts of each language are scaled by c = C_ref / C_lang "
        "(tokens of the reference language over tokens of that language). X is symmetric "
        "and stored as its upper triangle in CSR arrays (memory-mapped on load).",
    )
    add_options(b, CoocBuildOptions)
    b.set_defaults(func=_build)
