"""``crossalign data derive``: write a derived-language corpus (see ``crossalign.data.derive``)."""

from __future__ import annotations

import argparse

from crossalign.data.derive_settings import DeriveSettings


def _derive(args: argparse.Namespace) -> int:
    from crossalign.data.derive import write_derived

    settings = DeriveSettings.from_args(args)
    card = write_derived(args.out, settings, command=settings.command_line(args.out))
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
        type=float,
        default=DeriveSettings.overlap,
        metavar="P",
        help="percent (0-100) of token types shared (not twinned) by the two languages "
        f"({DeriveSettings.overlap:g})",
    )
    p.add_argument(
        "--dict-fraction",
        type=float,
        default=DeriveSettings.dict_fraction,
        help="fraction of the twinned vocabulary in the training dictionary; the rest is the "
        f"evaluation dictionary ({DeriveSettings.dict_fraction:g})",
    )
    p.add_argument(
        "--parallel-fraction",
        type=float,
        default=DeriveSettings.parallel_fraction,
        help="fraction of the training sentences also written as (original, derived) pairs "
        f"for TLM ({DeriveSettings.parallel_fraction:g})",
    )
    p.add_argument("--tokenizer", metavar="DIR", help="English unigram tokenizer to twin")
    p.add_argument(
        "--vocab-size",
        type=int,
        default=DeriveSettings.vocab_size,
        help="vocabulary of the English tokenizer trained when --tokenizer is not given "
        f"({DeriveSettings.vocab_size})",
    )
    p.add_argument(
        "--max-lines",
        type=int,
        metavar="N",
        help="use a seeded sample of N English training lines (default: all)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=DeriveSettings.seed,
        help=f"seed of every random choice ({DeriveSettings.seed})",
    )
    for split in ("valid", "test"):
        default = getattr(DeriveSettings, split)
        p.add_argument(
            f"--{split}",
            type=int,
            default=default,
            help=f"{split} lines split off a text file ({default}; ≤10%%)",
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
