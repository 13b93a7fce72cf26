"""The tokenized corpus store: text tokenized once, memory-mapped by every run and process.

Layout (every file plain ``.npy`` or JSON; see ``docs/store.md`` for why)::

    STORE/store.json                      key, tokenizer fingerprint, id dtype, chunking, sources
    STORE/tokenizer/                      the tokenizer the ids come from (save_pretrained)
    STORE/shards/shard-K-of-N.json        the pieces shard K wrote, with their sizes
    STORE/pieces/<part>/<name>/<input>-<chunk>/
        mono:      ids.npy  starts.npy  offsets.npy
        parallel:  src_ids.npy src_starts.npy src_offsets.npy  tgt_ids.npy tgt_starts.npy ...

A *part* is ``mono``, ``parallel``, ``valid_mono`` or ``valid_parallel``; a *name* a language
or a pair ``src-tgt``. Each configured input (a file, two line-aligned files, a dataset column)
is cut into chunks of ``chunk_lines`` lines; a chunk becomes one piece, written atomically, so
an interrupted build resumes where it stopped and ``--shard K/N`` (chunks K, K+N, ...) lets many
machines build one store. Pieces are ordered by (input, chunk), so the store is the same
whatever the number of shards or processes.

- ``ids``: token ids without special tokens, in the smallest unsigned dtype that holds the
  vocabulary; monolingual pieces hold the *stream* form, each sentence followed by ``sep``.
- ``offsets``: int64 [n + 1], where sentence k starts in ``ids`` (monolingual: with its sep).
- ``starts``: uint8, 1 where a token begins a word (the tokenizer's pre-tokenized words): the
  subword → word map the alignment objectives and evaluations need.

Monolingual text is packed into blocks at read time (``PackedBlocks``), so one store serves any
``max_length``. ``piece.json`` (and the shard manifest) record each array file's SHA-256;
``open_store`` checks every piece's structure and the hashes of pieces changed since the
build, ``verify_store`` every hash (``integrity``; docs/store.md, "Run safety").
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import re
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from crossalign.data.inputs import PairInput, TextInput, text_hash
from crossalign.data.store.integrity import (
    HASH,
    piece_complete,
)
from crossalign.errors import CrossalignError
from crossalign.fileio import file_sha256, write_text_atomic

FORMAT = "crossalign-token-store"
VERSION = 1
MANIFEST = "store.json"
PARTS = ("mono", "parallel", "valid_mono", "valid_parallel")
CHUNK_LINES = 100_000
"""Lines per piece: small enough to spread over processes, large enough to keep few files."""


@dataclass
class Source:
    """One language's (or pair's) inputs in one part of the store."""

    part: str
    name: str
    inputs: list[TextInput] | list[PairInput]
    dedup: bool = False
    """Drop exact duplicate lines across the inputs (a list of monolingual files)."""


def dtype_for(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer dtype that holds ids below ``vocab_size``."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A hash of everything that decides token ids: the serialised backend tokenizer (model,
    normaliser, pre-tokenizer, added tokens), not including truncation or padding settings."""
    import hashlib

    data = json.loads(tokenizer.backend_tokenizer.to_str())
    data.pop("truncation", None)
    data.pop("padding", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]


# ---------------------------------------------------------------------------------------------
# Writing


_WORKER: dict[str, Any] = {}


