"""Python shortcuts for what the commands do: ``crossalign.evaluate`` (any registered
evaluation) and ``crossalign.induce_dictionary``. Imported on first use (no torch at
``import crossalign``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def evaluate(
    name: str,
    model: str | Path | None = None,
    *,
    results: str | Path | bool | None = False,
    **options: Any,
) -> dict[str, float]:
    """The metrics of the registered evaluation ``name`` (``crossalign ls evaluations``) on
    ``model`` (a model or run directory, or a hub id), with its options as keyword arguments
    (the names of ``crossalign eval NAME --help`` with ``_`` for ``-``). ``results``: False
    (default) writes no result record, None the command's default file, a path that file."""
    from crossalign.evals.registry import evaluations
    from crossalign.evals.results import run_evaluation

    record, _ = run_evaluation(evaluations().get(name), model, options, results=results)
    return record.metrics


def induce_dictionary(
    model: str | Path, src: str, tgt: str, **options: Any
) -> list[tuple[str, str, float]]:
    """The token dictionary ``crossalign induce-dict`` induces from ``model``: (source token,
    target token, CSLS score), best first. Options are ``induce-dict``'s (``corpus`` or
    ``src_text``/``tgt_text``, ``layer``, ``threshold``, ``other_max``, ``k``, ``device``, ...)."""
    from crossalign.evals.results import model_dir_of
    from crossalign.lexicon.embed import load_masked_lm
    from crossalign.lexicon.induce import induce_with_options
    from crossalign.lexicon.options import InductionOptions
    from crossalign.schema import build_dataclass

    opts = build_dataclass(InductionOptions, options, "induce_dictionary")
    encoder, tokenizer = load_masked_lm(str(model_dir_of(model)), opts.device)
    return induce_with_options(encoder, tokenizer, opts, src, tgt).forward.pairs(tokenizer)
