"""Find the train and valid files of a corpus built by ``crossalign data ...``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crossalign.data.corpora.card import CARD
from crossalign.errors import CrossalignError
from crossalign.fileio import read_json
from crossalign.languages import check_language


def load_card(corpus_dir: str | Path) -> dict[str, Any]:
    """The ``card.json`` of a built corpus; raises if ``corpus_dir`` is not one."""
    path = Path(corpus_dir) / CARD
    if not path.is_file():
        raise CrossalignError(
            f"{corpus_dir} is not a built corpus (no {CARD}); build one with e.g. "
            f"crossalign data bible --out {corpus_dir}"
        )
    card = read_json(path, "rebuild the corpus")
    if isinstance(card, dict) and isinstance(card.get("files"), dict) and "pairs" not in card:
        files = ", ".join(f"{corpus_dir}/{f}" for f in card["files"].values())
        raise CrossalignError(
            f"{corpus_dir} holds text files, not a corpus of pairs ({path}); pass {files}"
        )
    if not isinstance(card, dict) or not isinstance(card.get("pairs"), dict):
        raise CrossalignError(f"{path}: no 'pairs' mapping; rebuild the corpus")
    return card


def _files(corpus_dir: Path, name: str, src: str, tgt: str, split: str) -> tuple[str, str]:
    """The two line-aligned files of one pair and split; raises if one is missing."""
    files = (corpus_dir / name / f"{split}.{src}", corpus_dir / name / f"{split}.{tgt}")
    for path in files:
        if not path.is_file():
            raise CrossalignError(f"{path} is missing; rebuild the corpus")
    return str(files[0]), str(files[1])


def resolve_corpus(
    corpus_dir: str | Path, languages: list[str] | None = None
) -> dict[str, dict[str, list[str]]]:
    """Train and valid files of a built parallel corpus, by language and by pair.

    Returns ``{"mono": {lang: [train files]}, "parallel": {"src-tgt": [train.src, train.tgt]},
    "valid_mono": {...}, "valid_parallel": {...}}``. ``mono`` lists every train file of a
    language across pairs (``en`` of each LibreOffice pair). With ``languages``, only pairs whose
    both sides are listed are kept, and mono text of the listed languages only. Empty splits
    (the valid split of a tiny corpus) are left out; a corpus without any training text (of the
    listed languages) is an error naming its empty train files.
    """
    corpus_dir = Path(corpus_dir)
    card = load_card(corpus_dir)
    if card.get("format") != "parallel":
        raise CrossalignError(
            f"{corpus_dir} is a {card.get('format')} corpus, not parallel text; "
            f"use it where a dictionary is expected"
        )
    pairs = {name: (p["src"], p["tgt"]) for name, p in card["pairs"].items()}
    present = sorted({lang for pair in pairs.values() for lang in pair})
    wanted = set(present)
    if languages is not None:
        for lang in languages:
            check_language(lang, f"languages for {corpus_dir}")
            if lang not in present:
                raise CrossalignError(
                    f"corpus {corpus_dir} has no language '{lang}'; it has: {', '.join(present)}"
                )
        wanted = set(languages)
    out: dict[str, dict[str, list[str]]] = {
        "mono": {},
        "parallel": {},
        "valid_mono": {},
        "valid_parallel": {},
    }
    empty_train: list[str] = []
    for split, mono_key, parallel_key in (
        ("train", "mono", "parallel"),
        ("valid", "valid_mono", "valid_parallel"),
    ):
        for name, (src, tgt) in sorted(pairs.items()):
            src_file, tgt_file = _files(corpus_dir, name, src, tgt, split)
            if Path(src_file).stat().st_size == 0:  # a tiny corpus can have an empty valid split
                if split == "train":
                    empty_train += [f for f, lang in ((src_file, src), (tgt_file, tgt))
                                    if lang in wanted]  # fmt: skip
                continue
            for lang, path in ((src, src_file), (tgt, tgt_file)):
                if lang in wanted:
                    out[mono_key].setdefault(lang, []).append(path)
            if src in wanted and tgt in wanted:
                out[parallel_key][name] = [src_file, tgt_file]
    if not out["mono"]:
        more = f" and {len(empty_train) - 4} more" if len(empty_train) > 4 else ""
        raise CrossalignError(
            f"corpus {corpus_dir} has no training text: {', '.join(empty_train[:4])}{more} "
            f"{'is' if len(empty_train) == 1 else 'are'} empty; rebuild the corpus"
        )
    return out


def language_text(
    corpus: str | Path | None, files: list[str] | None, lang: str, limit: int
) -> list[str]:
    """Up to ``limit`` lines of ``lang``: the given files, else the train files of ``lang`` in
    the built corpus ``corpus`` (every pair it occurs in), exact duplicates read once."""
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
