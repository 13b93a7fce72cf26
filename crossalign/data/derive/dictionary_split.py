"""Another training share of a derived corpus's exact dictionary: the paper's 25%, 50% and 100%
settings (its scripts' ``--bilingual_rate``), drawn the way ``crossalign data derive`` draws its
own share (``split_dictionary`` on ``dictionary/full.txt`` with the corpus's seed). Shares of
one corpus are therefore nested: a smaller share's training pairs are all in a larger share's,
and a larger share's held-out pairs are all held out of a smaller one too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crossalign.data.derive.derivation import split_dictionary
from crossalign.data.options import DictionarySplitOptions
from crossalign.data.readers import read_dictionary
from crossalign.errors import CrossalignError
from crossalign.fileio import (
    atomic_dir,
    file_sha256,
    read_json,
    write_json_atomic,
    write_lines_atomic,
)
from crossalign.options import command_line


def write_dictionary_split(o: DictionarySplitOptions) -> dict[str, Any]:
    """Write ``OUT/train.txt`` (a seeded ``fraction`` of ``DERIVED/dictionary/full.txt``),
    ``OUT/test.txt`` (the rest) and ``OUT/card.json`` (the command line that makes it again,
    and ``full.txt``'s SHA-256, to tell a share of a corpus derived again), atomically; return
    the card. At the corpus's own
    ``dict_fraction`` the two files equal its ``dictionary/{train,test}.txt``. An ``OUT`` inside
    the corpus, or a corpus without a derive card or an exact dictionary, is refused."""
    derived, fraction, out = Path(o.derived), o.fraction, Path(o.out)
    card_path, full = derived / "card.json", derived / "dictionary" / "full.txt"
    if not card_path.is_file():
        raise CrossalignError(
            f"{card_path} does not exist: give a corpus written by crossalign data derive"
        )
    if out.resolve().is_relative_to(derived.resolve()):
        raise CrossalignError(
            f"--out {out} is inside --derived {derived}, which it would replace files of; give a "
            f"directory beside it, e.g. {derived}-dict{round(100 * fraction)}"
        )
    corpus = read_json(card_path, "write it again with crossalign data derive")
    if "seed" not in corpus or "dict_fraction" not in corpus.get("derived", {}):
        raise CrossalignError(
            f"{card_path} is not a derived corpus's card (no seed or derived.dict_fraction); "
            "give a corpus written by crossalign data derive"
        )
    if not full.is_file():
        raise CrossalignError(
            f"{full} does not exist: only a derived corpus with a trans transform has an exact "
            "dictionary (crossalign data derive --transform trans ...)"
        )
    pairs = read_dictionary(full)
    train, test = split_dictionary(pairs, fraction, corpus["seed"])
    card = {
        "command": command_line(["crossalign", "data", "dictionary-split"], o),
        "derived": str(derived),
        "seed": corpus["seed"],
        "fraction": fraction,
        "corpus_fraction": corpus["derived"]["dict_fraction"],
        "pairs": {"train": len(train), "test": len(test), "full": len(pairs)},
        "full_sha256": file_sha256(full),
    }
    with atomic_dir(out) as tmp:
        for name, part in (("train", train), ("test", test)):
            write_lines_atomic(tmp / f"{name}.txt", [f"{a} {b}" for a, b in part])
        write_json_atomic(tmp / "card.json", card)
    return card


def split_summary(card: dict[str, Any]) -> str:
    """The counts of a share's card, as the command and a prepare step print them."""
    n = card["pairs"]
    return f"train {n['train']}, test {n['test']} of {n['full']} token pairs"
