"""Single-word bilingual dictionaries from the Debian ``dict-freedict-*`` packages.

A dictd database is ``freedict-<src>-<tgt>.index`` (``headword<TAB>offset<TAB>length``, numbers
in dictd's base64) plus ``.dict.dz`` (dictzip, which ``gzip`` reads). An entry looks like::

    house /hˈaʊs/
    Haus <neut>
          "build a house"  - ein Haus bauen
     see: {houses}, {open house}

The first line is the headword (then pronunciation and grammar); unindented lines after it are
translations; indented lines are examples, notes, synonyms and cross-references.
"""

from __future__ import annotations

import gzip
import re
import unicodedata
from pathlib import Path
from typing import Any, NamedTuple

from tqdm import tqdm

from crossalign.data.corpora.card import (
    CorpusBuild,
    PairSet,
    missing_package,
    package_source,
    write_dictionaries,
)
from crossalign.errors import CrossalignError
from crossalign.languages import to_iso639_1

DICTD_ROOT = Path("/usr/share/dictd")

FILTERS = [
    "headword taken from the entry's first line (not the normalised index key); single word only",
    "entries of multi-word headwords cut to their first word dropped (eng-spa 'go /gouæstrei/' "
    "is 'go astray'): their pronunciation extends that of another entry of the headword or is "
    "6+ characters longer than it",
    "examples, notes, synonyms and cross-references (indented lines) ignored",
    "translations split on commas and semicolons; sense numbers, (...), [...], {...}, <...> and "
    "placeholders ending in '.' (etw., jdm., sth.) removed",
    "only single-word translations made of letters (and combining marks) kept",
    "both sides lowercased",
]

_B64_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64 = {c: i for i, c in enumerate(_B64_DIGITS)}
_DICT_NAME = re.compile(r"[a-z]{3}-[a-z]{3}")
_NOTES = re.compile(r"\([^)]*\)|\[[^\]]*\]|\{[^}]*\}|<[^>]*>")
_SENSE = re.compile(r"^\s*\d+\.\s+")
_STRESS = str.maketrans("", "", "ˈˌːˑ. ")
_PRONUNCIATION = re.compile(r"\s/(?=\S)([^/]*)/")
# a pronunciation this many characters longer than its headword belongs to a longer headword
_CUT_SLACK = 6


class Entry(NamedTuple):
    """One dictd entry: headword and pronunciation as written, and its translations."""

    headword: str
    pronunciation: str
    translations: list[str]


def dict_package(name: str) -> str:
    """Debian package of a FreeDict database (``eng-deu`` -> ``dict-freedict-eng-deu``)."""
    return f"dict-freedict-{name}"


def b64_number(text: str) -> int:
    """Decode a dictd index number (base64 digits, most significant first)."""
    number = 0
    for char in text:
        number = number * 64 + _B64[char]
    return number


def is_word(text: str) -> bool:
    """True for one word of letters (combining marks allowed, as in Hindi ``कोण``)."""
    return any(unicodedata.category(c).startswith("L") for c in text) and all(
        unicodedata.category(c)[0] in "LM" for c in text
    )


def parse_entry(entry: str) -> Entry:
    """Headword, pronunciation (without stress marks) and raw translations of a dictd entry."""
    lines = entry.splitlines() or [""]
    first = lines[0].strip()
    found = _PRONUNCIATION.search(first)
    head = first[: found.start()] if found else first
    headword = re.sub(r"\s*<[^>]*>\s*$", "", head).strip()
    pronunciation = found.group(1).translate(_STRESS) if found else ""
    translations = []
    for line in lines[1:]:
        if line[:1].isspace() and not line.lstrip().startswith("["):
            continue
        text = _NOTES.sub(" ", _SENSE.sub("", line))
        translations += [part.strip() for part in re.split(r"[,;]", text)]
    return Entry(headword, pronunciation, translations)


