"""What the token store's open-time checks cost (``crossalign.data.store.integrity``).

Writes a synthetic monolingual store of about ``--gb`` GB (10^9 bytes) under ``--work``:
pieces of 100,000 sentences of 5-60 random ids (mean ~32 with the separator) below an
8,000-token vocabulary, ``uint16``, with the hashes a build records; then times, each the
median of ``--repeat`` runs in this process:

- ``manifests only``: ``open_store`` without ``check_store`` (what opening cost before);
- ``open``: ``open_store`` (structural checks of every piece; no piece changed);
- ``open, 1 piece changed``: one piece's files newer than the manifests (it is hashed, and the
  ``verified`` stamp is removed again after each run);
- ``data verify``: ``verify_store`` (structure + SHA-256 of every file).

Each is timed with the store in the page cache (``warm``) and with its files dropped from it
first (``cold``: ``posix_fadvise(DONTNEED)`` on each file of the store only). The store is
deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

from crossalign.data.store import reading
from crossalign.data.store.integrity import HASH
from crossalign.data.store.reading import open_store, verify_store
from crossalign.data.store.token_store import FORMAT, VERSION
from crossalign.fileio import file_sha256

SENTENCES = 100_000
VOCAB = 8_000
SEP = 3


def write_store(out: Path, gb: float, seed: int = 0) -> int:
    """A store of about ``gb`` GB; returns its bytes."""
    rng = np.random.default_rng(seed)
    pieces, total, k = {}, 0, 0
    while total < gb * 1e9:
        lengths = rng.integers(5, 61, SENTENCES)
        offsets = np.zeros(SENTENCES + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = rng.integers(5, VOCAB, int(offsets[-1])).astype(np.uint16)
        ids[offsets[1:] - 1] = SEP
        starts = (rng.random(len(ids)) < 0.7).astype(np.uint8)
        name = f"mono/en/00000-{k:07d}"
        d = out / "pieces" / name
        d.mkdir(parents=True)
        stats = {"sentences": SENTENCES, "tokens": len(ids), "lines": SENTENCES, HASH: {}}
        for key, array in (("ids", ids), ("starts", starts), ("offsets", offsets)):
            np.save(d / f"{key}.npy", array)
            stats[HASH][f"{key}.npy"] = file_sha256(d / f"{key}.npy")
            total += (d / f"{key}.npy").stat().st_size
        (d / "piece.json").write_text(json.dumps(stats))
        pieces[name] = stats
        k += 1
    manifest = {"format": FORMAT, "version": VERSION, "key": "bench", "tokenizer": "bench",
                "vocab_size": VOCAB, "dtype": "uint16", "sep_id": SEP, "chunk_lines": SENTENCES,
                "shards": 1, "sources": {"mono/en": {"dedup": False, "inputs": [{}]}}}  # fmt: skip
    (out / "store.json").write_text(json.dumps(manifest))
    (out / "shards").mkdir()
    (out / "shards" / "shard-0-of-1.json").write_text(
        json.dumps({"key": "bench", "pieces": pieces})
    )
    return total


def drop_cache(store: Path) -> None:
    for f in store.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def timed(fn, store: Path, cold: bool, repeat: int, before=None) -> float:
    times = []
    for _ in range(repeat):
        if before:
            before()
        if cold:
            drop_cache(store)
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", default="/tmp/crossalign-store-open")
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    store = Path(a.work) / "store"
    shutil.rmtree(store, ignore_errors=True)
    t = time.perf_counter()
    size = write_store(store, a.gb)
    print(f"store: {size / 1e9:.2f} GB, written with hashes in {time.perf_counter() - t:.1f} s")
    piece = sorted((store / "pieces" / "mono" / "en").iterdir())[0]

    def one_changed() -> None:
        (store / reading.VERIFIED).unlink(missing_ok=True)
        os.utime(piece / "ids.npy")

    real = reading.check_store

    def manifests_only() -> None:
        reading.check_store = lambda *a, **k: 0
        try:
            open_store(store)
        finally:
            reading.check_store = real

    rows = [
        ("manifests only", manifests_only, None),
        ("open", lambda: open_store(store), None),
        ("open, 1 piece changed", lambda: open_store(store), one_changed),
        ("data verify", lambda: verify_store(store), None),
    ]
    print("| measure | warm (s) | cold (s) |\n|---|---|---|")
    try:
        for label, fn, before in rows:
            warm = timed(fn, store, False, a.repeat, before)
            cold = timed(fn, store, True, a.repeat, before)
            print(f"| {label} | {warm:.3f} | {cold:.3f} |", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(Path(a.work), ignore_errors=True)


if __name__ == "__main__":
    main()
