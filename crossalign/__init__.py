"""crossalign: multilingual masked-LM pre-training with cross-lingual alignment objectives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from crossalign.api import Aligner, Alignment, Link, evaluate, induce_dictionary, train

__all__ = ["Aligner", "Alignment", "Link", "__version__", "evaluate", "induce_dictionary", "train"]


def __getattr__(name: str) -> Any:
    """The Python API of ``crossalign.api`` (``train``, ``evaluate``, ``induce_dictionary``,
    ``Aligner``, ``Alignment``, ``Link``), imported on first use so that ``import crossalign``
    (and the CLI's startup) loads no torch."""
    if name in __all__ and name != "__version__":
        from crossalign import api

        return getattr(api, name)
    raise AttributeError(f"module 'crossalign' has no attribute {name!r}")
