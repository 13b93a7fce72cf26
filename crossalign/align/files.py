"""Word-align text files (``crossalign align``) and symmetrize Pharaoh files (``crossalign
symmetrize``), streamed: pairs are read, aligned and written a chunk at a time (lines one at a
time), so memory stays bounded on files of millions of pairs.

Inputs: two line-aligned files (``SRC_FILE TGT_FILE``) or one file of ``source ||| target``
lines (``--input``, as awesome-align and eflomal read; ``-`` is stdin). Outputs: Pharaoh
``i-j`` lines (a file, written atomically, or ``-`` for stdout), and optionally the score of
each link (``--output-prob``) and the linked words (``--output-words``).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from crossalign.align.config import AlignConfig
from crossalign.data.lines import PathLike, decode_line, open_text
from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean

if TYPE_CHECKING:  # annotations only: the readers and symmetrize need no torch
    from crossalign.align.aligner import Pair

STDIO = "-"
"""The file name that means stdin (inputs) or stdout (the Pharaoh output)."""
PAIR_SEP = "|||"
"""Separator of the source and target sentence in an ``--input`` line."""


def _numbered_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 file or of stdin (``-``), 1-based, without the line
    break; a line that is not UTF-8 is an error naming ``file:line``."""
    if str(path) == STDIO:
        for number, raw in enumerate(sys.stdin.buffer, 1):
            yield number, decode_line(raw, "<stdin>", number)
        return
    with open_text(path) as f:
        for number, raw in enumerate(f, 1):
            yield number, decode_line(raw, path, number)


def _split_pair(text: str, where: str) -> Pair:
    """The words of a ``source ||| target`` line; anything but exactly one ``|||`` is a
    CrossalignError naming ``where`` (``file:line``)."""
    parts = text.split(PAIR_SEP)
    if len(parts) != 2:
        raise CrossalignError(
            f"{where}: expected 'source {PAIR_SEP} target', found {len(parts) - 1} "
            f"'{PAIR_SEP}'; write one '{PAIR_SEP}' between the sentences"
        )
    return parts[0].split(), parts[1].split()


def _read_once(path: PathLike) -> bool:
    """Whether ``path`` can be read only once (stdin, a pipe, a character device), so it is
    not checked ahead of aligning."""
    if str(path) == STDIO:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # open_text names the problem
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def check_lines(path: PathLike, pairs: bool = False) -> int | None:
    """Read a file once before aligning it and return its line count, so a bad file fails at
    once (before the model loads and hours of aligning) with the readers' one-line errors:
    not UTF-8, a NUL byte, a directory, ...; with ``pairs``, a line without exactly one
    ``|||``. None, without reading, for stdin or a pipe (``_read_once``): their lines are
    checked as they are aligned."""
    if _read_once(path):
        return None
    n = 0
    for n, text in _numbered_lines(path):
        if pairs:
            _split_pair(text, f"{path}:{n}")
    return n


def read_pair_file(path: PathLike) -> Iterator[Pair]:
    """The whitespace-tokenized pairs of a file of ``source ||| target`` lines (``-``: stdin),
    read lazily after ``check_lines``. A line without exactly one ``|||`` is a
    CrossalignError naming ``file:line``; a side may be empty (the pair gets no links)."""
    check_lines(path, pairs=True)
    name = "<stdin>" if str(path) == STDIO else path
    return (_split_pair(text, f"{name}:{n}") for n, text in _numbered_lines(path))


def read_two_files(src_path: PathLike, tgt_path: PathLike) -> Iterator[Pair]:
    """The whitespace-tokenized pairs of two line-aligned files, read lazily
    (``zip_line_files``)."""
    lines = zip_line_files(src_path, tgt_path)
    return ((src.split(), tgt.split()) for _, src, tgt in lines)


def zip_line_files(a_path: PathLike, b_path: PathLike) -> Iterator[tuple[int, str, str]]:
    """``(line number, line of a, line of b)`` of two line-aligned files, read lazily after
    ``check_lines``: files whose line counts differ are a CrossalignError at once; for
    pipes, when one ends before the other (the outputs written so far are then not kept:
    see ``align_files``)."""
    counts = check_lines(a_path), check_lines(b_path)
    if None not in counts and counts[0] != counts[1]:
        raise CrossalignError(
            f"{a_path} ({counts[0]} lines) and {b_path} ({counts[1]} lines) differ in line "
            f"count; they must be line-aligned"
        )
    return _zip_lines(a_path, b_path)


def _zip_lines(a_path: PathLike, b_path: PathLike) -> Iterator[tuple[int, str, str]]:
    """The lines of ``zip_line_files``; one file ending first is a CrossalignError."""
    a, b = _numbered_lines(a_path), _numbered_lines(b_path)
    number = 0
    while True:
        x, y = next(a, None), next(b, None)
        if x is None and y is None:
            return
        number += 1
        if x is None or y is None:
            short, long_ = (a_path, b_path) if x is None else (b_path, a_path)
            raise CrossalignError(
                f"{short} ends before line {number} of {long_}; the two inputs differ in line "
                f"count and must be line-aligned"
            )
        yield number, x[1], y[1]


