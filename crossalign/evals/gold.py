"""Readers of gold word alignments (sure/possible links) and of word-alignment test sets.

A test set is a folder named ``<l1>-<l2>`` holding ``test.<l1>``, ``test.<l2>`` (one
whitespace-tokenized sentence per line, line-aligned) and ``alignv2.txt`` with one link per
line, ``SENTID I J S|P``: word I of ``<l1>`` (the source) and word J of ``<l2>``, both 1-based,
sure (S) or possible (P). Sets write sentence ids differently: 0-based in some (de-en: ``0``..
``507``), 1-based and zero-padded in others (en-fr: ``0001``..``0447``), and in others again
starting above 1 with gaps where sentences were dropped from the text files. ``ID_RULES`` names
the ways ids are mapped to sentences; the reader picks one (``auto``) only when the ids leave no
doubt, refuses otherwise, and records the rule it used. Links are returned 0-based.

A gold links file may instead be Pharaoh-style, as SimAlign's and awesome-align's samples
write it (``read_pharaoh_gold``): one line per sentence, ``i-j`` a sure link and ``ipj`` a
possible one, 0-based (SimAlign's ``samples/sample_eng_deu.gold``) or 1-based
(awesome-align's ``examples/*.gold``, scored there with ``aer.py --oneRef``); a line may start
with a sentence id and a tab (SimAlign's ``0\t0-0 1-1``), read by the same ``ID_RULES``.
``read_gold_file`` tells the two formats apart.

A gold link that points past the end of its sentence in the text files (the WPT-2005 en-hi set
has some: sentence 68 links target word 34 of 33) is kept as a gold link that no prediction can
match, as SimAlign's, awesome-align's and XLM-Align's scorers count it: they compare sets of
pairs and never look at the text. The readers count such links (``GoldAlignments.out_of_range``,
``out_of_range_warning``), and refuse them all with ``strict`` or when more than
``MAX_OUT_OF_RANGE`` of the links are out of range (the text files are then not the gold's).
"""

from __future__ import annotations

import os
import re
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

READ_AS = {"zero": "0-based", "one": "1-based", "rank": "by rank", "line": "as line numbers"}
"""How messages say the ids were read, per rule (``auto`` resolves to one of these; ``line``:
a Pharaoh gold file without ids, line k is sentence k)."""

MAX_OUT_OF_RANGE = 0.05
"""Share of a gold file's links that may point past the end of their sentence; above it the
readers refuse the file, since the text files are then clearly not the gold's."""

PHARAOH_GOLD_LINK = re.compile(r"^(\d+)([-p])(\d+)$")
"""A Pharaoh gold link: ``i-j`` sure, ``ipj`` possible."""


@dataclass
class GoldAlignments:
    """Gold links per sentence, 0-based ``(source word, target word)``."""

    sure: list[set[Link]]
    possible: list[set[Link]]
    """Possible links; every sure link is also possible."""
    ids: str | None = None
    """The rule of ``ID_RULES`` (zero, one or rank) that mapped the file's sentence ids to
    sentences, ``line`` for a Pharaoh file without ids; None for alignments not read from a
    file."""
    out_of_range: int = 0
    """Links (lines or tokens of the file) past the end of their sentence in the text files;
    they are kept in ``possible`` (and ``sure`` when sure), so a sure one counts against recall
    and AER."""
    first_out_of_range: str | None = None
    """``file:line: link ... is out of range ...`` of the first of them."""


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


def _sentence_rows(
    path: str | os.PathLike, distinct: list[int], lengths: list | None, ids: str
) -> tuple[str, dict[int, int], int]:
    """(rule used, sentence id -> sentence index, number of sentences) for the ``distinct``
    sentence ids of a gold file read by rule ``ids`` (see ``read_gold_links``)."""
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
    return rule, row, n


def _refuse_out_of_range(found: list[str], total: int, strict: bool) -> None:
    """Raise on the first of the out-of-range links ``found`` (their messages, in file order) of
    ``total`` links when ``strict``, or when they are more than ``MAX_OUT_OF_RANGE`` of them."""
    if found and strict:
        raise CrossalignError(
            f"{found[0]}; --strict refuses every gold link past the end of its sentence"
        )
    if len(found) > MAX_OUT_OF_RANGE * total:
        raise CrossalignError(
            f"{found[0]}; {len(found)} of {total} gold links are out of range, more than "
            f"{MAX_OUT_OF_RANGE:.0%}: the text files are not the gold's, or its ids are read "
            f"wrongly"
        )


def _keep_out_of_range(gold: GoldAlignments, found: list[str]) -> GoldAlignments:
    """``gold`` with the count and the first of the out-of-range links ``found`` recorded."""
    gold.out_of_range = len(found)
    gold.first_out_of_range = found[0] if found else None
    return gold


