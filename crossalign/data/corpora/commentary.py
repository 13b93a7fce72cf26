"""English prose from the Debian SWORD commentary modules, read with ``pysword``: more English
text for a derived language (``crossalign data derive --corpus data/bible OUT/en.txt``).

Source: ``sword-comm-tdavid`` (C. H. Spurgeon's *Treasury of David*, 1869-1885, module
``TDavid``, about 2.1 million words of 19th-century prose on the Psalms; public domain). Each
module entry (one per psalm) is split into its paragraphs (the module separates them with runs
of spaces); one paragraph per output line. ``sword-comm-mhcc`` is not offered: pysword reads
its zCom4 entries at the wrong offsets (Genesis 49 returns Exodus 9), and a wrong text is
worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from crossalign.data.corpora.bible import SWORD_ROOT, cache_blocks, clean_verse
from crossalign.data.corpora.card import missing_package, package_source
from crossalign.errors import CrossalignError


@dataclass(frozen=True)
class Commentary:
    """A SWORD commentary module and the Debian package that installs it."""

    name: str
    package: str


COMMENTARIES = {
    "tdavid": Commentary("TDavid", "sword-comm-tdavid"),
}

FILTERS = [
    "OSIS markup removed (pysword clean=True)",
    "entries split into paragraphs at runs of three or more spaces",
    "verse-range headings alone on their line ('Verses 3-5') dropped",
    "paragraphs under min_words words dropped; repeated paragraphs kept once",
]

# zCom/zCom4 store entries as zText/zText4 do; pysword reads them with its Bible classes.
_DRIVERS = {"zcom": "ztext", "zcom4": "ztext4", "ztext": "ztext", "ztext4": "ztext4"}
_PARAGRAPH = re.compile(r"\s{3,}")
_HEADING = re.compile(r"^Verses?\s+[\d,\s-]+\.?$")


def module_conf(root: Path, module: Commentary) -> dict[str, str]:
    """``key=value`` lines of the module's ``mods.d`` conf (name matched case-insensitively)."""
    for conf in (root / "mods.d").glob("*.conf"):
        if conf.stem.lower() == module.name.lower():
            lines = conf.read_text(encoding="utf-8", errors="replace").splitlines()
            return dict(line.split("=", 1) for line in lines if "=" in line)
    raise missing_package(module.package, root / "mods.d" / f"{module.name.lower()}.conf")


def _open(root: Path, module: Commentary) -> Any:
    """pysword's reader of the module's verse-keyed compressed store."""
    from crossalign.extras import require

    pysword = require("pysword.bible", "bible", "crossalign data commentary")
    conf = module_conf(root, module)
    driver = _DRIVERS.get(conf.get("ModDrv", "").lower())
    if driver is None:
        raise CrossalignError(
            f"{module.name}: module driver {conf.get('ModDrv')!r} is not a compressed "
            f"verse-keyed module (zCom, zCom4); choose one of {', '.join(COMMENTARIES)}"
        )
    path = root / conf.get("DataPath", "").lstrip("./")
    block = conf.get("BlockType", "BOOK").upper()
    reader = pysword.SwordBible._MODULE_CLASSES[driver](
        str(path), driver, conf.get("Versification", "kjv").lower(), "utf-8", "OSIS", block
    )
    return cache_blocks(reader)


def paragraphs(entry: str, min_words: int = 5) -> list[str]:
    """The entry's paragraphs (split at runs of three or more spaces), whitespace collapsed,
    without verse-range headings and paragraphs under ``min_words`` words."""
    out = []
    for part in _PARAGRAPH.split(entry):
        text = clean_verse(part)
        if len(text.split()) >= min_words and not _HEADING.match(text):
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
