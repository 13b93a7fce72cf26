"""The files of a gold bilingual dictionary, in crossalign's layout or in MUSE's.

- crossalign (``crossalign data freedict``): a folder ``<src>-<tgt>/`` holding ``train.txt``,
  ``valid.txt``, ``test.txt`` and ``full.txt`` (all splits together).
- MUSE (Conneau et al. 2018, ``crosslingual/dictionaries/``): one folder for every pair, with
  ``<src>-<tgt>.0-5000.txt`` (train: the 5000 most frequent source words),
  ``<src>-<tgt>.5000-6500.txt`` (test: the next 1500) and ``<src>-<tgt>.txt`` (full: every pair).

Evaluation reads two files: the *test* file gives the evaluated source words and their gold
translations; the *full* file gives the vocabularies (its target column: the candidate targets
every source word is retrieved among; its source column: the source vocabulary of CSLS's
neighbourhood term). A train file is never read by an evaluation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from crossalign.errors import CrossalignError

MUSE_SPLIT = re.compile(r"^(?P<src>[^-.]+)-(?P<tgt>[^.]+)\.(?P<lo>\d+)-(?P<hi>\d+)\.txt$")
"""``en-de.0-5000.txt``, ``en-de.5000-6500.txt``: a MUSE split, named by frequency ranks."""
MUSE_FULL = re.compile(r"^(?P<src>[^-.]+)-(?P<tgt>[^.]+)\.txt$")
"""``en-de.txt``: a MUSE full dictionary."""
MUSE_TEST_RANKS = "5000-6500"
"""The ranks of MUSE's test split (its train split is ``0-5000``)."""


@dataclass(frozen=True)
class DictionaryFiles:
    """The files of one dictionary."""

    test: Path
    """The gold pairs evaluated."""
    full: Path | None
    """Every pair of the dictionary (the vocabularies); None when there is none beside ``test``
    (or ``test`` is itself the full dictionary: then ``full == test``)."""
    pair: tuple[str, str] | None
    """The languages of the file's columns (first, second), from the file or folder name;
    None when the name does not tell."""


def _pair_of_folder(folder: Path) -> tuple[str, str] | None:
    src, sep, tgt = folder.name.partition("-")
    return (src, tgt) if sep and src and tgt else None


def _muse_folder(folder: Path, languages: tuple[str, str] | None) -> DictionaryFiles:
    tests = sorted(
        p.name
        for p in folder.iterdir()
        if (m := MUSE_SPLIT.match(p.name)) and f"{m['lo']}-{m['hi']}" == MUSE_TEST_RANKS
    )
    if not tests:
        raise CrossalignError(
            f"dictionary folder {folder} has neither test.txt (crossalign layout) nor "
            f"<src>-<tgt>.{MUSE_TEST_RANKS}.txt (MUSE layout); give the file itself as --dict"
        )
    if languages is not None:
        name = f"{languages[0]}-{languages[1]}.{MUSE_TEST_RANKS}.txt"
        if name not in tests:
            raise CrossalignError(
                f"dictionary folder {folder} has no {name} (it has {', '.join(tests[:6])}"
                f"{' ...' if len(tests) > 6 else ''}); check --src/--tgt and --reverse"
            )
    elif len(tests) == 1:
        name = tests[0]
    else:
        raise CrossalignError(
            f"dictionary folder {folder} holds {len(tests)} MUSE test files "
            f"({', '.join(tests[:6])}{' ...' if len(tests) > 6 else ''}); say which pair with "
            f"--src and --tgt"
        )
    return muse_file(folder / name)


def muse_file(path: Path) -> DictionaryFiles:
    """A MUSE split ``<src>-<tgt>.<lo>-<hi>.txt`` with its full dictionary ``<src>-<tgt>.txt``
    beside it (None when absent)."""
    m = MUSE_SPLIT.match(path.name)
    if m is None:
        raise CrossalignError(f"{path} is not named <src>-<tgt>.<lo>-<hi>.txt")
    full = path.with_name(f"{m['src']}-{m['tgt']}.txt")
    return DictionaryFiles(path, full if full.is_file() else None, (m["src"], m["tgt"]))


def dictionary_files(path: str | Path, languages: tuple[str, str] | None = None) -> DictionaryFiles:
    """The test and full files of the dictionary at ``path``, a folder or a file.

    - a folder with ``test.txt``: crossalign's layout; test ``test.txt``, full ``full.txt``;
      languages from the folder name ``<src>-<tgt>``;
    - another folder: MUSE's layout; test ``<l1>-<l2>.5000-6500.txt``, full ``<l1>-<l2>.txt``,
      with ``languages`` = (l1, l2) the languages of the file's columns, needed when the folder
      holds several pairs;
    - a file ``<l1>-<l2>.<lo>-<hi>.txt`` (a MUSE split): it is the test file, full
      ``<l1>-<l2>.txt`` beside it;
    - a file ``<l1>-<l2>.txt`` (MUSE's full dictionary): test and full at once;
    - any other file: it is the test file, full ``full.txt`` beside it (the file itself when
      it is ``full.txt``); languages from the folder name ``<src>-<tgt>``.

    Raises CrossalignError for a missing path and for a folder with no test file.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "test.txt").is_file():
            full = path / "full.txt"
            return DictionaryFiles(
                path / "test.txt", full if full.is_file() else None, _pair_of_folder(path)
            )
        return _muse_folder(path, languages)
    if not path.is_file():
        raise CrossalignError(f"dictionary {path} does not exist (give a file or a folder)")
    if MUSE_SPLIT.match(path.name):
        return muse_file(path)
    if m := MUSE_FULL.match(path.name):
        return DictionaryFiles(path, path, (m["src"], m["tgt"]))
    full = path.with_name("full.txt")
    return DictionaryFiles(path, full if full.is_file() else None, _pair_of_folder(path.parent))
