"""Atomic writes: a failed or interrupted run never leaves a half-written output behind; and
reading the JSON files they leave."""

from __future__ import annotations

import fcntl
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


def read_jsonl_lines(path: str | os.PathLike) -> list[tuple[str, Any]]:
    """Each line of a JSON-lines file with its record ([] when the file does not exist); a
    half-written last line (power loss, disk full) is dropped with a note, a broken line
    before it is an error naming it."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        try:
            out.append((line, json.loads(line)))
        except ValueError:
            if n == len(lines):
                print(f"{path}:{n}: dropping a half-written last line", file=sys.stderr)
                break
            raise CrossalignError(
                f"{path}:{n}: not a JSON record; delete or repair that line"
            ) from None
    return out


def append_jsonl(path: str | os.PathLike, record: Any) -> None:
    """Append ``record`` as one JSON line to ``path`` in a single write under an exclusive
    lock, so concurrent writers never interleave; a half-written last line left by a crash
    is cut off first (it never held a complete record)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            tail = os.pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
            os.ftruncate(fd, size - len(tail) + tail.rfind(b"\n") + 1)
        os.write(fd, data)
    finally:
        os.close(fd)
