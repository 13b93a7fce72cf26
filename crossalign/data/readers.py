"""Readers for monolingual text, parallel corpora and bilingual dictionaries.

Every reader fails with one line naming the file (and line) and the fix.
"""

from __future__ import annotations

from typing import Any

from crossalign.data.lines import PathLike, iter_lines
from crossalign.errors import CrossalignError


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
