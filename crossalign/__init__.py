"""crossalign: multilingual masked-LM pre-training with cross-lingual alignment objectives."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from crossalign.align.api import Aligner
    from crossalign.align.words import Alignment, Link
    from crossalign.api import evaluate, induce_dictionary
    from crossalign.config import RunConfig

__all__ = ["Aligner", "Alignment", "Link", "__version__", "evaluate", "induce_dictionary", "train"]


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
    from crossalign.training import train as run

    if isinstance(config, RunConfig):
        cfg = config_from_data(config_to_dict(config), overrides)
    elif isinstance(config, dict):
        cfg = config_from_data(config, overrides)
    else:
        cfg = load_config(config, list(overrides))
    return run(cfg, resume=resume, overwrite=overwrite)


def __getattr__(name: str) -> Any:
    """``crossalign.Aligner``, ``Link``, ``Alignment``, ``evaluate`` and ``induce_dictionary``,
    imported on first use so that ``import crossalign`` (and the CLI's startup) loads no
    torch."""
    if name == "Aligner":
        from crossalign.align.api import Aligner

        return Aligner
    if name in ("evaluate", "induce_dictionary"):
        from crossalign import api

        return getattr(api, name)
    if name in ("Alignment", "Link"):
        from crossalign.align import words

        return getattr(words, name)
    raise AttributeError(f"module 'crossalign' has no attribute {name!r}")