def _init_worker(tokenizer_json: str, sep_id: int, dtype: str, failed: Any = None) -> None:
    """Load the backend tokenizer once per worker process (no truncation, no padding);
    ``failed`` is an event set when any worker's chunk fails."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.no_truncation()
    tok.no_padding()
    _WORKER.update(tokenizer=tok, sep_id=sep_id, dtype=np.dtype(dtype), failed=failed)


def _tokenize_or_report(task: tuple) -> tuple[str | None, dict[str, int] | None, str | None]:
    """``_tokenize_chunk`` in a worker process: (piece, stats, None), or (None, None, the
    error) — errors travel as values; nothing is done once another chunk failed."""
    failed = _WORKER["failed"]
    if failed.is_set():
        return None, None, None
    try:
        return (*_tokenize_chunk(task), None)
    except CrossalignError as e:
        failed.set()
        return None, None, str(e)


def _encode(lines: list[str], batch: int = 4096) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids, word-start flags and per-sentence lengths of ``lines`` (no specials),
    encoded ``batch`` lines at a time (an ``Encoding`` holds ~100 bytes a token)."""
    parts = [_encode_batch(lines[i : i + batch]) for i in range(0, len(lines), batch)]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.int64)
    return tuple(np.concatenate(p) for p in zip(*parts))


def _encode_batch(lines: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    encodings = _WORKER["tokenizer"].encode_batch(lines, add_special_tokens=False)
    lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
    total = int(lengths.sum())
    ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int64, total)
    words = np.fromiter(
        (-1 if w is None else w for e in encodings for w in e.word_ids), np.int64, total
    )
    starts = np.ones(total, dtype=np.uint8)
    starts[1:] = words[1:] != words[:-1]
    first = np.cumsum(lengths) - lengths
    starts[first[lengths > 0]] = 1
    return ids, starts, lengths


