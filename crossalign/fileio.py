"""Atomic writes: a failed or interrupted run never leaves a half-written output behind; and
reading the JSON files they leave."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _open_permissions(path: Path, directory: bool) -> None:
    """Give a temporary file or directory (created private by ``tempfile``) the permissions
    an ordinary ``open``/``mkdir`` would, so outputs are readable like any other file."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary file path beside ``path``; on success it is renamed onto ``path``.

    On an exception the temporary file is removed and ``path`` keeps its previous content.
    A directory at ``path`` is a CrossalignError naming it.
    """
    path = Path(path)
    if path.is_dir():
        raise CrossalignError(f"{path} is a directory; give a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    _open_permissions(Path(tmp), directory=False)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of a file's bytes, read 1 MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_writable(path: str | os.PathLike, flag: str, *, append: bool = False) -> None:
    """Refuse now, before the work whose output it is (a model loaded, a corpus aligned), an
    output ``path`` that cannot be written: a directory, a folder on its way that is a file,
    a folder that cannot be written to (read-only, no permission; probed by creating a file,
    which also holds for root) or, with ``append``, an existing file that cannot be appended
    to. A CrossalignError of one line naming ``flag`` (the option that gave it) and the path."""
    path = Path(path)
    where = f"{flag} {path}"
    if path.is_dir():
        raise CrossalignError(f"{where} is a directory; give a file path")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # atomic_path and append_jsonl create the missing folders
    if not folder.is_dir():
        raise CrossalignError(
            f"{where}: cannot write there, {folder} is not a directory; give a path in a "
            "writable directory"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=".crossalign-write-check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
        if append and path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as e:
        raise CrossalignError(
            f"{where}: cannot write there ({e.strerror or e}); give a path in a writable directory"
        ) from None


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_lines_atomic(path: str | os.PathLike, lines: Iterator[str] | list[str]) -> int:
    """Write one string per line to ``path`` atomically; returns the number of lines."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line)
            f.write("\n")
            n += 1
    return n


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` atomically."""
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike, fix: str) -> Any:
    """The JSON in ``path``; a file that is not UTF-8 JSON is an error naming it and ``fix``."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CrossalignError(f"{path}: not valid JSON ({e}); {fix}") from None


def replace_dir(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Move the complete directory ``src`` onto ``dst``; an existing ``dst`` is removed only
    after ``src`` has taken its place, so an error leaves the old or the new one, never a mix
    (a failed second rename puts the old one back; a crash between the two renames leaves
    the old one as ``.NAME.old`` beside it)."""
    src, dst = Path(src), Path(dst)
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old")
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
        os.replace(dst, old)
        try:
            os.replace(src, dst)
        except BaseException:
            os.replace(old, dst)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


@contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path``
    (see ``replace_dir``). On an exception, also one while renaming, it is removed and
    ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    _open_permissions(tmp, directory=True)
    try:
        yield tmp
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


LINE_SEPARATORS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
"""Characters that ``str.splitlines`` (and some editors and JSON-lines readers) break a line
at although JSON leaves them unescaped (``ensure_ascii=False``): written as escapes."""


def jsonl_line(record: Any) -> str:
    """``record`` as one JSON line (with its ``\\n``): readable UTF-8, with the characters of
    ``LINE_SEPARATORS`` escaped, so no reader splits it."""
    text = json.dumps(record, ensure_ascii=False)
    for char, escape in LINE_SEPARATORS.items():
        text = text.replace(char, escape)  # JSON holds them only inside strings
    return text + "\n"


def read_jsonl_lines(path: str | os.PathLike) -> list[tuple[str, Any]]:
    """Each line of a JSON-lines file with its record ([] when the file does not exist),
    split at ``\\n`` only (a U+2028 written unescaped stays inside its record); a
    half-written last line (power loss, disk full: not valid JSON) is dropped with a note, a
    broken line before it is an error naming it."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()  # the text after the last line break
    out = []
    for n, line in enumerate(lines, 1):
        try:
            out.append((line, json.loads(line)))
        except ValueError:
            if n == len(lines):
                print(
                    f"{path}:{n}: dropping a half-written last line (not valid JSON)",
                    file=sys.stderr,
                )
                break
            raise CrossalignError(
                f"{path}:{n}: not a JSON record; delete or repair that line"
            ) from None
    return out


def _last_line_start(fd: int, size: int) -> int:
    """The offset at which the last line of the open file begins (within its last MiB)."""
    tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
    return size - len(tail) + tail.rfind(b"\n") + 1


def append_jsonl(path: str | os.PathLike, record: Any) -> None:
    """Append ``record`` as one JSON line (``jsonl_line``) to ``path`` in a single write under
    an exclusive lock, so concurrent writers never interleave. A last line without its line
    break is kept, given the break, when it is valid JSON (a complete record, e.g. a copy
    that lost its final newline); one that is not is half-written (a crash) and cut off with
    a note."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = jsonl_line(record).encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            start = _last_line_start(fd, size)
            last = os.pread(fd, size - start, start)
            try:
                json.loads(last.decode("utf-8"))
                data = b"\n" + data
            except ValueError:
                n = 1 + sum(chunk.count(b"\n") for chunk in _chunks(fd, start))
                print(
                    f"{path}:{n}: cutting a half-written last line (not valid JSON)",
                    file=sys.stderr,
                )
                os.ftruncate(fd, start)
        os.write(fd, data)
    finally:
        os.close(fd)


def _chunks(fd: int, end: int, size: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of the open file before ``end``, a chunk at a time."""
    for offset in range(0, end, size):
        yield os.pread(fd, min(size, end - offset), offset)
