"""English–Spanish Bible verse pairs from the Debian SWORD modules, read with ``pysword``.

Sources: ``sword-text-kjv`` (King James Version, module ``engKJV2006eb``) and
``sword-text-sparv`` (Reina-Valera 1909, module ``spaRV1909eb``); both public domain. Verses are
joined by their key (book, chapter, verse) in the KJV versification both modules declare.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from crossalign.data.corpora.card import (
    CorpusBuild,
    PairSet,
    missing_package,
    package_source,
    write_parallel,
)

SWORD_ROOT = Path("/usr/share/sword")

VerseKey = tuple[str, int, int]


@dataclass(frozen=True)
class BibleModule:
    """A SWORD Bible module and the Debian package that installs it."""

    name: str
    lang: str
    package: str
    drop_caps: bool = False


ENGLISH = BibleModule("engKJV2006eb", "en", "sword-text-kjv")
SPANISH = BibleModule("spaRV1909eb", "es", "sword-text-sparv", drop_caps=True)

FILTERS = [
    "OSIS markup removed (pysword clean=True), including notes and Strong's numbers",
    "leaked USFM markers (\\nd), pilcrows and [ ] around supplied words removed",
    "Spanish chapter-initial capitals (EN el principio) restored to sentence case",
    "chapters with an empty verse on either side dropped (the Spanish module's own "
    "versification differs there), and the next chapter too when the empty verse ends a chapter",
    "pairs with an empty side dropped",
]

_USFM = re.compile(r"\\\+?[a-z]+\d*\*?")
_WORD = re.compile(r"^(\W*)(\w+)(\W*)$")


def conf_path(root: Path, name: str) -> Path | None:
    """SWORD module ``name``'s ``mods.d/*.conf`` file (names are matched case-insensitively)."""
    mods = root / "mods.d"
    if not mods.is_dir():
        return None
    for conf in mods.glob("*.conf"):
        if conf.stem.lower() == name.lower():
            return conf
    return None


def _open_bible(root: Path, module: BibleModule) -> Any:
    """A pysword Bible for ``module`` under ``root``; raises if its package is not installed."""
    from crossalign.extras import require

    SwordModules = require("pysword.modules", "bible", "crossalign data bible").SwordModules
    if conf_path(root, module.name) is None:
        raise missing_package(module.package, root / "mods.d" / f"{module.name}.conf")
    modules = SwordModules(str(root))
    modules.parse_modules()
    return cache_blocks(modules.get_bible_from_module(module.name))


def cache_blocks(reader: Any) -> Any:
    """``reader`` (a pysword module reader) with its last decompressed blocks cached: pysword
    decompresses the whole block (a book) for every verse it reads, and caching makes reading
    a module take seconds instead of half a minute."""
    if hasattr(reader, "_decompressed_text"):
        reader._decompressed_text = functools.lru_cache(maxsize=4)(reader._decompressed_text)
    return reader


def read_verses(root: Path, module: BibleModule) -> dict[VerseKey, str]:
    """Cleaned text of every verse slot of ``module``, keyed by (OSIS book, chapter, verse).

    Empty slots (verses the module does not have) map to ``""``.
    """
    bible = _open_bible(root, module)
    books = [b for testament in bible.get_structure().get_books().values() for b in testament]
    verses: dict[VerseKey, str] = {}
    for book in tqdm(books, desc=f"{module.name}", unit="book", disable=None):
        for chapter in range(1, book.num_chapters + 1):
            texts = bible.get_iter(books=[book.name], chapters=[chapter], clean=True)
            for verse, text in enumerate(texts, 1):
                verses[(book.osis_name, chapter, verse)] = clean_verse(text)
    if module.drop_caps:
        casing = word_casing(verses.values())
        verses = {k: sentence_case_start(t, casing) for k, t in verses.items()}
    return verses


def clean_verse(text: str) -> str:
    """Verse text without leftover markup: USFM markers, pilcrows, brackets, extra spaces."""
    text = _USFM.sub("", text)
    text = text.replace("¶", " ").replace("[", "").replace("]", "")
    return " ".join(text.split())


def word_casing(texts: Iterable[str]) -> dict[str, str]:
    """The usual spelling of each word, from its non-initial, not all-capital occurrences.

    Maps lowercase ``jehová`` to ``Jehová``; used to undo capitals at the start of chapters.
    """
    counts: dict[str, Counter[str]] = {}
    for text in texts:
        for word in text.split()[1:]:
            m = _WORD.match(word)
            if m and not m.group(2).isupper():
                counts.setdefault(m.group(2).lower(), Counter())[m.group(2)] += 1
    return {key: forms.most_common(1)[0][0] for key, forms in counts.items()}


def sentence_case_start(text: str, casing: dict[str, str]) -> str:
    """Undo a printed drop-capital opening: ``EN el principio`` becomes ``En el principio``.

    The leading run of all-capital words is respelled with ``casing`` when a word with lowercase
    letters follows it; the first word and any word after a full stop get a capital.
    """
    words = text.split(" ")
    run = 0
    while run < len(words):
        m = _WORD.match(words[run])
        if not (m and m.group(2).isupper()):
            break
        run += 1
    if run == 0 or run == len(words) or not any(c.islower() for c in words[run]):
        return text
    capital = True
    for i in range(run):
        lead, core, trail = _WORD.findall(words[i])[0]
        core = casing.get(core.lower(), core.lower())
        if capital:
            core = core[0].upper() + core[1:]
        words[i] = lead + core + trail
        capital = trail.rstrip().endswith((".", "!", "?"))
    return " ".join(words)


def _misaligned_chapters(*sides: dict[VerseKey, str]) -> set[tuple[str, int]]:
    """Chapters where a side has an empty verse, plus the following chapter when that empty
    verse is the last of its chapter (the verse was moved into the next chapter)."""
    last_verse: dict[tuple[str, int], int] = {}
    for book, chapter, verse in sides[0]:
        last_verse[(book, chapter)] = max(verse, last_verse.get((book, chapter), 0))
    bad: set[tuple[str, int]] = set()
    for side in sides:
        for (book, chapter, verse), text in side.items():
            if not text:
                bad.add((book, chapter))
                if verse == last_verse[(book, chapter)]:
                    bad.add((book, chapter + 1))
    return bad


def bible_pairs(root: str | Path = SWORD_ROOT) -> list[tuple[str, str]]:
    """English–Spanish verse pairs in canonical order, aligned by verse key and filtered."""
    root = Path(root)
    english = read_verses(root, ENGLISH)
    spanish = read_verses(root, SPANISH)
    bad = _misaligned_chapters(english, spanish)
    return [
        (text, spanish.get(key, ""))
        for key, text in english.items()
        if key[:2] not in bad and text and spanish.get(key)
    ]


def build_bible(
    out: str | Path,
    *,
    seed: int = 0,
    n_valid: int = 1000,
    n_test: int = 1000,
    root: str | Path = SWORD_ROOT,
    command: str = "",
) -> dict[str, Any]:
    """Build the ``en-es`` verse corpus under ``out``; returns the data card."""
    pairs = bible_pairs(root)
    packages = [ENGLISH.package, SPANISH.package]
    return write_parallel(
        out,
        [PairSet(ENGLISH.lang, SPANISH.lang, pairs, packages)],
        CorpusBuild(
            builder="bible",
            sources=[package_source(p) for p in packages],
            filters=FILTERS,
            seed=seed,
            n_valid=n_valid,
            n_test=n_test,
            command=command,
        ),
    )
