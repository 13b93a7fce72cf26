"""Text inputs read in line ranges, so a corpus can be tokenized in chunks by many processes.

An input is one configured text source: a UTF-8 file, two line-aligned files, a TSV file or a
Hugging Face dataset column. Each can report its size in lines (rows), read any range of them
and give a cheap identity (path, size, modification time; a dataset's fingerprint) for cache
keys. The line rules are those of ``crossalign.data.readers``: lines are split on ``\\n``,
stripped, empty ones skipped; a UTF-8 byte-order mark is dropped; a file that is not UTF-8
or holds a NUL byte is an error naming ``file:line``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crossalign.data.lines import DATA_FILE_BUILDERS, decode_line, open_text
from crossalign.errors import CrossalignError

BLOCK = 1 << 24
"""Bytes read at a time when counting lines."""


def line_starts(path: str | os.PathLike, every: int) -> tuple[int, np.ndarray]:
    """Number of lines of a file and the byte offset of lines 0, every, 2·every, ...

    Lines are counted as Python's binary file iteration does: a last line without a
    newline counts. Reads the file once in blocks (bounded memory).
    Returns (n_lines, int64 [ceil(n_lines / every)] offsets). A file that cannot be read is
    a CrossalignError (``open_text``).
    """
    offsets = [0]
    n_lines = 0
    pos = 0
    last = b"\n"
    with open_text(path) as f:
        while chunk := f.read(BLOCK):
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            # line number (0-based) of the line that starts after each newline
            numbers = n_lines + 1 + np.arange(len(ends))
            wanted = numbers % every == 0
            offsets.extend((pos + ends[wanted] + 1).tolist())
            n_lines += len(ends)
            pos += len(chunk)
            last = chunk[-1:]
    if last != b"\n":
        n_lines += 1  # a last line without a newline
    starts = np.array(offsets, dtype=np.int64)
    return n_lines, starts[: -(-n_lines // every)]


def read_lines(path: str | os.PathLike, offset: int, first: int, count: int) -> list[str]:
    """``count`` lines of a UTF-8 file from byte ``offset`` (line number ``first``, 0-based),
    without the line break, as ``decode_line`` reads them (errors name ``file:line``)."""
    out = []
    with open_text(path) as f:
        f.seek(offset)
        for i in range(count):
            raw = f.readline()
            if not raw:
                break
            out.append(decode_line(raw, path, first + i + 1))
    return out


def file_identity(path: str | os.PathLike) -> dict[str, Any]:
    """What identifies a file's content for a cache key: absolute path, size, modification
    time, inode and inode change time (ns). Every write changes the change time, and unlike
    the modification time ``touch`` cannot set it back, so an edit that keeps the size and
    the modification time (``sed -i``, then ``touch -d``) is a new identity; so are a copy
    moved into place and a ``chmod`` (a rebuild, not wrong data)."""
    st = Path(path).stat()
    return {"path": str(Path(path).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "inode": st.st_ino, "ctime_ns": st.st_ctime_ns}  # fmt: skip


@dataclass
class TextInput:
    """Monolingual text: one file, or one column of a Hugging Face dataset."""

    path: str | None = None
    dataset: str | None = None
    split: str = "train"
    column: str = "text"
    where: str = ""
    """The config key it came from, for error messages."""
    _starts: np.ndarray | None = field(default=None, repr=False)
    _lines: int = -1

    def index(self, every: int) -> int:
        """Count lines (rows) and remember where every ``every``-th starts; returns the count."""
        if self.dataset is not None:
            self._lines = len(load_dataset_column(self.dataset, self.split, self.column))
        else:
            self._lines, self._starts = line_starts(self.path, every)
        return self._lines

    def read(self, chunk: int, every: int) -> list[str]:
        """Raw lines (rows) of chunk ``chunk`` (lines chunk·every ... +every), not stripped."""
        first = chunk * every
        count = min(every, self._lines - first)
        if self.dataset is not None:
            column = load_dataset_column(self.dataset, self.split, self.column)
            return [t if isinstance(t, str) else "" for t in column[first : first + count]]
        return read_lines(self.path, int(self._starts[chunk]), first, count)

    def identity(self) -> dict[str, Any]:
        """A cache-key identity of the content."""
        if self.dataset is not None:
            ds = load_dataset_column(self.dataset, self.split, self.column)
            return {"dataset": self.dataset, "split": self.split, "column": self.column,
                    "fingerprint": getattr(ds, "fingerprint", "")}  # fmt: skip
        return file_identity(self.path)

    def describe(self) -> str:
        """The file or dataset, for messages."""
        return self.path or f"dataset {self.dataset} (split {self.split}, column {self.column})"


@dataclass
class PairInput:
    """Parallel text: two line-aligned files, or one TSV file (``source<TAB>target``)."""

    src: str
    tgt: str | None = None
    """None: ``src`` is a TSV file."""
    _starts: list[np.ndarray] = field(default_factory=list, repr=False)
    _lines: int = -1

    def index(self, every: int) -> int:
        """Count lines and check that both files have as many; returns the count."""
        n_src, s_src = line_starts(self.src, every)
        self._starts = [s_src]
        self._lines = n_src
        if self.tgt is not None:
            n_tgt, s_tgt = line_starts(self.tgt, every)
            if n_src != n_tgt:
                raise CrossalignError(
                    f"parallel files {self.src} ({n_src} lines) and {self.tgt} ({n_tgt} lines) "
                    f"differ in line count; they must be line-aligned"
                )
            self._starts.append(s_tgt)
        return self._lines

    def read(self, chunk: int, every: int) -> list[tuple[str, str]]:
        """Raw (source, target) lines of a chunk, not stripped. A TSV line that is not blank
        must have a tab (error naming file:line)."""
        first = chunk * every
        count = min(every, self._lines - first)
        src = read_lines(self.src, int(self._starts[0][chunk]), first, count)
        if self.tgt is not None:
            tgt = read_lines(self.tgt, int(self._starts[1][chunk]), first, count)
            return list(zip(src, tgt))
        pairs = []
        for i, text in enumerate(src):
            if not text.strip():
                pairs.append(("", ""))
                continue
            if "\t" not in text:
                raise CrossalignError(
                    f"{self.src}:{first + i + 1}: no tab; a TSV parallel corpus needs "
                    f"'source<TAB>target'"
                )
            pairs.append(tuple(text.split("\t", 1)))
        return pairs

    def identity(self) -> dict[str, Any]:
        """A cache-key identity of the content."""
        return {"src": file_identity(self.src), "tgt": self.tgt and file_identity(self.tgt)}

    def describe(self) -> str:
        """The file(s), for messages."""
        return f"{self.src} + {self.tgt}" if self.tgt else self.src


_DATASETS: dict[tuple[str, str, str], Any] = {}


def load_dataset_args(dataset: str, split: str) -> tuple[tuple, dict[str, Any]]:
    """``datasets.load_dataset`` arguments for a name, a directory of data files, or one
    .json/.jsonl/.csv/.parquet/.txt file (read through its builder; a .txt file's UTF-8
    byte-order mark is dropped, as ``crossalign.data.readers`` does)."""
    path = Path(dataset)
    if path.is_file() and path.suffix in DATA_FILE_BUILDERS:
        builder = DATA_FILE_BUILDERS[path.suffix]
        kwargs: dict[str, Any] = {"data_files": {split: str(path)}}
        if builder == "text":  # a UTF-8 byte-order mark is not text
            kwargs["encoding"] = "utf-8-sig"
        return (builder,), kwargs
    return (dataset,), {}


def load_dataset_column(dataset: str, split: str, column: str) -> Any:
    """Column ``column`` of a Hugging Face dataset (memory-mapped Arrow, loaded once per
    process): a name for ``load_dataset``, a ``save_to_disk`` directory, a directory of data
    files, or one .json/.jsonl/.csv/.parquet/.txt file. ``fingerprint`` is set on the result."""
    key = (dataset, split, column)
    if key in _DATASETS:
        return _DATASETS[key]
    import datasets

    path = Path(dataset)
    try:
        if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
            ds = datasets.load_from_disk(str(path))
            if isinstance(ds, datasets.DatasetDict):
                ds = ds[split]
        else:
            args, kwargs = load_dataset_args(dataset, split)
            ds = datasets.load_dataset(*args, split=split, **kwargs)
    except (FileNotFoundError, ValueError, ConnectionError, KeyError) as e:
        raise CrossalignError(
            f"dataset {dataset} (split {split}): {str(e).splitlines()[0]}"
        ) from None
    if column not in ds.column_names:
        raise CrossalignError(
            f"dataset {dataset} has no column '{column}'; its columns: {', '.join(ds.column_names)}"
        )
    out = ds.select_columns([column])
    view = _Column(out, column, out._fingerprint)
    _DATASETS[key] = view
    return view


@dataclass
class _Column:
    """One column of a dataset, sliced lazily."""

    ds: Any
    name: str
    fingerprint: str

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, item: slice) -> list:
        return self.ds[item][self.name]


def text_hash(line: str) -> int:
    """A 64-bit hash of a stripped line (stable across processes), for de-duplication."""
    return int.from_bytes(hashlib.blake2b(line.encode("utf-8"), digest_size=8).digest(), "little")
