"""What every corpus builder shares: package provenance, the seeded split, the output layout and
the data card (``card.json``).

A parallel corpus is written as ``OUT/<src>-<tgt>/{train,valid,test}.<src>`` and ``.<tgt>``
(line-aligned), a dictionary as ``OUT/<src>-<tgt>/{train,valid,test,full}.txt`` (``src tgt`` per
line). The whole of ``OUT`` is replaced atomically, so a failed build keeps the previous output.
"""

from __future__ import annotations

import random
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.fileio import atomic_dir, write_json_atomic, write_lines_atomic

SPLITS = ("train", "valid", "test")
CARD = "card.json"


@dataclass
class PairSet:
    """Aligned pairs (segments or words) of one language pair, ``src`` first."""

    src: str
    tgt: str
    pairs: list[tuple[str, str]]
    sources: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The pair directory name, e.g. ``en-zh-CN``."""
        return f"{self.src}-{self.tgt}"


def missing_package(package: str, path: str | Path) -> CrossalignError:
    """The one-line error for a Debian package that is not installed (``path`` is absent)."""
    return CrossalignError(
        f"{path} not found: Debian package {package} is not installed; "
        f"run: sudo apt-get install {package}"
    )


def package_version(package: str) -> str | None:
    """Installed version of a Debian package (``dpkg-query``), or None if unknown."""
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def package_licence(package: str, files: str = "*", doc_root: str | Path = "/usr/share/doc") -> str:
    """Short licence name of ``package`` from its machine-readable ``copyright`` file.

    ``files`` picks the ``Files:`` stanza (e.g. ``eng-deu/*`` for one FreeDict dictionary).
    Falls back to pointing at the copyright file when it cannot be parsed.
    """
    path = Path(doc_root) / package / "copyright"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    for stanza in re.split(r"\n\s*\n", text):
        files_m = re.search(r"^Files:\s*(.+)$", stanza, re.MULTILINE)
        licence_m = re.search(r"^License:\s*(\S.*)$", stanza, re.MULTILINE)
        if files_m and licence_m and files in files_m.group(1).split():
            return licence_m.group(1).strip()
    return f"see {path}"


def package_source(package: str, files: str = "*") -> dict[str, Any]:
    """Card entry for one source package: name, installed version and licence."""
    return {
        "package": package,
        "version": package_version(package),
        "licence": package_licence(package, files),
    }


def one_line(text: str) -> str:
    """``text`` with tabs, newlines and runs of whitespace collapsed to single spaces."""
    return " ".join(text.split())


def assign_splits(
    keys_by_pair: dict[str, Iterable[str]], n_valid: int, n_test: int, seed: int, cap: float = 0.1
) -> dict[str, str]:
    """One split (``train``, ``valid`` or ``test``) per distinct key, reproducibly from ``seed``.

    Each pair gets at least ``n_test`` test and ``n_valid`` valid keys, each capped at ``cap``
    of its keys so a small corpus keeps most of its data for training. A key shared by several
    pairs (an English segment) has the same split in all of them, so no held-out text is
    trained on through another pair; a pair that shares keys with a smaller one can get more.
    """
    quota: dict[str, dict[str, int]] = {}
    owners: dict[str, list[str]] = {}
    for pair in sorted(keys_by_pair):
        keys = set(keys_by_pair[pair])
        size = int(len(keys) * cap)
        quota[pair] = {"test": min(n_test, size), "valid": min(n_valid, size)}
        for key in keys:
            owners.setdefault(key, []).append(pair)
    order = sorted(owners)
    random.Random(seed).shuffle(order)
    split: dict[str, str] = {}
    # first only keys every owner still needs, then keys some owner needs: less overshoot
    for need in (all, any):
        for key in order:
            if key in split:
                continue
            for name in ("test", "valid"):
                if need(quota[pair][name] > 0 for pair in owners[key]):
                    for pair in owners[key]:
                        quota[pair][name] -= 1
                    split[key] = name
                    break
    return {key: split.get(key, "train") for key in order}


def _clean_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pairs made one-line, without empty sides or exact duplicates, in first-seen order."""
    cleaned = ((one_line(s), one_line(t)) for s, t in pairs)
    return list(dict.fromkeys((s, t) for s, t in cleaned if s and t))


def _split_sets(
    sets: list[PairSet], n_valid: int, n_test: int, seed: int
) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """``{pair: {split: pairs}}`` of the cleaned pairs, split by source side (``assign_splits``)."""
    cleaned = {pair_set.name: _clean_pairs(pair_set.pairs) for pair_set in sets}
    split = assign_splits(
        {name: (s for s, _ in pairs) for name, pairs in cleaned.items()}, n_valid, n_test, seed
    )
    return {
        name: {part: [(s, t) for s, t in pairs if split[s] == part] for part in SPLITS}
        for name, pairs in cleaned.items()
    }


@dataclass
class CorpusBuild:
    """How a corpus is built: what its card records (builder, sources, filters, command) and
    how it is split (seed, valid and test sizes)."""

    builder: str
    """The builder's name, e.g. ``bible``."""
    sources: list[dict[str, Any]]
    """Where the text comes from (``package_source`` of each Debian package)."""
    filters: list[str]
    """What was left out, in words."""
    seed: int
    """Seed of the train/valid/test split."""
    n_valid: int
    """Units (source segments or source words) in valid."""
    n_test: int
    """Units in test."""
    command: str
    """The command line that built it."""


def _card(
    build: CorpusBuild,
    kind: str,
    sets: list[PairSet],
    counts: dict[str, dict[str, int]],
    unit: str,
) -> dict[str, Any]:
    """The data card: provenance, languages, counts, filters, split settings and command."""
    languages = sorted({s.src for s in sets} | {s.tgt for s in sets})
    sizes = {"unit": unit, "valid": build.n_valid, "test": build.n_test, "cap": 0.1}
    return {
        "builder": build.builder,
        "format": kind,
        "command": build.command,
        "sources": build.sources,
        "languages": languages,
        "pairs": {
            s.name: {"src": s.src, "tgt": s.tgt, "sources": s.sources, **counts[s.name]}
            for s in sets
        },
        "filters": [*build.filters, "exact duplicate pairs dropped"],
        "seed": build.seed,
        "split": sizes,
    }


def write_parallel(
    out: str | Path,
    sets: list[PairSet],
    build: CorpusBuild,
) -> dict[str, Any]:
    """Write line-aligned ``{train,valid,test}.<lang>`` files per pair and ``card.json``.

    Exact duplicate pairs are dropped; pairs with the same source segment share a split, in
    every pair of the corpus. Returns the card.
    """
    splits = _split_sets(sets, build.n_valid, build.n_test, build.seed)
    with atomic_dir(out) as tmp:
        for pair_set in sets:
            pair_dir = tmp / pair_set.name
            for name, pairs in splits[pair_set.name].items():
                write_lines_atomic(pair_dir / f"{name}.{pair_set.src}", [s for s, _ in pairs])
                write_lines_atomic(pair_dir / f"{name}.{pair_set.tgt}", [t for _, t in pairs])
        counts = {
            pair: {name: len(pairs) for name, pairs in by_split.items()}
            for pair, by_split in splits.items()
        }
        card = _card(build, "parallel", sets, counts, "source segment")
        write_json_atomic(tmp / CARD, card)
    return card


def write_dictionaries(
    out: str | Path,
    sets: list[PairSet],
    build: CorpusBuild,
) -> dict[str, Any]:
    """Write MUSE dictionaries ``{train,valid,test,full}.txt`` (``src tgt``) per pair and the card.

    The split is by source word: all translations of a word land in the same split, in every
    pair of the corpus. Lines are sorted. Returns the card.
    """
    splits = _split_sets(sets, build.n_valid, build.n_test, build.seed)
    counts: dict[str, dict[str, int]] = {}
    with atomic_dir(out) as tmp:
        for pair_set in sets:
            by_split = {name: sorted(p) for name, p in splits[pair_set.name].items()}
            by_split["full"] = sorted(p for part in by_split.values() for p in part)
            for name, pairs in by_split.items():
                lines = [f"{s} {t}" for s, t in pairs]
                write_lines_atomic(tmp / pair_set.name / f"{name}.txt", lines)
            counts[pair_set.name] = {
                **{name: len(pairs) for name, pairs in by_split.items()},
                **{f"{name}_source_words": len({s for s, _ in by_split[name]}) for name in SPLITS},
            }
        card = _card(build, "dictionary", sets, counts, "source word")
        write_json_atomic(tmp / CARD, card)
    return card
