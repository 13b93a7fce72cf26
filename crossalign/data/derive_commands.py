"""``crossalign data derive``: write a derived-language corpus (see ``crossalign.data.derive``)."""

from __future__ import annotations

import argparse
import shlex


def _fraction(text: str) -> float:
    """argparse type: a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a fraction such as 0.25, got '{text}'"
        ) from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {value}")
    return value


def _percent(text: str) -> float:
    """argparse type: a percentage in [0, 100]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a percentage such as 10, got '{text}'"
        ) from None
    if not 0.0 <= value <= 100.0:
        raise argparse.ArgumentTypeError(f"expected a percentage in [0, 100], got {value}")
    return value


def derive_command_line(args: argparse.Namespace) -> str:
    """The ``crossalign data derive`` command that writes what ``args`` describe."""
    words = ["crossalign", "data", "derive", "--transform", args.transform]
    for corpus in args.corpus:
        words += ["--corpus", corpus]
    words += ["--out", args.out, "--overlap", f"{args.overlap:g}"]
    words += ["--dict-fraction", f"{args.dict_fraction:g}"]
    words += ["--parallel-fraction", f"{args.parallel_fraction:g}"]
    if args.tokenizer:
        words += ["--tokenizer", args.tokenizer]
    else:
        words += ["--vocab-size", str(args.vocab_size)]
    if args.max_lines is not None:
        words += ["--max-lines", str(args.max_lines)]
    words += ["--seed", str(args.seed), "--valid", str(args.valid), "--test", str(args.test)]
    return shlex.join(words)


def _derive(args: argparse.Namespace) -> int:
    from crossalign.data.derive import write_derived

    card = write_derived(
        args.out,
        args.corpus,
        args.transform,
        overlap=args.overlap / 100.0,
        dict_fraction=args.dict_fraction,
        parallel_fraction=args.parallel_fraction,
        tokenizer=args.tokenizer,
        vocab_size=args.vocab_size,
        max_lines=args.max_lines,
        seed=args.seed,
        n_valid=args.valid,
        n_test=args.test,
        command=derive_command_line(args),
    )
    report_derived(card, args.out)
    return 0


def report_derived(card: dict, out: str) -> None:
    """Print sentence counts, the dictionary sizes and the twinning check."""
    info = card["derived"]
    for name, pair in card["pairs"].items():
        counts = ", ".join(f"{split} {pair[split]}" for split in ("train", "valid", "test"))
        print(f"{name} ({info['transform']}): {counts} sentences")
    print(f"parallel (for TLM): {info['parallel_pairs']} training pairs")
    if "dictionary" in info:
        d = info["dictionary"]
        print(
            f"dictionary: train {d['train']}, test {d['test']} token pairs; "
            f"{len(info['shared_ids'])} shared token types; exactly twinned words "
            f"{100 * info['exact_twin_fraction']:.2f}%"
        )
    print(f"wrote {out} (see {out}/card.json)")


def add_derive_arguments(
    p: argparse.ArgumentParser, out: bool = True, transform_help: str | None = None
) -> None:
    """The options of ``crossalign data derive`` (also used by ``crossalign study derived``,
    whose ``--transform`` takes several: ``transform_help``)."""
    p.add_argument(
        "--transform",
        required=True,
        help=transform_help or "trans, inv, syn or a composition such as trans+inv, trans+syn",
    )
    p.add_argument(
        "--corpus",
        action="append",
        required=True,
        metavar="DIR_OR_FILE",
        help="English text: a built corpus (its English side, e.g. data/bible) or a text "
        "file; repeat to combine",
    )
    if out:
        p.add_argument("--out", required=True, help="output directory, replaced atomically")
    p.add_argument(
        "--overlap",
        type=_percent,
        default=0.0,
        metavar="P",
        help="percent of token types shared (not twinned) by the two languages (0)",
    )
    p.add_argument(
        "--dict-fraction",
        type=_fraction,
        default=0.25,
        help="fraction of the twinned vocabulary in the training dictionary; the rest is the "
        "evaluation dictionary (0.25)",
    )
    p.add_argument(
        "--parallel-fraction",
        type=_fraction,
        default=0.25,
        help="fraction of the training sentences also written as (original, derived) pairs "
        "for TLM (0.25)",
    )
    p.add_argument("--tokenizer", metavar="DIR", help="English unigram tokenizer to twin")
    p.add_argument(
        "--vocab-size",
        type=int,
        default=8000,
        help="vocabulary of the English tokenizer trained when --tokenizer is not given (8000)",
    )
    p.add_argument(
        "--max-lines",
        type=int,
        metavar="N",
        help="use a seeded sample of N English training lines (default: all)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (0)")
    p.add_argument(
        "--valid", type=int, default=1000, help="valid lines split off a text file (1000; ≤10%%)"
    )
    p.add_argument(
        "--test", type=int, default=1000, help="test lines split off a text file (1000; ≤10%%)"
    )


def add_derive_parser(data_subparsers: argparse._SubParsersAction) -> None:
    """Register ``crossalign data derive`` under the ``crossalign data`` builders."""
    p = data_subparsers.add_parser(
        "derive",
        help="a derived language: English transliterated, inverted or reordered by syntax",
        description="Write an English corpus and its derived version (see docs/derived.md): "
        "OUT/en-en-XD/{train,valid,test}.{en,en-XD} (one sentence per line), "
        "OUT/parallel/train.* (the pairs TLM trains on), and with trans: OUT/tokenizer/ (the "
        "twin tokenizer every run on this corpus uses), OUT/dictionary/{train,test,full}.txt "
        "(exact token dictionary, MUSE format) and OUT/vocab.json (the tokens of each "
        "language).",
    )
    add_derive_arguments(p)
    p.set_defaults(func=_derive)
