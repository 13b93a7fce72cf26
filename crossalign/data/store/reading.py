"""Reading the token store: opening it (structure checked, changed pieces re-hashed),
``data verify``, and the views the training loader reads (monolingual text packed into blocks at
read time, sentences, pairs). The layout and the build: ``crossalign.data.store.token_store``."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crossalign.data.store.integrity import (
    HASH,
    DamagedPiece,
    changed_since,
    check_hashes,
    check_piece,
    piece_complete,
)
from crossalign.data.store.token_store import FORMAT, MANIFEST, PARTS, VERSION
from crossalign.errors import CrossalignError
from crossalign.fileio import read_json


class _Pieces:
    """The pieces of one part/name in reading order, with their arrays memory-mapped lazily."""

    def __init__(self, root: Path, names: list[str], stats: list[dict[str, int]]) -> None:
        self.root = root
        self.names = names
        self.sentences = np.array([s["sentences"] for s in stats], dtype=np.int64)
        self.tokens = np.array([s["tokens"] for s in stats], dtype=np.int64)
        self._arrays: dict[tuple[int, str], np.ndarray] = {}

    def array(self, i: int, name: str) -> np.ndarray:
        """Array ``name`` of piece ``i``, memory-mapped."""
        key = (i, name)
        if key not in self._arrays:
            path = self.root / "pieces" / self.names[i] / f"{name}.npy"
            try:
                self._arrays[key] = np.load(path, mmap_mode="r")
            except (OSError, ValueError, EOFError) as e:
                fix = _rebuild(self.root)
                raise DamagedPiece(path, f"cannot read ({e or 'empty'})", fix) from None
        return self._arrays[key]


class MonoText:
    """The token stream of one language: sentences, each followed by a separator."""

    def __init__(self, pieces: _Pieces, sep_id: int) -> None:
        self.pieces = pieces
        self.sep_id = sep_id
        self.piece_start = np.zeros(len(pieces.names) + 1, dtype=np.int64)
        np.cumsum(pieces.tokens, out=self.piece_start[1:])
        self.total = int(self.piece_start[-1])
        """Stream length (tokens and separators)."""
        self.sentences = int(pieces.sentences.sum())

    def slice(self, lo: int, hi: int, name: str = "ids") -> np.ndarray:
        """Stream positions [lo, hi) of ``ids`` (as int32) or ``starts`` (word-start flags)."""
        parts = []
        i = int(np.searchsorted(self.piece_start, lo, side="right")) - 1
        while lo < hi:
            start, end = self.piece_start[i], self.piece_start[i + 1]
            take = min(hi, end)
            if take > lo:
                parts.append(self.pieces.array(i, name)[lo - start : take - start])
            lo = max(lo, take)
            i += 1
        out = np.concatenate(parts) if parts else np.zeros(0)
        return out.astype(np.int32 if name == "ids" else np.uint8)

    def token_counts(
        self, size: int, max_sentences: int | None = None, chunk: int = 1 << 24
    ) -> np.ndarray:
        """How often each id below ``size`` occurs in the text (separators not counted):
        int64 [size]. ``max_sentences``: only the first that many sentences (None: all).

        Vectorised over the memory-mapped ids, ``chunk`` stream positions at a time (memory
        O(chunk + size)): a bincount of the stream, less one ``sep`` per sentence counted
        (every sentence of the stream ends with exactly one separator)."""
        counts = np.zeros(size, dtype=np.int64)
        left = self.sentences if max_sentences is None else max_sentences
        for i in range(len(self.pieces.names)):
            if left <= 0:
                break
            offsets = self.pieces.array(i, "offsets")
            m = min(left, len(offsets) - 1)
            ids = self.pieces.array(i, "ids")
            end = int(offsets[m])
            for lo in range(0, end, chunk):
                part = np.asarray(ids[lo : min(lo + chunk, end)]).astype(np.int64)
                counts += np.bincount(part, minlength=size)[:size]
            if self.sep_id < size:
                counts[self.sep_id] -= m
            left -= m
        return counts

    def iter_sentences(self) -> Iterator[np.ndarray]:
        """Every sentence's ids (int32, no separator), in order."""
        for i in range(len(self.pieces.names)):
            offsets = self.pieces.array(i, "offsets")
            ids = self.pieces.array(i, "ids")
            for a, b in zip(offsets[:-1], offsets[1:]):
                yield np.asarray(ids[a : b - 1], dtype=np.int32)


