"""The Python API: what the commands do, as functions. ``train`` (pre-training),
``evaluate`` (any registered evaluation), ``induce_dictionary`` and ``Aligner`` (word
alignment of sentences). ``crossalign.X`` imports this module on first use, so that
``import crossalign`` loads no torch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crossalign.align.sentences import Aligner
    from crossalign.align.words import Alignment, Link
    from crossalign.config import RunConfig

__all__ = ["Aligner", "Alignment", "Link", "evaluate", "induce_dictionary", "train"]


def train(
    config: str | Path | dict | RunConfig,
    overrides: Sequence[str] = (),
    *,
    resume: str | None = None,
    overwrite: bool = False,
) -> dict[str, float]:
    """Pre-train as ``crossalign train`` does and return the final held-out metrics.

    ``config`` is a YAML run-config file, a dict of the same shape, or a ``RunConfig``;
    ``overrides`` are ``key=value`` changes (``["train.steps=100"]``); ``resume`` is ``"last"``
    or a checkpoint directory; ``overwrite`` empties a non-empty ``run_dir`` first::

        import crossalign
        crossalign.train({"data": {"corpus": "data/bible"}, "train": {"steps": 100}})
    """
    from crossalign.config import RunConfig, config_from_data, config_to_dict, load_config
    from crossalign.training.loop import train as run

    if isinstance(config, RunConfig):
        cfg = config_from_data(config_to_dict(config), overrides)
    elif isinstance(config, dict):
        cfg = config_from_data(config, overrides)
    else:
        cfg = load_config(config, list(overrides))
    return run(cfg, resume=resume, overwrite=overwrite)


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
    from crossalign.lexicon.embed import load_masked_lm
    from crossalign.lexicon.induce import induce_with_options
    from crossalign.lexicon.options import InductionOptions
    from crossalign.schema import build_dataclass

    opts = build_dataclass(InductionOptions, options, "induce_dictionary")
    encoder, tokenizer = load_masked_lm(str(model), opts.device)
    return induce_with_options(encoder, tokenizer, opts, src, tgt).forward.pairs(tokenizer)


def __getattr__(name: str) -> Any:
    """``Aligner``, ``Alignment`` and ``Link``, imported on first use (they load torch)."""
    if name == "Aligner":
        from crossalign.align.sentences import Aligner

        return Aligner
    if name in ("Alignment", "Link"):
        from crossalign.align import words

        return getattr(words, name)
    raise AttributeError(f"module 'crossalign.api' has no attribute {name!r}")
