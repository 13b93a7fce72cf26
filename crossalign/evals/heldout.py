"""Held-out loss and perplexity with fixed masking: what the training loop logs as
``valid/*`` at every evaluation, and what ``eval perplexity --source compute`` measures on a
saved model (on one process it reproduces the logged figures).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType
from torch import nn

from crossalign.data.masking import IGNORE_INDEX
from crossalign.objectives.mlm import add_masked_index
from crossalign.objectives.objective_set import ObjectiveSet, derived_seed, raw_batch

if TYPE_CHECKING:
    from crossalign.data.store.prepare import TrainingData


def _to(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def heldout_loss(
    accelerator: Accelerator,
    module: nn.Module,
    data: TrainingData,
    batch_size: int,
    seed: int,
) -> dict[str, float]:
    """Held-out loss and perplexity of each of ``ObjectiveSet.heldout_sets``: masked LM on
    ``valid_mono`` (``valid/mlm_*``) and TLM on ``valid_parallel`` (``valid/tlm_*``); for an
    encoder-decoder MASS on the held-out sentences (``valid/mass_*``) and translation of the
    held-out pairs (``valid/mt_*``); with fixed masking. Every process runs the same number of
    forward passes (short shards get a dummy batch that predicts nothing). Unless the model
    is sharded (FSDP, DeepSpeed: their wrapper's forward gathers the weights, in the
    training's precision), they run without the training's autocast, so the figures are the
    fp32 ones ``eval perplexity --source compute`` gives, whatever ``train.precision`` is."""
    was_training = module.training
    module.eval()
    inner: ObjectiveSet = accelerator.unwrap_model(module)
    # the class's forward skips accelerate's autocast, which wraps the instance's; a sharded
    # model goes through its wrapper, which gathers the weights
    sharded = accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)
    call = module if sharded else functools.partial(type(inner).forward, inner)
    w, r = accelerator.num_processes, accelerator.process_index
    totals: dict[str, torch.Tensor] = {}
    sets = inner.heldout_sets(data)
    with torch.no_grad():
        for name, kind, sources in sets:
            loss_sum = torch.zeros((), device=accelerator.device)
            count = torch.zeros((), device=accelerator.device)
            for s_i, source in enumerate(sorted(sources)):
                n = len(sources[source])
                for g, start in enumerate(range(0, n, batch_size * w)):
                    idx = np.arange(start, min(n, start + batch_size * w))[r::w]
                    real = len(idx) > 0
                    raw = raw_batch(kind, source, sources[source], idx if real else np.array([0]))
                    gen = torch.Generator().manual_seed(derived_seed(seed, s_i, g, r))
                    batch = inner.heldout[name].collate(raw, gen)
                    if not real:
                        batch["labels"].fill_(IGNORE_INDEX)
                        add_masked_index(batch)
                    batches = {name: _to(batch, accelerator.device)}
                    loss, ntok, _ = call(batches, heldout=True)[name]
                    loss_sum += loss.float() * ntok
                    count += ntok
            if sources:
                totals[name] = torch.stack([loss_sum, count])
    module.train(was_training)
    out = {}
    for name, t in totals.items():
        loss_sum, count = accelerator.reduce(t, "sum").tolist()
        if count > 0:
            out[f"valid/{name}_loss"] = loss_sum / count
            out[f"valid/{name}_ppl"] = math.exp(min(loss_sum / count, 50.0))
    return out