class PackedBlocks:
    """Fixed-length blocks ``[cls] stream... [sep]`` of a language's stream (XLM's text
    streams): block k holds stream positions k·(L-2) ... (k+1)·(L-2); the final partial block
    (whose stream already ends with a separator) is padded; one holding only a separator is
    dropped. ``limit`` keeps the first blocks only (held-out caps)."""

    def __init__(
        self, text: MonoText, length: int, cls_id: int, sep_id: int, pad_id: int,
        limit: int | None = None,
    ) -> None:  # fmt: skip
        self.text, self.length = text, length
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id
        self.body = length - 2
        n_full, rest = divmod(text.total, self.body)
        tail = text.slice(n_full * self.body, text.total) if rest else np.zeros(0)
        n = n_full + bool((tail != sep_id).any())
        self.n = n if limit is None else min(n, limit)

    def __len__(self) -> int:
        return self.n

    def _gather(self, idx: np.ndarray, name: str, fill: int, dtype: Any) -> np.ndarray:
        out = np.full((len(idx), self.length), fill, dtype=dtype)
        for row, k in enumerate(np.asarray(idx, dtype=np.int64)):
            if not 0 <= k < self.n:
                raise IndexError(f"block {k} out of range ({self.n} blocks)")
            lo = int(k) * self.body
            seg = self.text.slice(lo, min(lo + self.body, self.text.total), name)
            out[row, 1 : 1 + len(seg)] = seg
            if name == "ids":
                out[row, 0] = self.cls_id
                if len(seg) == self.body:
                    out[row, -1] = self.sep_id
        return out

    def __getitem__(self, idx: np.ndarray) -> np.ndarray:
        """int32 [B, L] blocks ``idx``."""
        return self._gather(idx, "ids", self.pad_id, np.int32)

    def word_starts(self, idx: np.ndarray) -> np.ndarray:
        """uint8 [B, L]: 1 where a token of blocks ``idx`` begins a word (0 at specials)."""
        return self._gather(idx, "starts", 0, np.uint8)


class MonoSentences:
    """The sentences of one language, one example each (MASS, denoising, back-translation read
    sentences, not packed blocks): sentence k is its ids without separator. ``limit`` keeps
    the first sentences only."""

    def __init__(self, text: MonoText, limit: int | None = None) -> None:
        self.pieces = text.pieces
        self.piece_start = np.zeros(len(text.pieces.names) + 1, dtype=np.int64)
        np.cumsum(text.pieces.sentences, out=self.piece_start[1:])
        n = int(self.piece_start[-1])
        self.n = n if limit is None else min(n, limit)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> np.ndarray:
        """int32 ids of sentence ``k``."""
        if not 0 <= k < self.n:
            raise IndexError(f"sentence {k} out of range ({self.n} sentences)")
        i = int(np.searchsorted(self.piece_start, k, side="right")) - 1
        j = k - int(self.piece_start[i])
        offsets = self.pieces.array(i, "offsets")
        ids = self.pieces.array(i, "ids")[offsets[j] : offsets[j + 1] - 1]
        return np.asarray(ids, dtype=np.int32)


