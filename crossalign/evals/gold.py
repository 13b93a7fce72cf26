"""Readers of gold word alignments (sure/possible links) and of word-alignment test sets.

A test set is a folder named ``<l1>-<l2>`` holding ``test.<l1>``, ``test.<l2>`` (one
whitespace-tokenized sentence per line, line-aligned) and ``alignv2.txt`` with one link per
line, ``SENTID I J S|P``: word I of ``<l1>`` (the source) and word J of ``<l2>``, both 1-based,
sure (S) or possible (P). Sentence ids are 0-based in some sets (de-en: ``0``..``507``) and
1-based, zero-padded in others (en-fr: ``0001``..``0447``); the reader takes a file whose
smallest id is 0 as 0-based and any other as 1-based, then checks every link against the
sentences. Links are returned 0-based.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from crossalign.data.readers import iter_lines
from crossalign.errors import CrossalignError

Link = tuple[int, int]


@dataclass
class GoldAlignments:
    """Gold links per sentence, 0-based ``(source word, target word)``."""

    sure: list[set[Link]]
    possible: list[set[Link]]
    """Possible links; every sure link is also possible."""


@dataclass
class TestSet:
    """Sentence pairs with gold alignments."""

    name: str
    src_lang: str
    tgt_lang: str
    src: list[list[str]]
    """Source sentences as word lists."""
    tgt: list[list[str]]
    gold: GoldAlignments


def read_gold_links(
    path: str | os.PathLike,
    n_sentences: int | None = None,
    lengths: list[tuple[int, int]] | None = None,
) -> GoldAlignments:
    """Read ``SENTID I J S|P`` lines (``SENTID I J`` counts as sure) into 0-based links.

    ``n_sentences`` (default: up to the largest id) sizes the result; ``lengths`` gives each
    sentence's (source, target) word counts to check indices against. A negative I or J (the
    de-en set has ``178 22 -99 S``) marks a word aligned to nothing and adds no link. Raises
    CrossalignError naming file and line for a wrong field count, a non-integer, an unknown
    mark, a 0 position or an index out of range.
    """
    raw: list[tuple[int, int, int, int, bool]] = []
    for number, text in iter_lines(path):
        fields = text.split()
        if not fields:
            continue
        if len(fields) not in (3, 4):
            raise CrossalignError(
                f"{path}:{number}: {len(fields)} fields; a gold link is 'SENTID I J S|P'"
            )
        try:
            sid, i, j = (int(x) for x in fields[:3])
        except ValueError:
            raise CrossalignError(
                f"{path}:{number}: '{text.strip()}' is not 'SENTID I J S|P' with integer ids"
            ) from None
        mark = fields[3] if len(fields) == 4 else "S"
        if mark not in ("S", "P"):
            raise CrossalignError(
                f"{path}:{number}: mark '{mark}' must be S (sure) or P (possible)"
            )
        if i == 0 or j == 0:
            raise CrossalignError(f"{path}:{number}: word positions are 1-based; found 0")
        if sid < 0:
            raise CrossalignError(f"{path}:{number}: negative sentence id {sid}")
        raw.append((number, sid, i, j, mark == "S"))
    if not raw:
        raise CrossalignError(f"{path}: no gold links")
    base = 0 if min(r[1] for r in raw) == 0 else 1
    if n_sentences is None:
        n_sentences = max(r[1] for r in raw) - base + 1
    gold = GoldAlignments([set() for _ in range(n_sentences)], [set() for _ in range(n_sentences)])
    for number, sid, i, j, sure in raw:
        k = sid - base
        if k >= n_sentences:
            raise CrossalignError(
                f"{path}:{number}: sentence id {sid} is beyond the {n_sentences} sentences "
                f"({base}-based ids)"
            )
        if i < 0 or j < 0:
            continue
        if lengths is not None and (i > lengths[k][0] or j > lengths[k][1]):
            raise CrossalignError(
                f"{path}:{number}: link {i}-{j} is out of range: sentence {sid} has "
                f"{lengths[k][0]} source and {lengths[k][1]} target words"
            )
        link = (i - 1, j - 1)
        gold.possible[k].add(link)
        if sure:
            gold.sure[k].add(link)
    return gold


def _sentences(path: Path) -> list[list[str]]:
    return [text.split() for _, text in iter_lines(path)]


def read_testset(path: str | os.PathLike) -> TestSet:
    """Read a test-set folder ``<l1>-<l2>/`` (see the module docstring); ``l1`` is the source."""
    path = Path(path)
    if not path.is_dir():
        raise CrossalignError(f"test set {path} is not a directory")
    parts = path.name.split("-")
    if len(parts) != 2:
        raise CrossalignError(
            f"test set folder {path} must be named <source>-<target>, e.g. de-en, so the reader "
            f"knows which side is the source"
        )
    src_lang, tgt_lang = parts
    files = [path / f"test.{src_lang}", path / f"test.{tgt_lang}", path / "alignv2.txt"]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise CrossalignError(f"test set {path} lacks {', '.join(missing)}")
    src, tgt = _sentences(files[0]), _sentences(files[1])
    if len(src) != len(tgt):
        raise CrossalignError(
            f"{files[0]} ({len(src)} lines) and {files[1]} ({len(tgt)} lines) differ in line "
            f"count; they must be line-aligned"
        )
    lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
    gold = read_gold_links(files[2], len(src), lengths)
    return TestSet(path.name, src_lang, tgt_lang, src, tgt, gold)
