"""Monolingual halves of a parallel corpus for unsupervised MT: the source side of the first
half of the training pairs and the target side of the second half, so that no training
sentence has its translation on the other side (the setting of Lample et al. 2018, §4.1);
the held-out splits stay line-aligned for BLEU."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crossalign.data.lines import iter_lines
from crossalign.errors import CrossalignError
from crossalign.fileio import atomic_dir, write_json_atomic, write_lines_atomic

if TYPE_CHECKING:
    from crossalign.data.options import UnmtSplitOptions


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise CrossalignError(
            f"{path} not found; point --pairs at a folder <src>-<tgt>/ with train.<src>, "
            "train.<tgt>, valid.* and test.* (crossalign data libreoffice writes them)"
        )
    return [text for _, text in iter_lines(path)]


def split_halves(pairs: str | Path, out: str | Path, command: str = "") -> dict[str, Any]:
    """Write ``out/train.<src>`` (source side of the first half of ``pairs``' training lines),
    ``out/train.<tgt>`` (target side of the second half) and copies of the line-aligned
    ``valid.*`` and ``test.*`` files, with ``out/card.json``; ``out`` is replaced atomically.
    ``pairs`` is a folder named ``<src>-<tgt>``. Returns the card."""
    pairs = Path(pairs)
    src, sep, tgt = pairs.resolve().name.partition("-")
    if not sep or not tgt:
        raise CrossalignError(f"{pairs}: the folder name must be <src>-<tgt>, e.g. en-de")
    train = {lang: _lines(pairs / f"train.{lang}") for lang in (src, tgt)}
    if len(train[src]) != len(train[tgt]):
        raise CrossalignError(
            f"{pairs}: train.{src} has {len(train[src])} lines and train.{tgt} "
            f"{len(train[tgt])}; the training files must be line-aligned"
        )
    half = len(train[src]) // 2
    if half == 0:
        raise CrossalignError(f"{pairs}/train.{src}: fewer than 2 sentence pairs to split")
    card: dict[str, Any] = {
        "source": str(pairs.resolve()),
        "command": command,
        "train": {src: f"pairs 0-{half - 1}", tgt: f"pairs {half}-{len(train[tgt]) - 1}"},
        "sentences": {src: half, tgt: len(train[tgt]) - half},
        "held_out": {},
    }
    with atomic_dir(out) as tmp:
        write_lines_atomic(tmp / f"train.{src}", train[src][:half])
        write_lines_atomic(tmp / f"train.{tgt}", train[tgt][half:])
        for split in ("valid", "test"):
            files = [pairs / f"{split}.{lang}" for lang in (src, tgt)]
            if all(f.is_file() for f in files):
                for f in files:
                    shutil.copyfile(f, tmp / f.name)
                card["held_out"][split] = len(_lines(files[0]))
        write_json_atomic(tmp / "card.json", card)
    return card


def split_from_options(o: UnmtSplitOptions) -> dict[str, Any]:
    """``crossalign data unmt-split``: ``split_halves`` with the command line recorded in the
    card; returns the card."""
    from crossalign.options import command_line

    return split_halves(o.pairs, o.out, command_line(["crossalign", "data", "unmt-split"], o))
