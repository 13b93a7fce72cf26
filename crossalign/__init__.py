"""crossalign: multilingual masked-LM pre-training with cross-lingual alignment objectives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from crossalign.align.api import Aligner
    from crossalign.align.words import Alignment, Link

__all__ = ["Aligner", "Alignment", "Link", "__version__"]


def __getattr__(name: str) -> Any:
    """``crossalign.Aligner``, ``Link`` and ``Alignment``, imported on first use so that
    ``import crossalign`` (and the CLI's startup) loads no torch."""
    if name == "Aligner":
        from crossalign.align.api import Aligner

        return Aligner
    if name in ("Alignment", "Link"):
        from crossalign.align import words

        return getattr(words, name)
    raise AttributeError(f"module 'crossalign' has no attribute {name!r}")
