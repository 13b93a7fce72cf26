"""``crossalign induce-dict``: a token dictionary induced from a model's own embeddings."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from crossalign.errors import CrossalignError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from crossalign.lexicon.induce import Induction


def read_language_text(
    corpus: str | None, files: list[str] | None, lang: str, limit: int
) -> list[str]:
    """Up to ``limit`` lines of ``lang``: the given files, else the train files of ``lang`` in
    a built corpus directory (every pair it occurs in), exact duplicates read once."""
    from crossalign.data.corpus import resolve_corpus
    from crossalign.data.readers import read_mono

    if files:
        lines = read_mono(files)
    elif corpus:
        found = resolve_corpus(corpus)["mono"]
        if lang not in found:
            raise CrossalignError(
                f"corpus {corpus} has no language '{lang}'; it has: {', '.join(sorted(found))}"
            )
        lines = read_mono(found[lang])
    else:
        raise CrossalignError(
            f"no text for '{lang}': give --corpus DIR, or --src-text and --tgt-text FILE..."
        )
    return lines[:limit]


def induce_with_args(
    args: argparse.Namespace,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    src: str,
    tgt: str,
) -> Induction:
    """``induce_from_model`` on the text and options of a parsed command (``--corpus`` or
    ``--src-text``/``--tgt-text``, ``--layer``, ``--threshold``, ``--other-max``, ``--k``,
    ``--context-sentences`` and, where the command has it, ``--backend``). The two languages
    must differ: each one's vocabulary is the tokens the other does not use."""
    from crossalign.lexicon.induce import induce_from_model

    if src.lower() == tgt.lower():
        raise CrossalignError(
            f"--src and --tgt are the same language ({src}); a dictionary translates between "
            f"two languages, e.g. --src en --tgt de"
        )
    extra = {"backend": args.backend} if hasattr(args, "backend") else {}
    return induce_from_model(
        model,
        tokenizer,
        read_language_text(args.corpus, args.src_text, src, args.max_sentences),
        read_language_text(args.corpus, args.tgt_text, tgt, args.max_sentences),
        src,
        tgt,
        layer=args.layer,
        threshold=args.threshold,
        other_max=args.other_max,
        k=args.k,
        context_sentences=args.context_sentences,
        progress=True,
        **extra,
    )


def _induce(args: argparse.Namespace) -> int:
    from crossalign.fileio import write_lines_atomic
    from crossalign.lexicon.embed import load_masked_lm

    for flag, out in (("--out", args.out), ("--backward", args.backward)):
        if out and Path(out).is_dir():
            raise CrossalignError(
                f"{flag} {out} is a directory; give a file path, e.g. "
                f"{Path(out) / f'{args.src}-{args.tgt}.txt'}"
            )
    model, tokenizer = load_masked_lm(args.model, args.device)
    result = induce_with_args(args, model, tokenizer, args.src, args.tgt)
    n = write_lines_atomic(args.out, result.forward.lines(tokenizer))
    print(
        f"language-specific vocabularies: {args.src} {len(result.src_vocab)}, {args.tgt} "
        f"{len(result.tgt_vocab)} tokens (frequency > {args.threshold}, at most "
        f"{args.other_max} in the other language)"
    )
    print(f"wrote {n} {args.src}->{args.tgt} translations to {args.out} ({result.seconds:.1f} s)")
    if args.backward:
        m = write_lines_atomic(args.backward, result.backward.lines(tokenizer))
        print(f"wrote {m} {args.tgt}->{args.src} translations to {args.backward}")
    return 0


def add_vocabulary_arguments(p: argparse.ArgumentParser) -> None:
    """``--threshold``, ``--other-max`` (the language-specific vocabularies, the paper's 100
    and 100 by default) and ``--max-sentences`` (lines counted per language)."""
    p.add_argument(
        "--threshold", type=int, default=100, help="frequency above which a token counts (100)"
    )
    p.add_argument(
        "--other-max", type=int, default=100, help="max count in the other language (100)"
    )
    p.add_argument(
        "--max-sentences", type=int, default=200_000, help="lines of text read per language"
    )


def add_lexicon_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign induce-dict``."""
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
    p.add_argument("--model", required=True, metavar="DIR", help="save_pretrained masked-LM")
    p.add_argument("--src", required=True, metavar="LANG", help="source language, e.g. en")
    p.add_argument("--tgt", required=True, metavar="LANG", help="target language, e.g. de")
    p.add_argument("--corpus", metavar="DIR", help="built corpus (crossalign data ...): train text")
    p.add_argument("--src-text", nargs="+", metavar="FILE", help="source text instead of --corpus")
    p.add_argument("--tgt-text", nargs="+", metavar="FILE", help="target text instead of --corpus")
    p.add_argument("--out", required=True, metavar="FILE", help="output dictionary (MUSE)")
    p.add_argument("--backward", metavar="FILE", help="also write the tgt->src dictionary here")
    p.add_argument("--layer", type=int, default=0, help="0 = embedding layer (default), 1..L")
    add_vocabulary_arguments(p)
    p.add_argument("--k", type=int, default=10, help="CSLS neighbourhood size (10)")
    p.add_argument(
        "--context-sentences",
        type=int,
        default=2000,
        help="lines per language whose hidden states are averaged (layers >= 1; 2000)",
    )
    p.add_argument(
        "--backend", default="auto", choices=["auto", "torch", "faiss"], help="CSLS search"
    )
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    p.set_defaults(func=_induce)


def default_pair(path: str | Path) -> tuple[str, str] | None:
    """(src, tgt) from a dictionary's directory name ``<src>-<tgt>`` (``data/freedict/en-de``)."""
    name = Path(path).parent.name
    if "-" in name:
        src, tgt = name.split("-", 1)
        return src, tgt
    return None