def lengths_to_offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _tokenize_chunk(task: tuple) -> tuple[str, dict[str, int]]:
    """Tokenize one chunk into its piece directory (atomically); returns (piece, stats)."""
    out, piece, source, index, chunk, every, keep = task
    final = Path(out) / "pieces" / piece
    if piece_complete(final, piece):
        return piece, json.loads((final / "piece.json").read_text())
    dtype, sep = _WORKER["dtype"], _WORKER["sep_id"]
    raw = source.inputs[index].read(chunk, every)
    arrays: dict[str, np.ndarray] = {}
    if isinstance(source.inputs[index], PairInput):
        pairs = [(s.strip(), t.strip()) for s, t in raw]
        nonempty = sum(1 for s, t in pairs if s and t)
        pairs = [(s, t) for s, t in pairs if s and t]
        for side, texts in (("src", [s for s, _ in pairs]), ("tgt", [t for _, t in pairs])):
            ids, starts, lengths = _encode(texts)
            arrays.update({f"{side}_ids": ids.astype(dtype), f"{side}_starts": starts,
                           f"{side}_offsets": lengths_to_offsets(lengths)})  # fmt: skip
        stats = {"sentences": len(pairs), "tokens": int(sum(len(a) for k, a in arrays.items()
                                                            if k.endswith("_ids")))}  # fmt: skip
    else:
        lines = [t.strip() for t in raw]
        nonempty = sum(1 for t in lines if t)
        if keep is not None:
            lines = [t for t, k in zip(lines, keep) if k]
        lines = [t for t in lines if t]
        ids, starts, lengths = _encode(lines)
        # the stream form: every sentence followed by a separator
        stream_len = lengths + 1
        offsets = lengths_to_offsets(stream_len)
        seps = offsets[1:] - 1
        body = np.ones(int(offsets[-1]), dtype=bool)
        body[seps] = False
        stream = np.empty(int(offsets[-1]), dtype=dtype)
        stream[body] = ids
        stream[seps] = sep
        flags = np.zeros(len(stream), dtype=np.uint8)
        flags[body] = starts
        arrays = {"ids": stream, "starts": flags, "offsets": offsets}
        stats = {"sentences": len(lines), "tokens": int(offsets[-1])}
    stats["lines"] = nonempty
    tmp = final.with_name(f".{final.name}{_tmp_suffix(os.getpid())}")
    shutil.rmtree(tmp, ignore_errors=True)
    file = final  # what a failed write names: where the file was to be (not the tmp copy)
    try:
        tmp.mkdir(parents=True)
        hashes = {}
        for name, array in arrays.items():
            file = final / f"{name}.npy"
            np.save(tmp / file.name, array)
            hashes[file.name] = file_sha256(tmp / file.name)
        stats[HASH] = hashes
        file = final / "piece.json"
        (tmp / file.name).write_text(json.dumps(stats), encoding="utf-8")
        if final.is_dir() and not piece_complete(final, piece):
            shutil.rmtree(final)  # a file deleted as the fix of a damaged piece
        file = final
        try:
            os.replace(tmp, final)
        except OSError:  # another shard or process wrote the same piece first
            if not piece_complete(final, piece):
                raise
    except OSError as e:
        raise CrossalignError(
            f"{file}: cannot write ({e.strerror or e}); {_write_fix(e, Path(out))}"
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return piece, stats


def _write_fix(e: OSError, out: Path) -> str:
    """The fix for a write that failed in the store ``out``."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"free space on the disk of {out} (or give another --out) and run the same "
            "command again: it keeps the pieces already written"
        )
    return f"make {out} writable (or give another --out) and run the same command again"


_HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"
_TMP = re.compile(r"\.tmp-(?P<host>[A-Za-z0-9._-]+)-(?P<pid>\d+)$")


def _tmp_suffix(pid: int) -> str:
    """The suffix of a piece being written by process ``pid`` of this machine: shards on other
    machines may write into the same store, so only this machine's are ever swept."""
    return f".tmp-{_HOST}-{pid}"


def _sweep_tmp(out: Path) -> None:
    """Remove pieces left half-written by this machine's builders that no longer run (killed,
    or the machine restarted); a failing build removes its own."""
    for tmp in out.glob("pieces/*/*/.*.tmp-*"):
        match = _TMP.search(tmp.name)
        if not match or match["host"] != _HOST or not tmp.is_dir():
            continue
        try:
            os.kill(int(match["pid"]), 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except OSError:  # alive, another user's
            pass


def _dedup_masks(source: Source, every: int) -> list[np.ndarray]:
    """Per input, bool [lines]: True for the first occurrence of each stripped line."""
    hashes, sizes = [], []
    for inp in source.inputs:
        n = inp._lines
        h = np.zeros(n, dtype=np.uint64)
        for chunk in range(-(-n // every)):
            lines = inp.read(chunk, every)
            h[chunk * every : chunk * every + len(lines)] = [text_hash(t.strip()) for t in lines]
        hashes.append(h)
        sizes.append(n)
    flat = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    keep = np.zeros(len(flat), dtype=bool)
    keep[np.unique(flat, return_index=True)[1]] = True
    return np.split(keep, np.cumsum(sizes)[:-1])


def piece_name(source: Source, index: int, chunk: int) -> str:
    """``<part>/<name>/<input>-<chunk>``: sorts in reading order."""
    return f"{source.part}/{source.name}/{index:05d}-{chunk:07d}"


# what a training run directory holds (crossalign.checkpoint, crossalign.run_dir)
_RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoints")


def _check_out(out: Path) -> None:
    """A store is written into its own directory: not over a file, not into a run directory."""
    if out.exists() and not out.is_dir():
        raise CrossalignError(
            f"--out {out} is a file, not a store directory; give a new directory (or an "
            "existing store to complete)"
        )
    if not (out / MANIFEST).is_file() and any((out / f).exists() for f in _RUN_FILES):
        raise CrossalignError(
            f"--out {out} is a training run directory; give the store its own directory, e.g. "
            f"--out {out.parent / (out.name + '-store')}"
        )


@contextmanager
def _writing(out: Path) -> Iterator[None]:
    """A failed write into the store ``out`` (a full disk, a read-only place) is one line
    naming the file and the fix."""
    try:
        yield
    except OSError as e:
        raise CrossalignError(
            f"{e.filename or out}: cannot write ({e.strerror or e}); {_write_fix(e, out)}"
        ) from None


def build_store(
    sources: list[Source],
    tokenizer: Any,
    out: str | Path,
    key: str,
    num_proc: int = 1,
    shard: tuple[int, int] = (0, 1),
    chunk_lines: int = CHUNK_LINES,
    progress: bool = True,
) -> Path:
    """Tokenize shard ``K`` of ``N`` of ``sources`` into the store ``out`` with ``num_proc``
    processes. Pieces already written (an interrupted build) are kept; the shard's manifest is
    written last. The store is complete once all N shards are (``open_store`` checks).
    """
    k, n = shard
    if not 0 <= k < n:
        raise CrossalignError(f"--shard {k}/{n}: K must be in 0..N-1")
    out = Path(out)
    _check_out(out)
    with _writing(out):
        out.mkdir(parents=True, exist_ok=True)
        _sweep_tmp(out)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "key": key,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "vocab_size": len(tokenizer),
        "dtype": dtype_for(len(tokenizer)).name,
        "sep_id": tokenizer.sep_token_id,
        "chunk_lines": chunk_lines,
        "shards": n,
        "sources": {
            f"{s.part}/{s.name}": {"dedup": s.dedup, "inputs": [i.identity() for i in s.inputs]}
            for s in sources
        },
    }
    existing = out / MANIFEST
    if existing.is_file():
        old = json.loads(existing.read_text(encoding="utf-8"))
        if old.get("key") != key or old.get("shards") != n:
            raise CrossalignError(
                f"{out} holds another store (different sources, tokenizer or number of shards "
                f"{old.get('shards')}); give a new --out or delete it"
            )
    else:
        with _writing(out):
            write_text_atomic(existing, json.dumps(manifest, indent=2) + "\n")
    if not (out / "tokenizer").is_dir():
        from crossalign.fileio import atomic_dir

        with _writing(out), atomic_dir(out / "tokenizer") as tmp:
            tokenizer.save_pretrained(tmp)
    tasks = []
    for source in sources:
        sizes = [inp.index(chunk_lines) for inp in source.inputs]
        masks = _dedup_masks(source, chunk_lines) if source.dedup else None
        for index, size in enumerate(sizes):
            for chunk in range(-(-size // chunk_lines)):
                keep = None
                if masks is not None:
                    keep = masks[index][chunk * chunk_lines : (chunk + 1) * chunk_lines]
                tasks.append((str(out), piece_name(source, index, chunk), source, index, chunk,
                              chunk_lines, keep))  # fmt: skip
    mine = tasks[k::n]
    init = (tokenizer.backend_tokenizer.to_str(), tokenizer.sep_token_id, manifest["dtype"])
    done: dict[str, dict[str, int]] = {}
    bar = tqdm(total=len(mine), desc=f"tokenize {out.name}", unit="chunk", disable=not progress)
    if num_proc > 1 and len(mine) > 1:
        ctx = multiprocessing.get_context("fork")
        failed = ctx.Event()
        pool = ctx.Pool(min(num_proc, len(mine)), _init_worker, (*init, failed))
        error = None
        try:
            for piece, stats, message in pool.imap_unordered(_tokenize_or_report, mine):
                if message is not None:
                    error = error or message
                    continue
                if piece is not None:
                    done[piece] = stats
                bar.update(1)
        finally:
            # never Pool.terminate(): killing a worker that holds the result queue's lock
            # can hang the pool; the workers skip their remaining chunks once one failed
            pool.close()
            pool.join()
        if error is not None:
            raise CrossalignError(error)
    else:
        _init_worker(*init)
        try:
            for task in mine:
                piece, stats = _tokenize_chunk(task)
                done[piece] = stats
                bar.update(1)
        finally:
            bar.close()  # before an error's line
    bar.close()
    shard_file = out / "shards" / f"shard-{k}-of-{n}.json"
    with _writing(out):
        shard_file.parent.mkdir(exist_ok=True)
        write_text_atomic(shard_file, json.dumps({"key": key, "pieces": done}) + "\n")
    return out


# ---------------------------------------------------------------------------------------------
# Reading