def open_output(stack: ExitStack, path: str) -> TextIO:
    """stdout for ``-``; otherwise a UTF-8 text file beside ``path`` that is renamed onto it
    when ``stack`` closes without an exception (``crossalign.fileio.atomic_path``), and
    removed when it closes with one."""
    from crossalign.fileio import atomic_path

    if path == STDIO:
        return sys.stdout
    tmp = stack.enter_context(atomic_path(path))
    return stack.enter_context(open(tmp, "w", encoding="utf-8"))


def read_pharaoh_line(text: str, where: str) -> set[tuple[int, int]]:
    """The links of one Pharaoh line (``i-j`` tokens, 0-based); anything else is a
    CrossalignError naming ``where`` (``file:line``) and the token."""
    links = set()
    for token in text.split():
        i, sep, j = token.partition("-")
        if not (sep and i.isdigit() and j.isdigit()):
            raise CrossalignError(
                f"{where}: '{token}' is not a Pharaoh link; write 0-based i-j pairs such as 0-1"
            )
        links.add((int(i), int(j)))
    return links


def symmetrize_files(forward: PathLike, backward: PathLike, method: str, out: str = STDIO) -> int:
    """Symmetrize two directional Pharaoh files line by line (``symmetrize``) into ``out``
    (a file written atomically, or ``-`` for stdout); returns the number of lines.

    ``forward`` holds source-target links ``i-j`` (aligning source to target); ``backward``
    holds target-source links ``j-i``, as aligning the other way (target file first) writes
    them: each of its links is flipped to ``i-j`` before symmetrizing. The output is
    source-target.
    """
    from crossalign.align.symmetrize import SYMMETRIZE_METHODS, symmetrize
    from crossalign.align.words import format_pharaoh
    from crossalign.fileio import check_writable

    if method not in SYMMETRIZE_METHODS:
        raise CrossalignError(
            f"unknown symmetrization '{method}'{did_you_mean(method, list(SYMMETRIZE_METHODS))}; "
            f"choose one of {', '.join(SYMMETRIZE_METHODS)}"
        )
    if out != STDIO:
        check_writable(out, "--out")
    with ExitStack() as stack:
        f = open_output(stack, out)
        n = 0
        for number, fwd, bwd in zip_line_files(forward, backward):
            a = read_pharaoh_line(fwd, f"{forward}:{number}")
            b = {(i, j) for j, i in read_pharaoh_line(bwd, f"{backward}:{number}")}
            f.write(format_pharaoh(sorted(symmetrize(a, b, method))) + "\n")
            n += 1
        f.flush()
    return n


@dataclass
class AlignOutputs:
    """Where ``align_files`` writes."""

    out: str = STDIO
    """Pharaoh ``i-j`` lines: a file (replaced atomically when the run succeeds) or ``-``
    (stdout)."""
    probs: str | None = None
    """Per pair, ``i-j:score`` for each link (see ``crossalign.align.words.Link``)."""
    words: str | None = None
    """Per pair, ``src_word<sep>tgt_word`` for each link (awesome-align's word output)."""

    def check(self) -> None:
        """Refuse, with a one-line CrossalignError naming the option (``--out``,
        ``--output-prob``, ``--output-words``) and the path, a file that cannot be written,
        before the model loads and the pairs are aligned."""
        from crossalign.fileio import check_writable

        for flag, path in (
            ("--out", self.out),
            ("--output-prob", self.probs),
            ("--output-words", self.words),
        ):
            if path and path != STDIO:
                check_writable(path, flag)


def align_files(
    pairs: Iterator[Pair],
    model: str | Path,
    cfg: AlignConfig,
    outputs: AlignOutputs,
    layer: int = 8,
    languages: tuple[str, str] | None = None,
    device: str | None = None,
) -> tuple[int, str | None]:
    """Align ``pairs`` (``read_pair_file`` or ``read_two_files``) with ``layer`` of ``model``
    (through ``crossalign.Aligner``) and write each pair's line to ``outputs`` as soon as its
    chunk is aligned; returns the number of pairs and the truncation warning (None when no
    sentence was too long). Files are written beside their destination and renamed onto it
    at the end, so a failure (a malformed input line) leaves no half-written file; stdout
    gets the lines of the chunks aligned before it. An output that cannot be written is
    refused before the model loads (``AlignOutputs.check``)."""
    from crossalign.align.sentences import Aligner
    from crossalign.align.words import format_pharaoh, format_probabilities, format_words

    outputs.check()
    aligner = Aligner.from_config(model, cfg, layer, languages, device)
    with ExitStack() as stack:
        out = open_output(stack, outputs.out)
        probs = open_output(stack, outputs.probs) if outputs.probs else None
        words = open_output(stack, outputs.words) if outputs.words else None
        n = 0
        for (src, tgt), alignment in aligner.align_pairs(pairs, progress=True):
            out.write(format_pharaoh(alignment.links) + "\n")
            if probs:
                probs.write(format_probabilities(alignment.links) + "\n")
            if words:
                words.write(format_words(alignment.links, src, tgt) + "\n")
            n += 1
        out.flush()
    return n, aligner.truncation_warning()
