"""The model and its objectives as one module (``ObjectiveSet``), and how examples reach
them: ``raw_batch`` reads one source's examples into a ``RawBatch`` for an objective's
``collate``, with a generator seeded by ``derived_seed``.

The training loop trains an ``ObjectiveSet``; the held-out evaluation
(``crossalign.evals.heldout``) scores its ``heldout`` objectives, in training and in
``eval perplexity`` alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from crossalign.models.seq2seq import is_seq2seq
from crossalign.objectives.base import Objective, RawBatch
from crossalign.objectives.mlm import MaskedLM
from crossalign.objectives.seq2seq import MaskedSeq2Seq, Translation
from crossalign.objectives.tlm import TranslationLM

if TYPE_CHECKING:
    from crossalign.data.store.prepare import TrainingData


def derived_seed(*parts: int) -> int:
    """A generator seed derived from integers (the same on every process and run)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1, np.uint64)[0] >> 1)


def raw_batch(kind: str, source: str, examples: Any, idx: np.ndarray) -> RawBatch:
    """Examples ``idx`` of one source: rows of packed blocks, sentences, or pairs of a pair
    source; a 2-D ``idx`` holds blocks already read (from a stream)."""
    if idx.ndim == 2:
        return RawBatch(source, blocks=idx)
    if kind == "mono":
        return RawBatch(source, blocks=examples[idx])
    if kind == "sentences":
        return RawBatch(source, sentences=[examples[int(k)] for k in idx])
    return RawBatch(source, pairs=[examples.pair(int(k)) for k in idx])


class ObjectiveSet(nn.Module):
    """The model and its objectives as one module, so one ``prepare``/DDP wrapper covers the
    objectives' own heads and every micro-step is a single forward and backward.

    ``heldout`` holds parameter-free MLM and TLM objectives used for validation loss only.
    """

    def __init__(self, model: PreTrainedModel, objectives: dict[str, Objective]) -> None:
        super().__init__()
        self.model = model
        self.objectives = nn.ModuleDict(objectives)
        ctx = next(iter(objectives.values())).ctx
        if is_seq2seq(model):
            heldout = {"mass": MaskedSeq2Seq(ctx, label_smoothing=0.0)}
            heldout["mt"] = Translation(ctx, direction="forward", label_smoothing=0.0)
        else:
            # held-out TLM in the pair layout the run's TLM (or DWA) trains on
            layout = next(
                (o.layout for o in objectives.values() if isinstance(o, TranslationLM)), "tlm"
            )
            heldout = {"mlm": MaskedLM(ctx), "tlm": TranslationLM(ctx, layout=layout)}
        self.heldout = nn.ModuleDict(heldout)

    def heldout_sets(self, data: TrainingData) -> list[tuple[str, str, dict]]:
        """(held-out objective, kind of data, held-out examples per source): MLM on blocks and
        TLM on pairs for a masked-LM; MASS on sentences and translation (each pair's forward
        direction) for an encoder-decoder."""
        if "mass" in self.heldout:
            return [
                ("mass", "sentences", data.valid_sentences),
                ("mt", "parallel", data.valid_parallel),
            ]
        return [("mlm", "mono", data.valid_mono), ("tlm", "parallel", data.valid_parallel)]

    def forward(
        self,
        batches: dict[str, dict[str, torch.Tensor]],
        heldout: bool = False,
        label: bool = False,
    ) -> dict:
        """(loss, n_tokens, metrics) per objective name for its batch; with ``label``, each
        batch completed by its objective's ``label`` pass instead (no gradient; through the
        module so that a sharded or distributed wrapper gathers what the model needs)."""
        if label:
            with torch.no_grad():
                return {n: self.objectives[n].label(self.model, b) for n, b in batches.items()}
        table = self.heldout if heldout else self.objectives
        out = {}
        for name, batch in batches.items():
            objective = table[name]
            out[name] = objective.loss(batch, objective(self.model, batch))
        return out