def cut_headwords(entries: list[Entry]) -> set[int]:
    """Indices of entries whose headword is the first word of a longer, multi-word headword.

    Their pronunciation gives them away: it extends the pronunciation of another entry of the
    same headword (``go /gou/`` and ``go /gouæstrei/``), or is far longer than the headword.
    """
    spoken: dict[str, set[str]] = {}
    for entry in entries:
        if entry.pronunciation:
            spoken.setdefault(entry.headword.lower(), set()).add(entry.pronunciation)
    cut = set()
    for i, (headword, pronunciation, _) in enumerate(entries):
        if not pronunciation:
            continue
        others = spoken[headword.lower()] - {pronunciation}
        if len(pronunciation) >= len(headword) + _CUT_SLACK or any(
            pronunciation.startswith(other) for other in others
        ):
            cut.add(i)
    return cut


def word_pairs(entry: Entry) -> list[tuple[str, str]]:
    """Clean lowercase single-word ``(headword, translation)`` pairs of one entry."""
    headword = entry.headword.lower()
    if not is_word(headword):
        return []
    pairs = []
    for translation in entry.translations:
        words = [w for w in translation.split() if not w.endswith(".")]
        if len(words) == 1 and is_word(words[0]):
            pairs.append((headword, words[0].lower()))
    return pairs


def _dict_files(root: Path, name: str) -> tuple[Path, Path]:
    """The ``.index`` and ``.dict.dz`` of ``name``; raises naming the package when missing."""
    index = root / f"freedict-{name}.index"
    data = root / f"freedict-{name}.dict.dz"
    for path in (index, data):
        if not path.is_file():
            raise missing_package(dict_package(name), path)
    return index, data


def dictionary_pairs(name: str, root: str | Path = DICTD_ROOT) -> list[tuple[str, str]]:
    """All clean single-word pairs of the FreeDict database ``name`` (e.g. ``eng-deu``)."""
    index, data = _dict_files(Path(root), name)
    with gzip.open(data) as f:
        blob = f.read()
    spans: dict[tuple[int, int], None] = {}
    for line in index.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and not fields[0].startswith(("00database", "00-database")):
            spans[(b64_number(fields[1]), b64_number(fields[2]))] = None
    entries = [
        parse_entry(blob[start : start + length].decode("utf-8", errors="replace"))
        for start, length in tqdm(spans, desc=name, unit="entry", disable=None)
    ]
    cut = cut_headwords(entries)
    return [pair for i, e in enumerate(entries) if i not in cut for pair in word_pairs(e)]


def check_dicts(names: list[str]) -> list[tuple[str, str, str]]:
    """``(name, src, tgt)`` for each FreeDict name, with ISO 639-1 codes (``eng-deu`` -> en, de)."""
    checked = []
    for name in names:
        if not _DICT_NAME.fullmatch(name):
            raise CrossalignError(
                f"dictionary '{name}': expected an ISO 639-3 pair such as eng-deu, as in the "
                f"package name dict-freedict-eng-deu"
            )
        src, tgt = name.split("-")
        checked.append((name, to_iso639_1(src), to_iso639_1(tgt)))
    if len({n for n, _, _ in checked}) != len(checked):
        raise CrossalignError(f"a dictionary is repeated in {' '.join(names)}")
    return checked


def build_freedict(
    out: str | Path,
    names: list[str],
    *,
    seed: int = 0,
    n_valid: int = 500,
    n_test: int = 1500,
    root: str | Path = DICTD_ROOT,
    command: str = "",
) -> dict[str, Any]:
    """Build MUSE dictionaries under ``out`` for FreeDict databases ``names``; returns the card."""
    checked = check_dicts(names)
    for name, _, _ in checked:
        _dict_files(Path(root), name)
    sets = [
        PairSet(src, tgt, dictionary_pairs(name, root), [dict_package(name)])
        for name, src, tgt in checked
    ]
    return write_dictionaries(
        out,
        sets,
        CorpusBuild(
            builder="freedict",
            sources=[package_source(dict_package(name), f"{name}/*") for name, _, _ in checked],
            filters=FILTERS,
            seed=seed,
            n_valid=n_valid,
            n_test=n_test,
            command=command,
        ),
    )
