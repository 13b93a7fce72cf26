"""Readers for monolingual text, parallel corpora and bilingual dictionaries.

Every reader fails with one line naming the file (and line) and the fix.
"""

from __future__ import annotations

import codecs
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from crossalign.errors import CrossalignError

PathLike = str | os.PathLike
DATA_FILE_BUILDERS = {
    ".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"
}  # fmt: skip
OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"),
)  # fmt: skip
"""Byte-order marks of encodings other than UTF-8 (UTF-32 first: its LE mark starts with
UTF-16's)."""


def open_text(path: PathLike) -> BinaryIO:
    """Open a user's text file for reading bytes: the one place that turns OS errors and a
    UTF-16/UTF-32 byte-order mark into a one-line CrossalignError naming the file.

    A UTF-8 byte-order mark is allowed (``clean_line`` drops it); the file is positioned at 0.
    """
    path = Path(path)
    try:
        f = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except IsADirectoryError:
        raise CrossalignError(f"{path} is a directory; give a file") from None
    except FileNotFoundError:
        if path.is_symlink():
            raise CrossalignError(
                f"{path}: broken symlink (points to {os.readlink(path)}); give a file"
            ) from None
        raise CrossalignError(f"{path}: file not found") from None
    except PermissionError:
        raise CrossalignError(
            f"{path}: permission denied; make the file readable (chmod u+r {path})"
        ) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CrossalignError(f"{path}: symlink loop; point the link at a file") from None
        raise CrossalignError(f"{path}: cannot read: {e.strerror}") from None
    head = f.read(4)
    f.seek(0)
    for bom, encoding in OTHER_BOMS:
        if head.startswith(bom):
            f.close()
            raise CrossalignError(
                f"{path} is {encoding} (byte-order mark); convert it to UTF-8, e.g. "
                f"iconv -f {encoding} -t UTF-8 {path} > {path.name}.utf8"
            )
    return f


def clean_line(raw: bytes, path: PathLike, number: int) -> bytes:
    """The bytes of line ``number`` (1-based) of ``path`` without a UTF-8 byte-order mark
    (line 1); a NUL byte is a CrossalignError naming ``file:line`` (it would become text)."""
    if number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    if b"\0" in raw:
        raise CrossalignError(
            f"{path}:{number}: contains a NUL byte; text must be UTF-8 without NUL bytes (is it "
            f"a binary file, or UTF-16 without a byte-order mark?)"
        )
    return raw


def decode_line(raw: bytes, path: PathLike, number: int) -> str:
    """Line ``number`` (1-based) of ``path`` as text, without the line break: ``clean_line``,
    then UTF-8 decoding (an error naming ``file:line`` and the fix)."""
    try:
        text = clean_line(raw, path, number).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CrossalignError(
            f"{path}:{number}: not UTF-8 (byte {e.start}); convert the file, e.g. "
            f"iconv -f latin1 -t utf-8"
        ) from None
    return text.rstrip("\r\n")


def iter_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` of a UTF-8 file, 1-based, without the newline.

    Raises CrossalignError (see ``open_text`` and ``decode_line``) for a file that cannot be
    read, is not UTF-8 or holds a NUL byte; a UTF-8 byte-order mark is dropped.
    """
    with open_text(path) as f:
        for number, raw in enumerate(f, 1):
            yield number, decode_line(raw, path, number)


def read_text(path: PathLike) -> list[str]:
    """Non-empty lines of a UTF-8 text file (one sentence or paragraph per line), stripped.

    Raises CrossalignError if the file is missing, not UTF-8 (naming the line) or has no text.
    """
    lines = [t.strip() for _, t in iter_lines(path)]
    lines = [t for t in lines if t]
    if not lines:
        raise CrossalignError(
            f"{path}: file is empty; give a UTF-8 file with one sentence per line"
        )
    return lines


def read_hf_text(dataset: str, split: str = "train", column: str = "text") -> list[str]:
    """Non-empty strings of ``column`` in a Hugging Face ``datasets`` dataset, stripped.

    ``dataset`` is a name for ``load_dataset`` or a local path: a ``save_to_disk`` directory,
    a directory of data files, or one .json/.jsonl/.csv/.parquet/.txt file.
    """
    from crossalign.data.inputs import load_dataset_column

    column_data = load_dataset_column(dataset, split, column)
    lines = [t.strip() for t in column_data[:] if isinstance(t, str) and t.strip()]
    if not lines:
        raise CrossalignError(f"dataset {dataset} column '{column}' has no text")
    return lines


def dataset_spec(spec: dict[str, Any], where: str = "") -> tuple[str, str, str]:
    """(dataset, split, column) of a ``{dataset, split, column}`` config mapping."""
    unknown = set(spec) - {"dataset", "split", "column"}
    if "dataset" not in spec or unknown:
        raise CrossalignError(
            f"{where or 'mono source'}: a mapping needs keys dataset[, split, column], got "
            f"{', '.join(map(str, spec))}"
        )
    return str(spec["dataset"]), spec.get("split", "train"), spec.get("column", "text")


def read_mono(spec: Any, where: str = "") -> list[str]:
    """Monolingual text from a config value: a file path, a list of file paths (concatenated,
    exact duplicate lines dropped), or a mapping ``{dataset, split, column}``."""
    if isinstance(spec, dict):
        return read_hf_text(*dataset_spec(spec, where))
    if isinstance(spec, (list, tuple)):
        seen: dict[str, None] = {}
        for p in spec:
            seen.update(dict.fromkeys(read_text(p)))
        return list(seen)
    return read_text(spec)


def read_parallel(spec: Any) -> list[tuple[str, str]]:
    """Sentence pairs from a TSV file (``src<TAB>tgt``) or a pair of line-aligned files.

    Lines where either side is empty are dropped. Raises CrossalignError when the two files
    have different line counts or a TSV line has no tab (naming file and line).
    """
    if isinstance(spec, (list, tuple)):
        if len(spec) != 2:
            raise CrossalignError(f"parallel source {spec!r} must be [src_file, tgt_file]")
        src = [t for _, t in iter_lines(spec[0])]
        tgt = [t for _, t in iter_lines(spec[1])]
        if len(src) != len(tgt):
            raise CrossalignError(
                f"parallel files {spec[0]} ({len(src)} lines) and {spec[1]} ({len(tgt)} lines) "
                f"differ in line count; they must be line-aligned"
            )
        pairs = list(zip((s.strip() for s in src), (t.strip() for t in tgt)))
    else:
        pairs = []
        for number, text in iter_lines(spec):
            if not text.strip():
                continue
            if "\t" not in text:
                raise CrossalignError(
                    f"{spec}:{number}: no tab; a TSV parallel corpus needs 'source<TAB>target'"
                )
            s, t = text.split("\t", 1)
            pairs.append((s.strip(), t.strip()))
    pairs = [(s, t) for s, t in pairs if s and t]
    if not pairs:
        raise CrossalignError(f"parallel source {spec!r} has no sentence pairs")
    return pairs


def read_dictionary(path: PathLike) -> list[tuple[str, str]]:
    """Translation pairs of a MUSE-style dictionary: ``src tgt`` per line (space or tab).

    Further fields (e.g. a score) are ignored. Raises CrossalignError for a non-empty line with
    fewer than 2 fields, naming file and line.
    """
    pairs = []
    for number, text in iter_lines(path):
        fields = text.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise CrossalignError(
                f"{path}:{number}: dictionary line has {len(fields)} field; "
                f"expected 'source target'"
            )
        pairs.append((fields[0], fields[1]))
    if not pairs:
        raise CrossalignError(f"{path}: dictionary is empty")
    return pairs
