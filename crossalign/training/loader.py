"""Batches collated off the training process, in a deterministic order.

The data order stays a pure function of (seed, step, data position): the training process
draws each step's example indices with the objectives' ``SourceSampler``s (cheap) and hands
the draw to a ``torch.utils.data.DataLoader`` whose worker processes read the examples from
the memory-mapped store and collate them (masking, pair layout, code-switching) with
generators seeded by (seed, step, process, micro-batch, objective). Every process draws the
same global batch and collates only its own slice. Each item carries the data position after
its step, so a checkpoint saves the position of the last step *trained*, not of the batches
prefetched beyond it, and ``--resume`` is bit-identical.
"""

from __future__ import annotations

import copy
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from crossalign.objectives.base import Objective
from crossalign.objectives.objective_set import derived_seed, raw_batch
from crossalign.training.sampler import SourceSampler


@dataclass
class StepDraw:
    """One optimizer step's global draw: per objective, (source, example indices); and the
    data position (per objective, examples drawn per source) after it."""

    step: int
    draws: dict[str, tuple[str, np.ndarray]]
    position: dict[str, dict[str, int]]


class StepPlan(Sampler):
    """Yields the ``StepDraw`` of steps ``start`` ... ``steps - 1`` from the samplers (whose
    state is the data position at ``start``), ``batch_sizes[objective]`` examples each. Blocks
    of streamed sources (``streams``: per objective, source → ``StreamingText``) are read here,
    in order, from the stream position saved in ``position`` under ``<source>#stream``."""

    def __init__(
        self,
        samplers: dict[str, SourceSampler],
        start: int,
        steps: int,
        batch_sizes: dict[str, int],
        streams: dict[str, dict[str, Any]] | None = None,
        position: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.samplers, self.start, self.steps = samplers, start, steps
        self.batch_sizes = batch_sizes
        position = position or {}
        self.readers = {
            (name, source): text.reader(position.get(name, {}).get(f"{source}#stream"))
            for name, sources in (streams or {}).items()
            for source, text in sources.items()
        }

    def __len__(self) -> int:
        return self.steps - self.start

    def __iter__(self) -> Iterator[StepDraw]:
        for step in range(self.start, self.steps):
            draws = {n: s.draw(step, self.batch_sizes[n]) for n, s in self.samplers.items()}
            position: dict[str, dict[str, Any]] = {
                n: s.state_dict() for n, s in self.samplers.items()
            }
            for (name, source), reader in self.readers.items():
                if draws[name][0] == source:
                    draws[name] = (source, reader.take(len(draws[name][1])))
                position[name][f"{source}#stream"] = reader.state
            yield StepDraw(step, draws, position)


@dataclass
class StepBatches:
    """What a worker hands the training loop for one step: ``micro[m][objective]`` is a
    collated batch, or (``RawBatch``, seed) for objectives that collate in the training
    process; ``tokens`` counts real (non-padding) tokens of the collated ones."""

    step: int
    position: dict[str, dict[str, int]]
    micro: list[dict[str, Any]]

    def pin_memory(self) -> StepBatches:
        """Page-locked copies of the collated tensors (DataLoader ``pin_memory``)."""
        for batches in self.micro:
            for name, batch in batches.items():
                if isinstance(batch, dict):
                    batches[name] = {k: v.pin_memory() for k, v in batch.items()}
        return self


class StepCollator(Dataset):
    """Reads and collates this process's slice of a ``StepDraw``.

    ``examples[kind][source]`` are the training sources (``PackedBlocks`` per language,
    ``PairText`` per pair); process ``rank`` takes micro-batch m's rows
    ``(rank·grad_accum + m)·per[objective] ...`` of the objective's global batch.
    """

    def __init__(
        self,
        objectives: dict[str, Objective],
        examples: dict[str, dict[str, Any]],
        seed: int,
        rank: int,
        grad_accum: int,
        per: dict[str, int],
    ) -> None:
        self.objectives = {name: cpu_view(obj) for name, obj in objectives.items()}
        self.examples = examples
        self.seed, self.rank, self.grad_accum, self.per = seed, rank, grad_accum, per

    def __getitem__(self, draw: StepDraw) -> StepBatches:
        micro = []
        for m in range(self.grad_accum):
            batches: dict[str, Any] = {}
            for i, (name, obj) in enumerate(self.objectives.items()):
                source, idx = draw.draws[name]
                per = self.per[name]
                lo = (self.rank * self.grad_accum + m) * per
                raw = raw_batch(obj.data, source, self.examples[obj.data][source],
                                idx[lo : lo + per])  # fmt: skip
                seed = derived_seed(self.seed, draw.step, self.rank, m, i)
                if obj.collate_in_workers():
                    batches[name] = obj.collate(raw, torch.Generator().manual_seed(seed))
                else:
                    batches[name] = (raw, seed)
            micro.append(batches)
        return StepBatches(draw.step, draw.position, micro)


def cpu_view(objective: Objective) -> Objective:
    """A shallow copy of ``objective`` whose buffers are CPU copies, for collation in worker
    processes: a worker forked from a process that uses CUDA cannot touch CUDA tensors."""
    view = copy.copy(objective)
    view._buffers = {k: None if v is None else v.cpu() for k, v in objective._buffers.items()}
    return view


def finish_collation(
    objectives: dict[str, Objective], batches: dict[str, Any]
) -> dict[str, dict[str, torch.Tensor]]:
    """Collate, in the training process, the objectives a worker left as (RawBatch, seed)."""
    out = {}
    for name, batch in batches.items():
        if isinstance(batch, tuple):
            raw, seed = batch
            batch = objectives[name].collate(raw, torch.Generator().manual_seed(seed))
        out[name] = batch
    return out


def _keep(item: StepBatches) -> StepBatches:
    return item


def _worker_init(_: int) -> None:
    """Workers leave Ctrl-C to the training process (which checkpoints, then stops them),
    and use one thread each."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


def step_loader(collator: StepCollator, plan: StepPlan, num_workers: int) -> DataLoader:
    """A DataLoader over ``plan`` whose ``num_workers`` processes run ``collator`` (0: in the
    training process); batches are pinned when a GPU is present."""
    return DataLoader(
        collator,
        sampler=plan,
        batch_size=None,
        collate_fn=_keep,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
        worker_init_fn=_worker_init if num_workers else None,
        multiprocessing_context="fork" if num_workers else None,
        prefetch_factor=4 if num_workers else None,
        # its own generator: drawing the workers' base seed from the global RNG would shift
        # the model's dropout after a resume
        generator=torch.Generator().manual_seed(0),
    )
