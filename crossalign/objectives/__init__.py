"""Training objectives, registered by name (``crossalign ls objectives``)."""

from crossalign.objectives import cooc_gc, dwa, mlm, tlm  # noqa: F401  (registers the objectives)
from crossalign.objectives.base import OBJECTIVES, Objective, RawBatch, TokenContext

__all__ = ["OBJECTIVES", "Objective", "RawBatch", "TokenContext"]
