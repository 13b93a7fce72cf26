"""Word-align two line-aligned text files (``crossalign align``)."""

from __future__ import annotations

from pathlib import Path

from crossalign.align.config import AlignConfig


def align_files(
    src_file: str | Path,
    tgt_file: str | Path,
    model: str | Path,
    cfg: AlignConfig,
    layer: int = 8,
    languages: tuple[str, str] | None = None,
    device: str | None = None,
) -> tuple[list[str], str | None]:
    """Align the whitespace-tokenized sentences of two line-aligned files from the hidden states
    of ``layer`` of ``model``: one line of sorted 0-based Pharaoh ``i-j`` links per pair, and
    the truncation warning (None when no sentence was too long). ``languages`` (source,
    target) picks the language embeddings of a model trained with them."""
    from crossalign.align.aligner import load_aligner
    from crossalign.align.words import format_pharaoh
    from crossalign.evals.gold import read_parallel

    src, tgt = read_parallel(src_file, tgt_file)
    aligner = load_aligner(model, cfg, [layer], languages, device)
    links = aligner.align(list(zip(src, tgt)), [layer], progress=True)[layer]
    return [format_pharaoh(x) for x in links], aligner.truncation_warning()
