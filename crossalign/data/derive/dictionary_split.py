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
from crossalign.fileio import atomic_dir, read_json, write_json_atomic, write_lines_atomic


def write_dictionary_split(o: DictionarySplitOptions, command: str = "") -> dict[str, Any]:
    """Write ``OUT/train.txt`` (a seeded ``fraction`` of ``DERIVED/dictionary/full.txt``),
    ``OUT/test.txt`` (the rest) and ``OUT/card.json``, atomically; return the card. At the
    corpus's own ``dict_fraction`` the two files equal its ``dictionary/{train,test}.txt``."""
    derived, fraction = Path(o.derived), o.fraction
    card_path, full = derived / "card.json", derived / "dictionary" / "full.txt"
    if not card_path.is_file():
        raise CrossalignError(
            f"{card_path} does not exist: give a corpus written by crossalign data derive"
        )
    corpus = read_json(card_path, "write it again with crossalign data derive")
    if not full.is_file():
        raise CrossalignError(
            f"{full} does not exist: only a derived corpus with a trans transform has an exact "
            "dictionary (crossalign data derive --transform trans ...)"
        )
    pairs = read_dictionary(full)
    train, test = split_dictionary(pairs, fraction, corpus["seed"])
    card = {
        "command": command,
        "derived": str(derived),
        "seed": corpus["seed"],
        "fraction": fraction,
        "corpus_fraction": corpus["derived"]["dict_fraction"],
        "pairs": {"train": len(train), "test": len(test), "full": len(pairs)},
    }
    with atomic_dir(o.out) as tmp:
        for name, part in (("train", train), ("test", test)):
            write_lines_atomic(tmp / f"{name}.txt", [f"{a} {b}" for a, b in part])
        write_json_atomic(tmp / "card.json", card)
    return card
