"""Line rules for a user's text files: how a file is opened, its byte-order mark and control
characters handled, and its lines decoded, each failure one line naming the file (and line).
"""

from __future__ import annotations

import codecs
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

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
