"""English prose from the Debian SWORD commentary modules, read with ``pysword``: more English
text for a derived language (``crossalign data derive --corpus data/bible --corpus OUT/en.txt``).

Sources (public domain): ``sword-comm-tdavid`` (C. H. Spurgeon's *Treasury of David*,
1869-1885, module ``TDavid``: 2.13 million words on the Psalms, one entry per psalm) and
``sword-comm-mhcc`` (*Matthew Henry's Concise Commentary*, module ``MHCC``: 0.70 million words,
one entry per verse range). Each entry is split into its paragraphs (the modules separate them
with runs of spaces); one paragraph per output line. Some lines are single lines of quoted
verse or list items rather than prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from crossalign.data.corpora.bible import SWORD_ROOT, cache_blocks, clean_verse, conf_path
from crossalign.data.corpora.card import missing_package, package_source
from crossalign.errors import CrossalignError


@dataclass(frozen=True)
class Commentary:
    """A SWORD commentary module and the Debian package that installs it."""

    name: str
    package: str


COMMENTARIES = {
    "tdavid": Commentary("TDavid", "sword-comm-tdavid"),
    "mhcc": Commentary("MHCC", "sword-comm-mhcc"),
}

FILTERS = [
    "OSIS markup removed (pysword clean=True)",
    "entries split into paragraphs at runs of three or more spaces",
    "verse-range headings ('Verses 3-5') and outline lines ending in a verse range "
    "('Abram returns out of Egypt.(1-4)') dropped",
    "paragraphs under min_words words dropped; repeated paragraphs kept once",
]

# zCom/zCom4 store entries as zText/zText4 do (index records of 10 and 12 bytes); pysword reads
# them with its Bible classes.
_DRIVERS = {10: "ztext", 12: "ztext4"}
_PARAGRAPH = re.compile(r"\s{3,}")
# "Verses 3-5" alone, or an outline line with its verse range attached: "riches.(1-4)" (a
# citation year after a space, "Spurstowe (1666)", is prose)
_HEADING = re.compile(r"^Verses?\s+[\d,\s-]+\.?$|\S\(\d+(-\d+)?\)$")


def module_conf(root: Path, module: Commentary) -> dict[str, str]:
    """``key=value`` lines of the module's ``mods.d`` conf (name matched case-insensitively)."""
    conf = conf_path(root, module.name)
    if conf is None:
        raise missing_package(module.package, root / "mods.d" / f"{module.name.lower()}.conf")
    lines = conf.read_text(encoding="utf-8", errors="replace").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def index_entries(books: Iterable[Any]) -> int:
    """Entries of a testament's verse index: module and testament headings, then a heading per
    book and per chapter, then the verses (SWORD's verse-key layout)."""
    books = list(books)
    chapters = sum(b.num_chapters for b in books)
    return 2 + len(books) + chapters + sum(sum(b.chapter_lengths) for b in books)


def _open(root: Path, module: Commentary) -> Any:
    """pysword's reader of the module's verse-keyed compressed store. The driver is read off
    the index's record size, not the conf's ``ModDrv``: MHCC's conf says zCom4 while its
    index has zCom's 10-byte records."""
    from crossalign.extras import require

    pysword = require("pysword.bible", "bible", "crossalign data commentary")
    conf = module_conf(root, module)
    path = root / conf.get("DataPath", "").lstrip("./")
    block = conf.get("BlockType", "BOOK").upper()
    versification = conf.get("Versification", "kjv").lower()
    settings = (versification, conf.get("Encoding", "UTF-8").lower(), "OSIS", block,
                conf.get("CompressType", "ZIP").upper())  # fmt: skip
    probe = pysword.SwordBible(str(path), "ztext", *settings)
    index = path / f"ot.{block[0].lower()}zv"
    entries = index_entries(probe.get_structure().get_books()["ot"])
    record, leftover = divmod(index.stat().st_size, entries) if index.is_file() else (0, 0)
    driver = _DRIVERS.get(record)
    if driver is None or leftover:
        raise CrossalignError(
            f"{index}: not the verse index of a zCom or zCom4 module with the {versification} "
            f"versification (ModDrv {conf.get('ModDrv')!r}); reinstall {module.package}"
        )
    return cache_blocks(pysword.SwordBible(str(path), driver, *settings))


def paragraphs(entry: str, min_words: int = 5) -> list[str]:
    """The entry's paragraphs (split at runs of three or more spaces), whitespace collapsed,
    without verse-range headings, outline lines and paragraphs under ``min_words`` words."""
    out = []
    for part in _PARAGRAPH.split(entry):
        text = clean_verse(part)
        if len(text.split()) >= min_words and not _HEADING.search(text):
            out.append(text)
    return out


def read_commentary(root: Path, module: Commentary, min_words: int = 5) -> list[str]:
    """The paragraphs of ``module`` in canonical order, each once."""
    reader = _open(root, module)
    books = [b for testament in reader.get_structure().get_books().values() for b in testament]
    seen: dict[str, None] = {}
    for book in tqdm(books, desc=module.name, unit="book", disable=None):
        for chapter in range(1, book.num_chapters + 1):
            for entry in reader.get_iter(books=[book.name], chapters=[chapter], clean=True):
                seen.update(dict.fromkeys(paragraphs(entry, min_words)))
    return list(seen)


def build_commentary(
    out: str | Path,
    modules: Iterable[str] = tuple(COMMENTARIES),
    *,
    min_words: int = 5,
    root: str | Path = SWORD_ROOT,
    command: str = "",
) -> dict[str, Any]:
    """Write ``out/en.txt`` (one paragraph per line, the modules in the given order, each
    paragraph once) and ``out/card.json``, atomically; returns the card."""
    from crossalign.fileio import atomic_dir, write_json_atomic, write_lines_atomic

    if min_words < 1:
        raise CrossalignError(f"--min-words {min_words}: give at least 1 (empty lines are no text)")
    chosen = []
    for name in modules:
        if name not in COMMENTARIES:
            raise CrossalignError(
                f"unknown commentary '{name}'; choose from {', '.join(COMMENTARIES)}"
            )
        chosen.append(COMMENTARIES[name])
    root = Path(root)
    lines: dict[str, None] = {}
    counts = {}
    for module in chosen:
        found = read_commentary(root, module, min_words)
        counts[module.name] = {
            "paragraphs": len(found),
            "words": sum(len(p.split()) for p in found),
        }
        lines.update(dict.fromkeys(found))
    card = {
        "builder": "commentary",
        "format": "text",
        "languages": ["en"],
        "command": command,
        "sources": [package_source(m.package) for m in chosen],
        "filters": FILTERS,
        "min_words": min_words,
        "modules": counts,
        "lines": len(lines),
        "words": sum(len(p.split()) for p in lines),
        "files": {"en": "en.txt"},
    }
    with atomic_dir(out) as tmp:
        write_lines_atomic(tmp / "en.txt", list(lines))
        write_json_atomic(tmp / "card.json", card)
    return card
