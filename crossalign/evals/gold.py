"""Readers of gold word alignments (sure/possible links) and of word-alignment test sets.

A test set is a folder named ``<l1>-<l2>`` holding ``test.<l1>``, ``test.<l2>`` (one
whitespace-tokenized sentence per line, line-aligned) and ``alignv2.txt`` with one link per
line, ``SENTID I J S|P``: word I of ``<l1>`` (the source) and word J of ``<l2>``, both 1-based,
sure (S) or possible (P). Sets write sentence ids differently: 0-based in some (de-en: ``0``..
``507``), 1-based and zero-padded in others (en-fr: ``0001``..``0447``), and in others again
starting above 1 with gaps where sentences were dropped from the text files. ``ID_RULES`` names
the ways ids are mapped to sentences; the reader picks one (``auto``) only when the ids leave no
doubt, refuses otherwise, and records the rule it used. Links are returned 0-based.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from crossalign.data.readers import iter_lines
from crossalign.errors import CrossalignError

Link = tuple[int, int]

ID_RULES = ("auto", "zero", "one", "rank")
"""How the sentence ids of a gold links file map to sentences (lines of the text files):
``zero``: id k is sentence k+1; ``one``: id k is sentence k; ``rank``: the k-th smallest
distinct id is sentence k (ids that start above 1 or have gaps); ``auto``: zero or one when the
distinct ids are exactly 0..n-1 or 1..n, rank otherwise."""

READ_AS = {"zero": "0-based", "one": "1-based", "rank": "by rank"}
"""How messages say the ids were read, per rule (``auto`` resolves to one of these)."""


@dataclass
class GoldAlignments:
    """Gold links per sentence, 0-based ``(source word, target word)``."""

    sure: list[set[Link]]
    possible: list[set[Link]]
    """Possible links; every sure link is also possible."""
    ids: str | None = None
    """The rule of ``ID_RULES`` (zero, one or rank) that mapped the file's sentence ids to
    sentences; None for alignments not read from a file."""


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


def _auto_rule(path: str | os.PathLike, distinct: list[int], n: int | None) -> str:
    """zero or one for a contiguous 0- or 1-based range of ids, rank otherwise; raises when the
    ids cannot be matched one to one with the ``n`` sentences of the text files."""
    lo, hi, k = distinct[0], distinct[-1], len(distinct)
    contiguous = hi - lo + 1 == k
    if n is not None and k < n and contiguous and (lo, hi) == (1, n - 1):
        raise CrossalignError(
            f"{path}: sentence ids 1..{n - 1} cover {n - 1} of the {n} sentences of the text "
            f"files: 0-based with no links in the first sentence, or 1-based with none in the "
            f"last; say which with --gold-ids zero or --gold-ids one"
        )
    if n is not None and k != n:
        raise CrossalignError(
            f"{path}: gold links cover {k} distinct sentence ids ({lo}..{hi}) but the text files "
            f"have {n} sentences; give gold links for every sentence, or, if the ids are line "
            f"numbers and some sentences have no links, pass --gold-ids zero or --gold-ids one"
        )
    if contiguous and lo in (0, 1):
        return "zero" if lo == 0 else "one"
    return "rank"


def read_gold_links(
    path: str | os.PathLike,
    lengths: list[tuple[int, int]] | None = None,
    ids: str = "auto",
) -> GoldAlignments:
    """Read ``SENTID I J S|P`` lines (``SENTID I J`` counts as sure) into 0-based links.

    ``lengths`` gives each sentence's (source, target) word counts, from the text files: it
    sizes the result and every link is checked against it. ``ids`` is a rule of ``ID_RULES``:
    ``auto`` reads a contiguous 0- or 1-based range of ids as such and any other set of ids by
    rank, and with ``lengths`` refuses ids whose count differs from the number of sentences
    (ids 1..n-1 of n sentences could be either base). ``zero`` and ``one`` allow sentences
    without links; without ``lengths`` they size the result to the largest id. The rule used
    is ``.ids`` of the result. A negative I or J (the de-en set has ``178 22 -99 S``) marks a
    word aligned to nothing and adds no link. Raises CrossalignError naming file and line for
    a wrong field count, a non-integer, an unknown mark, a 0 position, an id outside the
    sentences or an index out of range.
    """
    if ids not in ID_RULES:
        raise CrossalignError(f"gold id rule '{ids}' must be one of {', '.join(ID_RULES)}")
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
    distinct = sorted({r[1] for r in raw})
    n = None if lengths is None else len(lengths)
    rule = _auto_rule(path, distinct, n) if ids == "auto" else ids
    if rule == "rank" and n is not None and len(distinct) != n:
        raise CrossalignError(
            f"{path}: {len(distinct)} distinct sentence ids but the text files have {n} "
            f"sentences; reading ids by rank needs links in every sentence"
        )
    if rule == "rank":
        row = {sid: k for k, sid in enumerate(distinct)}
    else:
        row = {sid: sid - 1 if rule == "one" else sid for sid in distinct}
    if n is None:
        n = max(row.values()) + 1
    gold = GoldAlignments([set() for _ in range(n)], [set() for _ in range(n)], rule)
    for number, sid, i, j, sure in raw:
        k = row[sid]
        if not 0 <= k < n:
            raise CrossalignError(
                f"{path}:{number}: sentence id {sid} is outside the {n} sentences when ids are "
                f"read {READ_AS[rule]}; pick the rule with --gold-ids"
            )
        if i < 0 or j < 0:
            continue
        if lengths is not None and (i > lengths[k][0] or j > lengths[k][1]):
            raise CrossalignError(
                f"{path}:{number}: link {i}-{j} is out of range: sentence {sid} (line {k + 1} of "
                f"the text files, ids read {READ_AS[rule]}) has {lengths[k][0]} source and "
                f"{lengths[k][1]} target words"
            )
        link = (i - 1, j - 1)
        gold.possible[k].add(link)
        if sure:
            gold.sure[k].add(link)
    return gold


def read_parallel(
    src_path: str | os.PathLike, tgt_path: str | os.PathLike
) -> tuple[list[list[str]], list[list[str]]]:
    """Word lists of two line-aligned, whitespace-tokenized files; raises CrossalignError naming
    both files when their line counts differ."""
    src = [text.split() for _, text in iter_lines(src_path)]
    tgt = [text.split() for _, text in iter_lines(tgt_path)]
    if len(src) != len(tgt):
        raise CrossalignError(
            f"{src_path} ({len(src)} lines) and {tgt_path} ({len(tgt)} lines) differ in line "
            f"count; they must be line-aligned"
        )
    return src, tgt


def testset_text(folder: Path) -> tuple[Path, Path] | None:
    """``test.<l1>``, ``test.<l2>`` of a test-set folder named ``<l1>-<l2>`` (whether or not
    they exist); None for a folder named otherwise."""
    parts = folder.name.split("-")
    if len(parts) != 2:
        return None
    return folder / f"test.{parts[0]}", folder / f"test.{parts[1]}"


def read_testset(path: str | os.PathLike, ids: str = "auto") -> TestSet:
    """Read a test-set folder ``<l1>-<l2>/`` (see the module docstring); ``l1`` is the source.
    ``ids`` is the rule of ``ID_RULES`` for the sentence ids of ``alignv2.txt``."""
    path = Path(path)
    if not path.is_dir():
        raise CrossalignError(f"test set {path} is not a directory")
    text = testset_text(path)
    if text is None:
        raise CrossalignError(
            f"test set folder {path} must be named <source>-<target>, e.g. de-en, so the reader "
            f"knows which side is the source"
        )
    src_lang, tgt_lang = path.name.split("-")
    files = [*text, path / "alignv2.txt"]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise CrossalignError(f"test set {path} lacks {', '.join(missing)}")
    src, tgt = read_parallel(files[0], files[1])
    lengths = [(len(s), len(t)) for s, t in zip(src, tgt)]
    gold = read_gold_links(files[2], lengths, ids)
    return TestSet(path.name, src_lang, tgt_lang, src, tgt, gold)


def text_beside(gold_path: Path) -> tuple[Path, Path] | None:
    """``test.<l1>``, ``test.<l2>`` next to a links file in a test-set folder ``<l1>-<l2>/``,
    when both exist."""
    text = testset_text(gold_path.parent)
    return text if text is not None and all(f.is_file() for f in text) else None


def gold_summary(name: str, gold: GoldAlignments, asked: str) -> str:
    """One line saying how the gold's sentence ids were read (``asked``: the rule given) and
    how many sentences it has."""
    rule = f"ids read {READ_AS[gold.ids]} (--gold-ids {asked})"
    line = f"gold {name}: {len(gold.sure)} sentences, {rule}"
    unlinked = sum(not p for p in gold.possible)
    return f"{line}; {unlinked} without gold links" if unlinked else line