class PairText:
    """Sentence pairs of one language pair; pair k is (source ids, target ids) without
    special tokens. ``limit`` keeps the first pairs only."""

    def __init__(self, pieces: _Pieces, limit: int | None = None) -> None:
        self.pieces = pieces
        self.piece_start = np.zeros(len(pieces.names) + 1, dtype=np.int64)
        np.cumsum(pieces.sentences, out=self.piece_start[1:])
        n = int(self.piece_start[-1])
        self.n = n if limit is None else min(n, limit)

    def __len__(self) -> int:
        return self.n

    def _side(self, k: int, side: str, name: str) -> np.ndarray:
        if not 0 <= k < self.n:
            raise IndexError(f"pair {k} out of range ({self.n} pairs)")
        i = int(np.searchsorted(self.piece_start, k, side="right")) - 1
        j = k - int(self.piece_start[i])
        offsets = self.pieces.array(i, f"{side}_offsets")
        array = self.pieces.array(i, f"{side}_{name}")[offsets[j] : offsets[j + 1]]
        return np.asarray(array, dtype=np.int32 if name == "ids" else np.uint8)

    def pair(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """int32 source and target ids of pair ``k``."""
        return self._side(k, "src", "ids"), self._side(k, "tgt", "ids")

    def word_starts(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """uint8 word-start flags of pair ``k``'s source and target tokens."""
        return self._side(k, "src", "starts"), self._side(k, "tgt", "starts")


@dataclass
class TokenStore:
    """An opened, complete store: per part, a ``MonoText`` per language or a ``PairText``
    per pair."""

    path: Path
    manifest: dict[str, Any]
    mono: dict[str, MonoText]
    parallel: dict[str, PairText]
    valid_mono: dict[str, MonoText]
    valid_parallel: dict[str, PairText]

    def languages(self) -> list[str]:
        """Every language of the training parts, sorted."""
        langs = set(self.mono)
        for pair in self.parallel:
            langs.update(pair.split("-", 1))
        return sorted(langs)


def store_manifest(path: str | Path) -> dict[str, Any]:
    """``store.json`` of a store; raises if ``path`` is not one."""
    file = Path(path) / MANIFEST
    if not file.is_file():
        raise CrossalignError(
            f"{path} is not a token store (no {MANIFEST}); build one with "
            f"crossalign data tokenize --out {path} ..."
        )
    manifest = read_json(file, "rebuild the store")
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise CrossalignError(
            f"{file}: not a version-{VERSION} token store; rebuild it with crossalign data tokenize"
        )
    return manifest


def missing_shards(path: str | Path) -> list[int]:
    """Shard numbers whose manifest is not (yet) in the store."""
    manifest = store_manifest(path)
    n = manifest["shards"]
    return [k for k in range(n) if not (Path(path) / "shards" / f"shard-{k}-of-{n}.json").is_file()]


def _raise_nofile_limit() -> None:
    """Memory maps hold a file descriptor each: allow as many as the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _rebuild(path: Path, shard: tuple[int, int] | None = None) -> str:
    """How to rewrite a deleted piece of the store ``path`` (of ``shard`` K/N)."""
    where = f" --shard {shard[0]}/{shard[1]}" if shard and shard[1] > 1 else ""
    return (
        f"run the same crossalign data tokenize --out {path}{where} (a store in the cache: "
        "the same run) again"
    )


def _shard_pieces(path: Path, n: int) -> list[tuple[int, float, dict[str, dict[str, Any]]]]:
    """Per shard: its number, its manifest's modification time (ns) and its pieces."""
    out = []
    for k in range(n):
        file = path / "shards" / f"shard-{k}-of-{n}.json"
        shard = read_json(file, f"delete it and {_rebuild(path, (k, n))}")
        out.append((k, file.stat().st_mtime_ns, shard["pieces"]))
    return out


def incomplete_pieces(path: str | Path) -> list[str]:
    """Pieces a shard manifest lists whose directory lacks a file (deleted as the fix of a
    damaged piece): building the store again rewrites them."""
    path = Path(path)
    n = store_manifest(path)["shards"]
    return [
        piece
        for _, _, pieces in _shard_pieces(path, n)
        for piece in pieces
        if not piece_complete(path / "pieces" / piece, piece)
    ]


VERIFIED = "verified"
"""A stamp file: its modification time is when the pieces changed since the build were last
found equal to their hashes (see ``open_store``)."""


def check_store(path: Path, manifest: dict[str, Any], hashes: str = "changed") -> int:
    """Check every piece's structure (``check_piece``) and, with ``hashes="changed"``, the
    content hashes of the pieces whose files changed after their shard manifest (and after
    the last such check), with ``"all"`` of every piece. Returns the bytes hashed; raises
    ``DamagedPiece`` at the first problem."""
    n = manifest["shards"]
    stamp = path / VERIFIED
    checked_at = stamp.stat().st_mtime_ns if stamp.is_file() else 0
    started = time.time_ns()
    hashed = 0
    for k, written, pieces in _shard_pieces(path, n):
        fix = _rebuild(path, (k, n))
        for piece, stats in pieces.items():
            directory = path / "pieces" / piece
            if not directory.is_dir():
                raise DamagedPiece(directory, "missing", fix)
            check_piece(directory, piece, stats, manifest, fix)
            if hashes == "all" or changed_since(directory, piece, max(written, checked_at)):
                check_hashes(directory, stats, fix)
                hashed += sum(f.stat().st_size for f in directory.iterdir())
    if hashed and hashes == "changed":
        try:  # not again at the next open; a read-only store checks them every time
            stamp.touch()
            os.utime(stamp, ns=(started, started))
        except OSError:
            pass
    return hashed


def verify_store(path: str | Path) -> str:
    """``crossalign data verify``: check a complete store's structure and every file against
    the hash recorded at build; returns a summary line, raises ``DamagedPiece`` naming the
    first damaged file."""
    path = Path(path)
    manifest = _complete_manifest(path)
    hashed = check_store(path, manifest, hashes="all")
    pieces = [p for _, _, shard in _shard_pieces(path, manifest["shards"]) for p in shard.values()]
    unhashed = sum(HASH not in stats for stats in pieces)
    note = (
        f"; {unhashed} pieces have no recorded hashes (built by an older crossalign: build "
        "the store again to have them checked)"
        if unhashed
        else ""
    )
    n = len(pieces)
    return f"{path}: {n} pieces, {hashed / 2**20:,.1f} MiB verified (structure, {HASH}){note}"


def _complete_manifest(path: Path) -> dict[str, Any]:
    """The manifest of a store whose shards are all written; raises naming the missing ones."""
    manifest = store_manifest(path)
    missing = missing_shards(path)
    n = manifest["shards"]
    if missing:
        todo = ", ".join(f"--shard {k}/{n}" for k in missing)
        raise CrossalignError(
            f"store {path} is incomplete: run crossalign data tokenize --out {path} {todo}"
        )
    return manifest


def open_store(path: str | Path) -> TokenStore:
    """Open a complete store (every shard written; raises naming the missing shards), after
    checking it (``check_store``): a damaged piece raises naming its file."""
    path = Path(path)
    manifest = _complete_manifest(path)
    n = manifest["shards"]
    check_store(path, manifest)
    _raise_nofile_limit()
    pieces: dict[str, dict[str, int]] = {}
    for _, _, shard_pieces in _shard_pieces(path, n):
        pieces.update(shard_pieces)
    grouped: dict[tuple[str, str], list[str]] = {}
    for piece in sorted(pieces):
        part, name, _ = piece.split("/")
        grouped.setdefault((part, name), []).append(piece)
    parts: dict[str, dict[str, Any]] = {p: {} for p in PARTS}
    for source in manifest["sources"]:
        part, name = source.split("/")
        names = grouped.get((part, name), [])
        _check_not_empty(manifest, source, names, pieces)
        loaded = _Pieces(path, names, [pieces[x] for x in names])
        parts[part][name] = (
            MonoText(loaded, manifest["sep_id"]) if part.endswith("mono") else PairText(loaded)
        )
    return TokenStore(path, manifest, **parts)


def _check_not_empty(
    manifest: dict[str, Any], source: str, names: list[str], pieces: dict[str, dict[str, int]]
) -> None:
    """Every input file must have had text (as the plain readers require)."""
    inputs = manifest["sources"][source]["inputs"]
    lines = [0] * len(inputs)
    kept = 0
    for name in names:
        index = int(name.rsplit("/", 1)[1].split("-")[0])
        lines[index] += pieces[name]["lines"]
        kept += pieces[name]["sentences"]
    for index, count in enumerate(lines):
        if count == 0:
            ident = inputs[index]
            where = ident.get("path") or (ident.get("src") or {}).get("path") or ident
            raise CrossalignError(
                f"{where}: no text ({source}); give a UTF-8 file with one sentence per line"
            )
    if kept == 0:
        raise CrossalignError(f"{source}: no sentences or sentence pairs with text on both sides")