def out_of_range_warning(gold: GoldAlignments) -> str | None:
    """One line for stderr when ``gold`` has links past the end of their sentence: how many,
    the first (file:line) and what to do; None when it has none."""
    if not gold.out_of_range:
        return None
    return (
        f"warning: {gold.out_of_range} gold link(s) point past the end of their sentence, first "
        f"{gold.first_out_of_range}; they count as gold links no prediction can match (as in "
        f"SimAlign's and awesome-align's scorers); if the text files are not the gold's, give "
        f"the right ones, or pass --strict to refuse such links"
    )


def read_gold_links(
    path: str | os.PathLike,
    lengths: list[tuple[int, int]] | None = None,
    ids: str = "auto",
    strict: bool = False,
) -> GoldAlignments:
    """Read ``SENTID I J S|P`` lines (``SENTID I J`` counts as sure) into 0-based links.

    ``lengths`` gives each sentence's (source, target) word counts, from the text files: it
    sizes the result and every link is checked against it. A link past the end of its sentence
    stays a gold link (see the module docstring), counted in ``.out_of_range``; with ``strict``,
    or when more than ``MAX_OUT_OF_RANGE`` of the links are such, the file is refused.

    ``ids`` is a rule of ``ID_RULES``: ``auto`` reads a contiguous 0- or 1-based range of ids as
    such and any other set of ids by rank, and with ``lengths`` refuses ids whose count differs
    from the number of sentences (ids 1..n-1 of n sentences could be either base). ``zero`` and
    ``one`` allow sentences without links; without ``lengths`` they size the result to the
    largest id. The rule used is ``.ids`` of the result. A negative I or J (the de-en set has
    ``178 22 -99 S``) marks a word aligned to nothing and adds no link. Raises CrossalignError
    naming file and line for a wrong field count, a non-integer, an unknown mark, a 0 position,
    an id outside the sentences, or indices out of range as above.
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
    rule, row, n = _sentence_rows(path, sorted({r[1] for r in raw}), lengths, ids)
    gold = GoldAlignments([set() for _ in range(n)], [set() for _ in range(n)], rule)
    found: list[str] = []
    total = 0
    for number, sid, i, j, sure in raw:
        k = row[sid]
        if not 0 <= k < n:
            raise CrossalignError(
                f"{path}:{number}: sentence id {sid} is outside the {n} sentences when ids are "
                f"read {READ_AS[rule]}; pick the rule with --gold-ids"
            )
        if i < 0 or j < 0:
            continue
        total += 1
        if lengths is not None and (i > lengths[k][0] or j > lengths[k][1]):
            found.append(
                f"{path}:{number}: link {i}-{j} is out of range: sentence {sid} (line {k + 1} of "
                f"the text files, ids read {READ_AS[rule]}) has {lengths[k][0]} source and "
                f"{lengths[k][1]} target words"
            )
        link = (i - 1, j - 1)
        gold.possible[k].add(link)
        if sure:
            gold.sure[k].add(link)
    _refuse_out_of_range(found, total, strict)
    return _keep_out_of_range(gold, found)


def _pharaoh_fields(text: str) -> tuple[int | None, list[str]]:
    """(sentence id or None, link tokens) of a Pharaoh gold line, ``[ID<tab>]links``."""
    head, tab, rest = text.partition("\t")
    if tab and head.strip().isdigit():
        return int(head), rest.split()
    return None, text.split()


def is_pharaoh_gold(path: str | os.PathLike) -> bool:
    """Whether the first line of ``path`` with links holds Pharaoh gold links (``i-j``,
    ``ipj``), rather than ``SENTID I J S|P`` fields."""
    for _, text in iter_lines(path):
        fields = _pharaoh_fields(text)[1]
        if fields:
            return all(PHARAOH_GOLD_LINK.match(f) for f in fields)
    return False


def read_pharaoh_gold(
    path: str | os.PathLike,
    lengths: list[tuple[int, int]] | None = None,
    ids: str = "auto",
    base: int = 0,
    strict: bool = False,
) -> GoldAlignments:
    """Read a Pharaoh gold file (see the module docstring) into 0-based links: ``i-j`` is sure
    (and possible), ``ipj`` possible; word indices start at ``base`` (0 or 1).

    Without sentence ids line k is sentence k (an empty line: a sentence without links; ``ids``
    must be ``auto``); with ``ID<tab>`` on every line the ids map to sentences by ``ids`` as in
    ``read_gold_links``. ``lengths`` (the text's (source, target) word counts) sizes the result
    and checks every link; links out of range are kept and refused as in ``read_gold_links``
    (``strict``, more than ``MAX_OUT_OF_RANGE``), and always in a file read 0-based that never
    uses index 0 (it is 1-based: the message says to pass ``--gold-base 1``). Raises
    CrossalignError naming file and line for a malformed token, an index below ``base``, links
    out of range as said, lines with and without ids, and a line count different from
    ``len(lengths)``.
    """
    if ids not in ID_RULES:
        raise CrossalignError(f"gold id rule '{ids}' must be one of {', '.join(ID_RULES)}")
    if base not in (0, 1):
        raise CrossalignError(f"gold word index base {base} must be 0 or 1")
    rows: list[tuple[int, int | None, list[tuple[int, int, bool]]]] = []
    for number, text in iter_lines(path):
        sid, fields = _pharaoh_fields(text)
        links = []
        for token in fields:
            m = PHARAOH_GOLD_LINK.match(token)
            if m is None:
                raise CrossalignError(
                    f"{path}:{number}: '{token}' is not a Pharaoh gold link, 'i-j' (sure) or "
                    f"'ipj' (possible)"
                )
            i, j = int(m[1]) - base, int(m[3]) - base
            if i < 0 or j < 0:
                raise CrossalignError(
                    f"{path}:{number}: link {token} has index 0 but the file is read 1-based; "
                    f"pass --gold-base 0"
                )
            links.append((i, j, m[2] == "-"))
        rows.append((number, sid, links))
    with_ids = [r for r in rows if r[1] is not None]
    if with_ids:
        without = next((r for r in rows if r[1] is None and r[2]), None)
        if without is not None:
            raise CrossalignError(
                f"{path}:{without[0]}: no 'ID<tab>' before the links, but other lines have one"
            )
        rule, row, n = _sentence_rows(path, sorted({r[1] for r in with_ids}), lengths, ids)
        placed = [(number, row[sid], links) for number, sid, links in with_ids]
    else:
        if ids != "auto":
            raise CrossalignError(
                f"{path} has one line per sentence and no sentence ids; drop --gold-ids {ids}"
            )
        rule, n = "line", len(rows)
        if lengths is not None and n != len(lengths):
            raise CrossalignError(
                f"{path} has {n} lines but the text files have {len(lengths)} sentences; a "
                f"Pharaoh gold file has one line per sentence"
            )
        placed = [(number, number - 1, links) for number, _, links in rows]
    gold = GoldAlignments([set() for _ in range(n)], [set() for _ in range(n)], rule)
    zero_seen = any(0 in (i, j) for _, _, links in placed for i, j, _ in links)
    hint = " (1-based? pass --gold-base 1)" if base == 0 and not zero_seen else ""
    found: list[str] = []
    for number, k, links in placed:
        if not 0 <= k < n:
            raise CrossalignError(
                f"{path}:{number}: the sentence id is outside the {n} sentences when ids are "
                f"read {READ_AS[rule]}; pick the rule with --gold-ids"
            )
        for i, j, sure in links:
            if lengths is not None and (i >= lengths[k][0] or j >= lengths[k][1]):
                found.append(
                    f"{path}:{number}: link {i + base}{'-' if sure else 'p'}{j + base} is out "
                    f"of range: sentence {k + 1} of the text files has {lengths[k][0]} source "
                    f"and {lengths[k][1]} target words (indices read {base}-based){hint}"
                )
            gold.possible[k].add((i, j))
            if sure:
                gold.sure[k].add((i, j))
    if found and hint:
        raise CrossalignError(found[0])
    _refuse_out_of_range(found, sum(len(links) for _, _, links in placed), strict)
    return _keep_out_of_range(gold, found)


def read_gold_file(
    path: str | os.PathLike,
    lengths: list[tuple[int, int]] | None = None,
    ids: str = "auto",
    base: int = 0,
    strict: bool = False,
) -> GoldAlignments:
    """A gold links file in either format: Pharaoh (``read_pharaoh_gold``, word indices from
    ``base``) or ``SENTID I J S|P`` (``read_gold_links``, 1-based by definition); ``strict``
    refuses any link past the end of its sentence."""
    if is_pharaoh_gold(path):
        return read_pharaoh_gold(path, lengths, ids, base, strict)
    return read_gold_links(path, lengths, ids, strict)


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


def read_testset(path: str | os.PathLike, ids: str = "auto", strict: bool = False) -> TestSet:
    """Read a test-set folder ``<l1>-<l2>/`` (see the module docstring); ``l1`` is the source.
    ``ids`` is the rule of ``ID_RULES`` for the sentence ids of ``alignv2.txt``; ``strict``
    refuses any link past the end of its sentence (``read_gold_links``)."""
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
    gold = read_gold_links(files[2], lengths, ids, strict)
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
