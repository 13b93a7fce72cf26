"""What a token store guarantees before training reads it: the structure of every piece,
checked each time a store is opened, and content hashes written at build, checked by
``crossalign data verify`` and when a piece's files changed after the store's manifests.

Structural checks read the offsets (8 bytes a sentence) and the ids once (a max and the
separators), never into memory at once; see ``docs/store.md`` ("Run safety") for their cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from crossalign.errors import CrossalignError
from crossalign.fileio import file_sha256

HASH = "sha256"
"""The hash of every array file of a piece, recorded in ``piece.json`` at build."""


def piece_files(pair: bool) -> list[str]:
    """The array files of a piece: monolingual, or both sides of sentence pairs."""
    names = ["ids", "starts", "offsets"]
    if pair:
        return [f"{side}_{n}.npy" for side in ("src", "tgt") for n in names]
    return [f"{n}.npy" for n in names]


def is_pair_piece(piece: str) -> bool:
    """Whether ``<part>/<name>/<input>-<chunk>`` holds sentence pairs."""
    return piece.split("/", 1)[0].endswith("parallel")


def piece_complete(directory: Path, piece: str) -> bool:
    """Whether a piece directory holds its ``piece.json`` and every array file."""
    return all(
        (directory / f).is_file() for f in ["piece.json", *piece_files(is_pair_piece(piece))]
    )


class DamagedPiece(CrossalignError):
    """A piece file that is not what its store's manifests say; ``file`` names it."""

    def __init__(self, file: Path, problem: str, fix: str) -> None:
        super().__init__(
            f"{file}: {problem}; the store is damaged: delete {file} (or its piece directory "
            f"{file.parent}) and {fix} to rewrite it"
        )
        self.file = file


def _load(file: Path, fix: str) -> np.ndarray:
    try:
        array = np.load(file, mmap_mode="r")
    except FileNotFoundError:
        raise DamagedPiece(file, "missing", fix) from None
    except (OSError, ValueError, EOFError) as e:
        raise DamagedPiece(file, f"not a NumPy array file ({e or 'empty'})", fix) from None
    if array.ndim != 1:
        raise DamagedPiece(file, f"{array.ndim}-dimensional, not a flat array", fix)
    return array


def check_piece(
    directory: Path, piece: str, stats: dict[str, Any], manifest: dict[str, Any], fix: str
) -> None:
    """Check one piece against its shard manifest's ``stats`` and the store's ``manifest``:
    offsets start at 0, never decrease and end at the length of the ids; as many sentences
    and tokens as recorded; word-start flags beside every id; ids of the store's dtype and
    below its vocabulary size; in monolingual pieces a separator ending every sentence.
    Raises ``DamagedPiece`` naming the file and ``fix`` (how to rewrite the piece)."""
    pair = is_pair_piece(piece)
    dtype, vocab, sep = np.dtype(manifest["dtype"]), manifest["vocab_size"], manifest["sep_id"]
    tokens = 0
    for side in ("src_", "tgt_") if pair else ("",):
        ids_file = directory / f"{side}ids.npy"
        offsets_file = directory / f"{side}offsets.npy"
        starts_file = directory / f"{side}starts.npy"
        ids, offsets, starts = (_load(f, fix) for f in (ids_file, offsets_file, starts_file))
        if offsets.dtype != np.int64:
            raise DamagedPiece(offsets_file, f"dtype {offsets.dtype}, not int64", fix)
        if len(offsets) != stats["sentences"] + 1:
            raise DamagedPiece(
                offsets_file,
                f"{len(offsets) - 1} sentences where piece.json and the shard manifest record "
                f"{stats['sentences']}",
                fix,
            )
        if offsets[0] != 0:
            raise DamagedPiece(offsets_file, f"starts at {offsets[0]}, not 0", fix)
        if (np.diff(offsets) < 0).any():
            k = int(np.argmax(np.diff(offsets) < 0))
            raise DamagedPiece(offsets_file, f"decreasing at sentence {k + 1}", fix)
        if offsets[-1] != len(ids):
            where = "past the end of" if offsets[-1] > len(ids) else "short of the end of"
            raise DamagedPiece(
                offsets_file, f"ends at {offsets[-1]}, {where} {ids_file.name} ({len(ids)})", fix
            )
        if ids.dtype != dtype:
            raise DamagedPiece(ids_file, f"dtype {ids.dtype}, not the store's {dtype}", fix)
        if len(starts) != len(ids):
            raise DamagedPiece(
                starts_file, f"{len(starts)} word-start flags for {len(ids)} ids", fix
            )
        if len(ids) and int(ids.max()) >= vocab:
            k = int(np.argmax(ids >= vocab))
            raise DamagedPiece(
                ids_file,
                f"id {int(ids[k])} at position {k} is past the vocabulary ({vocab} tokens)",
                fix,
            )
        if not pair and len(offsets) > 1 and (ids[offsets[1:] - 1] != sep).any():
            raise DamagedPiece(ids_file, f"a sentence does not end with the separator {sep}", fix)
        tokens += len(ids)
    if tokens != stats["tokens"]:
        raise DamagedPiece(
            directory / "piece.json",
            f"{tokens} tokens in the arrays where the shard manifest records {stats['tokens']}",
            fix,
        )


def check_hashes(directory: Path, stats: dict[str, Any], fix: str) -> None:
    """Compare the piece's files with the hashes recorded at build (none: built before
    hashes were recorded, nothing to compare)."""
    for name, want in stats.get(HASH, {}).items():
        file = directory / name
        try:
            got = file_sha256(file)
        except OSError as e:
            raise DamagedPiece(file, f"cannot read ({e.strerror or e})", fix) from None
        if got != want:
            raise DamagedPiece(file, f"content differs from its {HASH} hash recorded at build", fix)


def changed_since(directory: Path, piece: str, since_ns: int) -> bool:
    """Whether a file of the piece was modified, or its inode changed (``ctime``, which
    ``touch`` cannot set back), after ``since_ns``."""
    for name in ["piece.json", *piece_files(is_pair_piece(piece))]:
        try:
            st = (directory / name).stat()
        except OSError:
            return True
        if max(st.st_mtime_ns, st.st_ctime_ns) > since_ns:
            return True
    return False
