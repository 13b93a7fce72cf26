"""English–X paragraph pairs from the LibreOffice help pages in Debian's ``libreoffice-help-*``.

Every language ships the same HTML pages under ``/usr/share/libreoffice/help/<lang>/text/``;
paragraphs and headings carry stable ids (``<p id="par_id3154272">``, ``<h2 id="hd_id...">``),
so a page path plus an id pairs a translated paragraph with its ``en-US`` original.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
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
from crossalign.errors import CrossalignError
from crossalign.languages import check_language

HELP_ROOT = Path("/usr/share/libreoffice/help")
ENGLISH = "en-US"

FILTERS = [
    "only <p> and <h1>-<h6> with a par_id/hd_id id; text of nested markup kept",
    "sections embedded from other pages (div.embedded) skipped: they repeat those pages",
    "hidden platform/application variants skipped, the default variant kept (Ctrl, not Command)",
    "pairs with an empty side dropped",
    "pairs whose target equals the English (untranslated) dropped",
    "pairs whose English has no letter (numbers, symbols) dropped",
]

# elements without an end tag that can occur inside a paragraph
_VOID = {"area", "br", "col", "embed", "hr", "img", "input", "source", "track", "wbr"}
_BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6"}
_ID = re.compile(r"(?:par|hd)_id\w*")


def help_package(lang: str) -> str:
    """Debian package with the help pages of ``lang`` (``zh-CN`` -> ``libreoffice-help-zh-cn``)."""
    return f"libreoffice-help-{lang.lower()}"


class _ParagraphParser(HTMLParser):
    """Collects ``{id: text}`` of the id-carrying paragraphs and headings of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: dict[str, str] = {}
        self._current: str | None = None
        self._text: list[str] = []
        self._depth = 0  # open elements inside the current paragraph
        self._hidden = 0  # open elements inside a hidden variant
        self._embedded = 0  # open <div> elements inside an embedded section

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if tag == "br" and self._current is not None:
                self._text.append(" ")
            return
        attr = dict(attrs)
        if self._embedded:
            if tag == "div":
                self._embedded += 1
        elif tag == "div" and "embedded" in (attr.get("class") or "").split():
            self._embedded = 1
        elif self._current is None:
            if tag in _BLOCKS and _ID.fullmatch(attr.get("id") or ""):
                self._current, self._text, self._depth = attr["id"], [], 1
        else:
            self._depth += 1
            if self._hidden:
                self._hidden += 1
            elif "hidden" in attr and not (attr.get("id") or "").startswith("default"):
                self._hidden = 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if self._embedded:
            if tag == "div":
                self._embedded -= 1
        elif self._current is not None:
            self._depth -= 1
            self._hidden = max(0, self._hidden - 1)
            if self._depth == 0:
                text = " ".join("".join(self._text).split())
                self.paragraphs.setdefault(self._current, text)
                self._current = None

    def handle_data(self, data: str) -> None:
        if self._current is not None and not self._hidden and not self._embedded:
            self._text.append(data)


def page_paragraphs(path: str | Path) -> dict[str, str]:
    """``{paragraph id: text}`` of one help page, in document order (first of a repeated id)."""
    parser = _ParagraphParser()
    parser.feed(Path(path).read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser.paragraphs


def _help_dir(root: Path, lang: str) -> Path:
    """``root/<lang>/text``; raises naming the package when it is missing."""
    text_dir = root / lang / "text"
    if not text_dir.is_dir():
        raise missing_package(help_package(lang), text_dir)
    return text_dir


def help_pages(root: str | Path = HELP_ROOT, lang: str = ENGLISH) -> tuple[Path, list[Path]]:
    """(``root/<lang>/text``, its ``*.html`` pages relative to it, sorted); raises naming the
    package when it is missing."""
    text_dir = _help_dir(Path(root), lang)
    return text_dir, sorted(p.relative_to(text_dir) for p in text_dir.rglob("*.html"))


def page_pairs(
    page: Path, en_dir: Path, lang_dirs: dict[str, Path]
) -> dict[str, list[tuple[str, str]]]:
    """``{lang: [(english, translation), ...]}`` of one page (``page`` relative to ``en_dir``)."""
    english = page_paragraphs(en_dir / page)
    pairs: dict[str, list[tuple[str, str]]] = {lang: [] for lang in lang_dirs}
    for lang, lang_dir in lang_dirs.items():
        if not english or not (lang_dir / page).is_file():
            continue
        translated = page_paragraphs(lang_dir / page)
        for par_id, en_text in english.items():
            text = translated.get(par_id, "")
            if text and en_text and text != en_text and any(c.isalpha() for c in en_text):
                pairs[lang].append((en_text, text))
    return pairs


def libreoffice_pairs(
    langs: list[str], root: str | Path = HELP_ROOT
) -> dict[str, list[tuple[str, str]]]:
    """``{lang: [(english, translation), ...]}`` for each of ``langs``, filtered, in page order."""
    root = Path(root)
    en_dir, pages = help_pages(root, ENGLISH)
    lang_dirs = {lang: _help_dir(root, lang) for lang in langs}
    pairs: dict[str, list[tuple[str, str]]] = {lang: [] for lang in langs}
    for page in tqdm(pages, desc="help pages", unit="page", disable=None):
        for lang, page_result in page_pairs(page, en_dir, lang_dirs).items():
            pairs[lang] += page_result
    return pairs


def check_langs(langs: list[str]) -> list[str]:
    """Validated target languages: known codes, no English, no repeats."""
    for lang in langs:
        check_language(lang, "--langs")
        if lang in ("en", ENGLISH):
            raise CrossalignError(f"--langs: '{lang}' is the English side of every pair; drop it")
    if len(set(langs)) != len(langs):
        raise CrossalignError(f"--langs: a language is repeated in {','.join(langs)}")
    return langs


def build_libreoffice(
    out: str | Path,
    langs: list[str],
    *,
    seed: int = 0,
    n_valid: int = 500,
    n_test: int = 500,
    root: str | Path = HELP_ROOT,
    command: str = "",
) -> dict[str, Any]:
    """Build an ``en-<lang>`` paragraph corpus under ``out`` per language; returns the card."""
    langs = check_langs(langs)
    pairs = libreoffice_pairs(langs, root)
    packages = [help_package(ENGLISH), *(help_package(lang) for lang in langs)]
    sets = [PairSet("en", lang, pairs[lang], [packages[0], help_package(lang)]) for lang in langs]
    return write_parallel(
        out,
        sets,
        CorpusBuild(
            builder="libreoffice",
            sources=[package_source(p) for p in packages],
            filters=FILTERS,
            seed=seed,
            n_valid=n_valid,
            n_test=n_test,
            command=command,
        ),
    )
