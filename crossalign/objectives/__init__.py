"""Training objectives, registered by name (``crossalign ls objectives``)."""

# Importing the objective modules registers them.
from crossalign.objectives import (  # noqa: F401
    align_mlm,
    code_switch,
    code_switch_mass,
    cooc_gc,
    dict_mlm,
    dwa,
    mlm,
    seq2seq,
    tlm,
)
from crossalign.objectives.base import OBJECTIVES, Objective, RawBatch, TokenContext

__all__ = ["OBJECTIVES", "Objective", "RawBatch", "TokenContext"]
