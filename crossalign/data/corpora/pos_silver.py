"""English part-of-speech data free to use: the LibreOffice help pages tagged by spaCy.

The English help pages of Debian's ``libreoffice-help-en-us`` (MPL-2.0) under
``/usr/share/libreoffice/help/en-US/text/`` are read paragraph by paragraph (headings included) with
``crossalign.data.corpora.libreoffice.page_paragraphs``, split into sentences and tagged with the 17
Universal POS tags (``token.pos_``) by spaCy's English pipeline (``SPACY_MODEL``). The tags are
*silver*: a tagger's predictions, not gold annotation (the model's card reports 97.3% accuracy of
its fine-grained Penn tags on its own evaluation data; on help-page text, with its menu paths and UI
labels, expect worse).

The tagged sentences are built once and cached as ``sentences.jsonl`` (one
``{"words": [...], "tags": [...]}`` per line) with a ``card.json`` under
``$XDG_CACHE_HOME/crossalign/pos-silver`` (``~/.cache/crossalign``); the cache is rebuilt when its
key changes: the spaCy and model versions, the help package version, the help root or
``FORMAT``.
"""

from __future__ import annotations

import json
from collections import Counter
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

Tagged = list[tuple[list[str], list[str]]]

HELP_PACKAGE = help_package(ENGLISH)
LICENCE = "MPL-2.0"
MIN_TOKENS = 3
MAX_TOKENS = 60
FORMAT = 1
"""Version of the filters and the cache format: bump it when either changes, so caches rebuild."""
SENTENCES = "sentences.jsonl"
CARD = "card.json"

FILTERS = [
    "paragraphs and headings of the en-US help pages as "
    "crossalign.data.corpora.libreoffice reads them "
    "(embedded sections and hidden platform variants skipped)",
    "repeated paragraphs tagged once (first occurrence)",
    "sentences as spaCy's parser splits a paragraph; whitespace tokens (SPACE) dropped",
    f"sentences with fewer than {MIN_TOKENS} or more than {MAX_TOKENS} tokens dropped "
    "(punctuation counts)",
    "sentences without a letter dropped",
    "repeated sentences (same tokens) kept once (first occurrence)",
]


def help_paragraphs(root: str | Path = HELP_ROOT) -> tuple[list[str], int]:
    """(the distinct paragraph texts of the en-US help pages under ``root``, in sorted page
    order and document order, first occurrence kept; the number of pages). Raises naming
    ``apt-get install libreoffice-help-en-us`` when the pages are missing."""
    en_dir, pages = help_pages(root, ENGLISH)
    seen: dict[str, None] = {}
    for page in pages:
        for text in page_paragraphs(en_dir / page).values():
            if text:
                seen.setdefault(text, None)
    return list(seen), len(pages)


def tag_paragraphs(
    paragraphs: list[str], nlp, batch_size: int = 256
) -> tuple[Tagged, dict[str, int]]:
    """The filtered, distinct sentences of ``paragraphs`` as (words, Universal POS tags) by the
    spaCy pipeline ``nlp`` (``FILTERS``), in order; and the counts of sentences seen and
    dropped by each filter."""
    from tqdm.auto import tqdm

    out: Tagged = []
    seen: set[tuple[str, ...]] = set()
    counts = Counter(sentences_seen=0, short=0, long=0, no_letter=0, duplicate=0)
    docs = nlp.pipe(paragraphs, batch_size=batch_size)
    for doc in tqdm(docs, total=len(paragraphs), desc="tag", unit="paragraph", mininterval=2):
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
                        f"tags; is {nlp.meta.get('name')} an English UD-tagging pipeline?"
                    )
                out.append((list(words), tags))
    return out, dict(counts)


def cache_key(root: str | Path = HELP_ROOT) -> dict[str, Any]:
    """What the cached sentences depend on (read without loading spaCy): ``FORMAT``, the spaCy
    and model versions, the help package version and the help root."""
    from crossalign.data.derive.derivation import SPACY_MODEL

    return {
        "format": FORMAT,
        "spacy": installed_version("spacy"),
        "model": SPACY_MODEL,
        "model_version": installed_version(SPACY_MODEL),
        "help_package": HELP_PACKAGE,
        "help_version": package_version(HELP_PACKAGE),
        "root": str(Path(root).resolve()),
    }


def read_cache(directory: Path, key: dict[str, Any]) -> Tagged | None:
    """The cached sentences in ``directory`` when its card has ``key`` and the sentence count
    matches; else None (also for an unreadable cache: it is rebuilt)."""
    try:
        card = json.loads((directory / CARD).read_text(encoding="utf-8"))
        if card["key"] != key:
            return None
        with open(directory / SENTENCES, encoding="utf-8") as f:
            sentences = [(r["words"], r["tags"]) for r in map(json.loads, f)]
        complete = len(sentences) == card["counts"]["sentences"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sentences if complete else None


def silver_sentences(
    root: str | Path = HELP_ROOT, cache: str | Path | None = None, batch_size: int = 256
) -> Tagged:
    """The tagged sentences of the en-US help pages under ``root``: read from the cache
    directory ``cache`` (default ``cache_dir()/pos-silver``) when its key matches, else tagged
    with spaCy and cached with a card (source, licence, tagger, counts, filters)."""
    directory = Path(cache) if cache is not None else cache_dir() / "pos-silver"
    key = cache_key(root)
    cached = read_cache(directory, key)
    if cached is not None:
        return cached
    paragraphs, n_pages = help_paragraphs(root)
    from crossalign.data.derive.derivation import load_spacy

    nlp = load_spacy(parse=True)
    sentences, counts = tag_paragraphs(paragraphs, nlp, batch_size)
    tagger = f"{key['model']} {nlp.meta.get('version')} (spaCy {key['spacy']})"
    card = {
        "task": "pos-silver",
        "source": {**package_source(HELP_PACKAGE), "root": key["root"]},
        "licence": LICENCE,
        "tags": f"silver: tags predicted by {tagger}, not gold",
        "key": key,
        "counts": {
            "pages": n_pages,
            "paragraphs": len(paragraphs),
            **counts,
            "sentences": len(sentences),
            "words": sum(len(w) for w, _ in sentences),
        },
        "tag_counts": dict(Counter(t for _, tags in sentences for t in tags).most_common()),
        "filters": FILTERS,
    }
    with atomic_dir(directory) as tmp:
        with open(tmp / SENTENCES, "w", encoding="utf-8") as f:
            for words, tags in sentences:
                f.write(json.dumps({"words": words, "tags": tags}, ensure_ascii=False) + "\n")
        (tmp / CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return sentences


def pos_silver_splits(
    seed: int = 0,
    n_test: int = 2000,
    root: str | Path = HELP_ROOT,
    cache: str | Path | None = None,
) -> dict[str, Tagged]:
    """``silver_sentences`` split as ``crossalign.data.corpora.pos.pos_splits`` splits: a seeded
    ``n_test`` sentences for ``test``, the rest ``train``, each in corpus order."""
    sentences = silver_sentences(root, cache)
    if n_test >= len(sentences):
        raise CrossalignError(
            f"pos-silver has {len(sentences)} sentences, too few for {n_test} test sentences; "
            f"is {HELP_PACKAGE} complete?"
        )
    return seeded_split(sentences, seed, n_test)
