"""The one training loop: objectives combined by weight, on accelerate.

Read top to bottom: set up (data, tokenizer, model, objectives), then per optimizer step draw
one global batch per objective, split it over processes and micro-batches, sum the weighted
losses (micro-batches weighted by their predicted tokens, so the step does not depend on how
the batch is split), step AdamW with warm-up and linear decay; log, evaluate and checkpoint on
schedule. Weights may follow a schedule over the steps, and ``train.step_per_objective`` gives
each objective its own update within a step (XLM's loop).
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather_object, set_seed
from torch import nn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    get_inverse_sqrt_schedule,
    get_linear_schedule_with_warmup,
)

from crossalign.checkpoint import (
    CONFIG,
    MANIFEST,
    MARKER,
    STATE,
    checkpoint_name,
    checkpoint_step,
    good_checkpoints,
    list_checkpoints,
    move_aside,
    prune_checkpoints,
    read_state,
    write_manifest,
)
from crossalign.config import RunConfig
from crossalign.data.batching import SourceSampler
from crossalign.data.loader import (
    StepCollator,
    StepPlan,
    derived_seed,
    finish_collation,
    raw_batch,
    step_loader,
)
from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.store.prepare import (
    TrainingData,
    cached_store,
    open_training_store,
    resolve_sources,
    train_config_tokenizer,
    training_data,
)
from crossalign.data.store.streaming import StreamingText, is_streaming
from crossalign.data.store.token_store import open_store
from crossalign.data.tokenizer import load_tokenizer
from crossalign.errors import CrossalignError
from crossalign.fileio import atomic_dir, replace_dir, write_text_atomic
from crossalign.models.build import build_model, set_dropout
from crossalign.models.card import training_card, write_card
from crossalign.models.load import model_languages
from crossalign.models.seq2seq import build_seq2seq, encoder_of, is_seq2seq
from crossalign.objective_options import normalise_saved, run_config_dict
from crossalign.objectives import OBJECTIVES, Objective, TokenContext
from crossalign.objectives.mlm import MaskedLM, add_masked_index
from crossalign.objectives.seq2seq import MaskedSeq2Seq, Translation
from crossalign.objectives.tlm import TranslationLM
from crossalign.probes import Probes
from crossalign.run_dir import METRICS, RunStart, open_run
from crossalign.schedules import WeightSchedule
from crossalign.tracking import check_trackers_installed, flat_config


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


@dataclass
class Setup:
    """Everything built before the first step."""

    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    objectives: dict[str, Objective]
    schedules: dict[str, WeightSchedule]
    """Each objective's weight over the steps (``objectives.N.weight``)."""
    data: TrainingData

    def weights_at(self, done: int) -> dict[str, float]:
        """Each objective's weight in the step after ``done`` steps (XLM's lambdas at
        ``n_total_iter`` = ``done``)."""
        return {name: schedule.value(done) for name, schedule in self.schedules.items()}

    @property
    def weights(self) -> dict[str, float]:
        """The weights of the first step (every step's, when none is scheduled)."""
        return self.weights_at(0)


def objective_classes(cfg: RunConfig) -> list[type[Objective]]:
    """The class of each of ``cfg.objectives``, in order, after checking that each option it
    is given is one of its options and that no objective is listed twice."""
    classes, seen = [], set()
    for i, oc in enumerate(cfg.objectives):
        cls = OBJECTIVES.get(oc.name)
        cls.check_option_keys(oc.options, f"objectives.{i} ({oc.name})")
        if oc.name in seen:
            raise CrossalignError(f"objectives.{i}: '{oc.name}' is listed twice")
        seen.add(oc.name)
        classes.append(cls)
    return classes


def _objectives(cfg: RunConfig, ctx: TokenContext) -> tuple[dict[str, Objective], dict]:
    objectives, schedules = {}, {}
    for oc, cls in zip(cfg.objectives, objective_classes(cfg)):
        objectives[oc.name] = cls(ctx, cls.build_options(oc.options))
        schedules[oc.name] = oc.schedule()
    return objectives, schedules


def run_is_seq2seq(cfg: RunConfig) -> bool:
    """Whether the run's objectives train an encoder-decoder (all of them) or a masked-LM (all
    of them); a mix is a CrossalignError naming one of each."""
    kinds = {oc.name: cls.seq2seq for oc, cls in zip(cfg.objectives, objective_classes(cfg))}
    seq2seq = [n for n, k in kinds.items() if k]
    masked = [n for n, k in kinds.items() if not k]
    if seq2seq and masked:
        raise CrossalignError(
            f"objectives: '{masked[0]}' trains a masked-LM and '{seq2seq[0]}' an encoder-decoder; "
            "a run trains one kind of model (pre-train with one, then start the other from it "
            "with model.path)"
        )
    if seq2seq and (cfg.train.probe_aer or cfg.train.probe_bli):
        raise CrossalignError(
            "train.probe_aer and train.probe_bli read a masked-LM; an encoder-decoder run "
            "(objectives " + ", ".join(seq2seq) + ") cannot use them: remove them"
        )
    return bool(seq2seq)


def build_setup(
    cfg: RunConfig, resume_from: Path | None, accelerator: Accelerator | None = None
) -> Setup:
    """Get the tokenizer (resumed, loaded, the store's or trained), the token store (given,
    cached or built now), then the model and objectives.

    A tokenizer is trained, and a store built, by the main process only; the other processes
    wait and then load the saved tokenizer and map the same store.
    """
    main = accelerator is None or accelerator.is_main_process
    given_store = open_training_store(cfg.data, cfg.data.store) if cfg.data.store else None
    sources = None if given_store else resolve_sources(cfg.data)
    if resume_from is not None:
        tokenizer = load_tokenizer(resume_from)
    elif cfg.model.path:
        tokenizer = (
            load_tokenizer(cfg.tokenizer.path, "tokenizer.path")
            if cfg.tokenizer.path
            else load_tokenizer(cfg.model.path, "model.path")
        )
    elif cfg.tokenizer.path:
        tokenizer = load_tokenizer(cfg.tokenizer.path, "tokenizer.path")
    elif given_store is not None:
        tokenizer = load_tokenizer(given_store.path / "tokenizer")
    else:
        saved = Path(cfg.run_dir) / "tokenizer"
        if main:
            tokenizer = train_config_tokenizer(cfg, sources)
            with atomic_dir(saved) as tmp:
                tokenizer.save_pretrained(tmp)
        if accelerator is not None:
            accelerator.wait_for_everyone()
            tokenizer = load_tokenizer(saved)
    store = given_store
    if store is None:
        # the main process builds (or finds) the store; the others then find it built
        if main:
            path = cached_store(sources, tokenizer, cfg.data.cache_dir, cfg.data.num_proc)
        if accelerator is not None:
            accelerator.wait_for_everyone()
        if not main:
            path = cached_store(sources, tokenizer, cfg.data.cache_dir, progress=False)
        store = open_store(path)
    streamed = {k: v for k, v in (sources.mono if sources else {}).items() if is_streaming(v)}
    data = training_data(
        store, tokenizer, cfg.data.max_length, cfg.data.max_valid_sequences, streamed
    )
    if run_is_seq2seq(cfg):
        ids = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
        model = build_seq2seq(cfg.model, len(tokenizer), ids, data.languages(), cfg.data.max_length)
    else:
        model = build_model(
            cfg.model, len(tokenizer), tokenizer.pad_token_id, data.languages(),
            cfg.data.max_length,
        )  # fmt: skip
    if cfg.model.dropout is not None:
        set_dropout(model, cfg.model.dropout)
    ctx = TokenContext.for_model(
        tokenizer, encoder_of(model), cfg.data.max_length, cfg.model.language_embeddings
    )
    objectives, schedules = _objectives(cfg, ctx)
    for objective in objectives.values():
        objective.check_config(cfg)
    for name, obj in objectives.items():
        if obj.data == "parallel" and not data.parallel:
            raise CrossalignError(
                f"objective '{name}' needs parallel data: set data.parallel or a data.corpus "
                f"with sentence pairs"
            )
        if obj.data == "mono" and not data.mono:
            raise CrossalignError(f"objective '{name}' needs monolingual data: set data.mono")
        if obj.data == "sentences" and set(data.mono) - set(data.sentences):
            streamed = sorted(set(data.mono) - set(data.sentences))
            raise CrossalignError(
                f"objective '{name}' reads whole sentences, which a streamed source does not "
                f"give (data.mono: {', '.join(streamed)}); tokenize them into the store"
            )
        if obj.data == "sentences" and not data.sentences:
            raise CrossalignError(f"objective '{name}' needs monolingual data: set data.mono")
    for objective in objectives.values():
        # Also on resume: the starting model is rebuilt identically before its state is
        # loaded, so ``start`` derives exactly what the original run derived.
        objective.start(model, data)
    return Setup(tokenizer, model, objectives, schedules, data)


def _to(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


class StopRequest:
    """First Ctrl-C asks the loop to checkpoint and stop at the end of the current step; a
    second one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        tqdm.write("interrupt: finishing this step, saving a checkpoint (Ctrl-C again to abort)")


class LogStats:
    """Per-objective sums between two log lines: loss, extra metrics and predicted tokens.

    ``flush`` turns them into the means a ``metrics.jsonl`` line reports, averaged over steps
    and processes. ``train/ppl`` averages the masked-LM part of each objective that counts
    for perplexity (its ``lm_loss`` metric when it reports one, else its loss), weighted by
    its masked-LM tokens (its ``lm_tokens`` metric when it reports one, else its count), so
    auxiliary losses and their counts never enter it. An objective's means are over the
    steps that trained it (``skipped``: steps that did not, with ``train.step_per_objective``
    and a weight of 0); one that no step trained since the last line is left out of it.
    """

    def __init__(
        self, objectives: dict[str, Objective], weights: dict[str, float], mix: str = "weighted"
    ) -> None:
        self.objectives = objectives
        self.weights = weights
        """The weights of the latest step (the logged ``loss`` uses them)."""
        self.mix = mix
        self.sums: dict[str, torch.Tensor] = {}
        self.steps = 0
        self.skipped: dict[str, int] = {}
        """Per objective, the steps since the last line that did not train it."""

    def skip(self, names: Sequence[str]) -> None:
        """Count a step that did not train the objectives ``names``."""
        for name in names:
            self.skipped[name] = self.skipped.get(name, 0) + 1

    def add(self, results: dict, scale: float) -> None:
        """Add one micro-step's (loss, n_tokens, metrics) per objective, scaled by ``scale``."""
        for name, (loss, ntok, metrics) in results.items():
            for key, value in {"loss": loss, **metrics}.items():
                factor = 1.0 if key == "lm_tokens" else scale  # a count, summed like tokens
                key = f"{name}/{key}"
                self.sums[key] = self.sums.get(key, 0.0) + value.detach().float() * factor
            key = f"{name}/tokens"
            self.sums[key] = self.sums.get(key, 0.0) + ntok.detach().float()

    def flush(self, accelerator: Accelerator) -> dict[str, float]:
        """Means since the last flush (then reset): ``loss``, ``loss/<objective>``,
        ``<objective>/<metric>`` and ``train/ppl``."""
        keys = sorted(self.sums)
        values = (
            accelerator.reduce(torch.stack([self.sums[k] for k in keys]), "mean").tolist()
            if keys
            else []
        )
        trained = {n: self.steps - self.skipped.get(n, 0) for n in self.objectives}
        means = {k: v / trained[k.partition("/")[0]] for k, v in zip(keys, values)}
        record: dict[str, float] = {}
        ppl_loss = ppl_tokens = 0.0
        names = [n for n in self.objectives if trained[n]]
        for name in names:
            objective = self.objectives[name]
            record[f"loss/{name}"] = means[f"{name}/loss"]
            for key, value in means.items():
                if key.startswith(f"{name}/") and key not in (f"{name}/loss", f"{name}/tokens"):
                    record[key] = value
            if objective.counts_for_perplexity:
                ntok = means.get(f"{name}/lm_tokens", means[f"{name}/tokens"])
                ppl_loss += means.get(f"{name}/lm_loss", means[f"{name}/loss"]) * ntok
                ppl_tokens += ntok
        record["loss"] = self._loss(record, means, names)
        if ppl_tokens:
            record["train/ppl"] = math.exp(min(ppl_loss / ppl_tokens, 50.0))
        self.sums, self.steps, self.skipped = {}, 0, {}
        return record

    def _loss(self, record: dict[str, float], means: dict[str, float], names: list[str]) -> float:
        """The loss the steps optimised (``accumulate_gradients``) with the latest weights:
        Σ_o w_o L_o over the objectives ``names`` trained since the last line, or with
        ``pooled`` mixing Σ_o w_o N_o L_o / Σ_o N_o (N_o: the objective's predicted tokens)."""
        if self.mix != "pooled":
            return sum(self.weights[n] * record[f"loss/{n}"] for n in names)
        tokens = {n: means[f"{n}/tokens"] for n in names}
        total = sum(tokens.values()) or 1.0
        return sum(self.weights[n] * tokens[n] * record[f"loss/{n}"] for n in names) / total

    def state_dict(self, accelerator: Accelerator) -> dict:
        """The sums since the last log line, averaged over processes, for a checkpoint: a run
        resumed between two log lines then logs the means the uninterrupted run logs."""
        keys = sorted(self.sums)
        values = (
            accelerator.reduce(torch.stack([self.sums[k] for k in keys]), "mean").tolist()
            if keys
            else []
        )
        return {"steps": self.steps, "sums": dict(zip(keys, values)), "skipped": dict(self.skipped)}

    def load_state_dict(self, state: dict, device: torch.device) -> None:
        """Continue from ``state_dict``'s sums (every process holds the mean; ``flush``
        averages over processes, so the total is unchanged)."""
        self.steps = int(state.get("steps", 0))
        self.skipped = {k: int(v) for k, v in state.get("skipped", {}).items()}
        self.sums = {k: torch.tensor(v, device=device) for k, v in state.get("sums", {}).items()}


def accumulate_gradients(
    accelerator: Accelerator,
    module: nn.Module,
    micro: list[dict[str, dict[str, torch.Tensor]]],
    objectives: dict[str, Objective],
    weights: dict[str, float],
    mix: str = "weighted",
) -> tuple[torch.Tensor, list[dict]]:
    """Forward and backward of this process's micro-batches of one optimizer step, weighted by
    predicted tokens so that the gradient equals one pass over the whole global batch, however
    it is split over micro-batches and processes (fairseq's ``sample_size`` normalisation).

    With ``n_pmo`` the predicted tokens of objective o in micro-batch m of process p (its
    ``token_count``) and ``L_pmo`` its mean loss, the step's loss is::

        weighted:  Σ_o w_o Σ_pm n_pmo L_pmo / N_o     N_o = Σ_pm n_pmo
        pooled:    Σ_o w_o Σ_pm n_pmo L_pmo / N       N = Σ_o N_o

    Each process backpropagates ``world ·`` its part (DDP averages gradients over processes);
    the token totals take one all-reduce per step. An objective whose loss is not a mean over
    its ``token_count`` (an auxiliary term) is weighted by that count all the same.

    An objective with a ``label`` pass (DWA's self-labels) completes every micro-batch of the
    step first, so that its ``token_count`` can depend on those labels.

    micro: per micro-batch, per objective, a collated CPU batch -> (this process's part of the
    step loss, a scalar on the device; per micro-batch, each objective's (loss, n, metrics)).
    """
    names = list(objectives)
    device = accelerator.device
    labelling = {n for n in names if type(objectives[n]).label is not Objective.label}
    counted = [  # on the CPU batches where no label pass is needed (no device sync)
        {n: float(objectives[n].token_count(b)) for n, b in batches.items() if n not in labelling}
        for batches in micro
    ]
    micro = [{n: _to(b, device) for n, b in batches.items()} for batches in micro]
    for batches, count in zip(micro, counted):
        if labelled := {n: b for n, b in batches.items() if n in labelling}:
            with torch.no_grad():  # outside too, so a DDP wrapper prepares no backward
                batches.update(module(labelled, label=True))
            count.update({n: float(objectives[n].token_count(batches[n])) for n in labelled})
    counts = torch.tensor([[count[n] for n in names] for count in counted]).to(device)  # [M, O]
    totals = accelerator.reduce(counts.sum(0), "sum")  # [O]
    if mix == "pooled":
        totals = totals.sum().expand(len(names))
    scales = counts * accelerator.num_processes / totals.clamp(min=1)  # [M, O]
    step_loss = torch.zeros((), device=device)
    results_per_micro = []
    for m, batches in enumerate(micro):
        sync = m == len(micro) - 1
        with contextlib.nullcontext() if sync else accelerator.no_sync(module):
            results = module(batches)
            total = sum(weights[n] * results[n][0] * scales[m, o] for o, n in enumerate(names))
            accelerator.backward(total)
        step_loss += total.detach()
        results_per_micro.append(results)
    return step_loss, results_per_micro


@dataclass
class TrainState:
    """What one optimizer step works on: the (prepared) module holding model and objectives,
    its optimizer and learning-rate schedule (None: a constant rate), and the step settings."""

    accelerator: Accelerator
    module: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    objectives: dict[str, Objective]
    weights: dict[str, float]
    """The objectives' weights in the next step (``TrainingRun.run_step`` sets them from the
    weight schedules before each step)."""
    mix: str = "weighted"
    """``train.objective_mix``: ``weighted`` or ``pooled`` (see ``accumulate_gradients``)."""
    max_grad_norm: float = 0.0
    """``train.max_grad_norm``: clip the gradient to this global norm (0: no clipping)."""
    step_per_objective: bool = False
    """``train.step_per_objective``: one optimizer update per objective (``update_groups``)."""

    @classmethod
    def of_run(
        cls,
        accelerator: Accelerator,
        module: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None,
        setup: Setup,
        cfg: RunConfig,
    ) -> TrainState:
        """The state of a run built by ``build_setup`` with the step settings of ``cfg``."""
        return cls(
            accelerator,
            module,
            optimizer,
            scheduler,
            setup.objectives,
            setup.weights,
            cfg.train.objective_mix,
            cfg.train.max_grad_norm,
            cfg.train.step_per_objective,
        )


@dataclass
class StepOutcome:
    """One optimizer step: this process's part of the step loss, the global gradient norm
    (before clipping), each micro-batch's (loss, n, metrics) per objective and the tokens
    (attention-mask positions) of this process's micro-batches. ``problem`` is empty when the
    step was taken; else it tells what became non-finite and the update was not made.
    With ``step_per_objective`` it sums the step's updates (``combine_updates``), and
    ``skipped`` names the objectives it did not train."""

    loss: torch.Tensor
    grad_norm: torch.Tensor
    results: list[dict]
    tokens: int
    problem: str = ""
    skipped: tuple[str, ...] = ()

    @property
    def finite(self) -> bool:
        """Whether the loss (and, without fp16 scaling, the gradient norm) was finite on every
        process, so that the update was made."""
        return not self.problem


def update_groups(ts: TrainState) -> list[list[str]]:
    """The objectives of each optimizer update of a step, in order: all of them in one
    update; with ``step_per_objective`` one update per objective, except one of weight 0
    (XLM's ``mt_step``/``bt_step`` return at once when their lambda is 0: no batch, no
    update)."""
    if not ts.step_per_objective:
        return [list(ts.objectives)]
    return [[name] for name in ts.objectives if ts.weights[name] != 0]


def train_step(
    ts: TrainState, micro: list[dict[str, dict[str, torch.Tensor]]], step: int
) -> StepOutcome:
    """Step number ``step`` (counted from 1) on this process's collated micro-batches
    ``micro``: every objective's ``step_begins``, then the step's optimizer updates
    (``update_groups``: one on the weighted sum of every objective's loss, or one per
    objective with ``step_per_objective``), each made by ``optimizer_update``. The only
    place optimizer steps happen.

    A non-finite update is not made and ends the step: the outcome's ``problem`` says why and
    the caller decides (the training loop stops with its checkpoint advice)."""
    accelerator = ts.accelerator
    model = accelerator.unwrap_model(ts.module).model
    for objective in ts.objectives.values():
        objective.step_begins(model, step)
    groups = update_groups(ts)
    updates = []
    for names in groups:
        part = [{name: batches[name] for name in names} for batches in micro]
        updates.append(optimizer_update(ts, part, names, step))
        if not updates[-1].finite:
            break
    trained = {name for names in groups for name in names}
    skipped = tuple(name for name in ts.objectives if name not in trained)
    return combine_updates(updates, len(micro), skipped, accelerator.device)


def combine_updates(
    updates: list[StepOutcome], n_micro: int, skipped: tuple[str, ...], device: torch.device
) -> StepOutcome:
    """One step's outcome from its updates': the losses and tokens summed, the largest
    gradient norm, each micro-batch's results of every update, the last update's problem
    (the step stops at the first), and the objectives ``skipped``. A single update is its
    own outcome."""
    if len(updates) == 1 and not skipped:
        return updates[0]
    zero = torch.zeros((), device=device)
    return StepOutcome(
        loss=torch.stack([zero, *(u.loss for u in updates)]).sum(),
        grad_norm=torch.stack([zero, *(u.grad_norm.float() for u in updates)]).max(),
        results=[{k: v for u in updates for k, v in u.results[m].items()} for m in range(n_micro)],
        tokens=sum(u.tokens for u in updates),
        problem=updates[-1].problem if updates else "",
        skipped=skipped,
    )


def optimizer_update(
    ts: TrainState, micro: list[dict[str, dict[str, torch.Tensor]]], names: list[str], step: int
) -> StepOutcome:
    """One optimizer update on the objectives ``names`` of this process's micro-batches
    ``micro`` in step ``step``: forward and backward (``accumulate_gradients``), the gradient
    norm (clipped to ``max_grad_norm``), a check gathered over processes that the loss and
    gradient norm are finite, then the AdamW and schedule steps.

    With fp16 the gradient scaler skips overflowing steps itself, so only the loss is checked
    there. A non-finite update is not made: the outcome's ``problem`` says why."""
    accelerator, module = ts.accelerator, ts.module
    objectives = {name: ts.objectives[name] for name in names}
    weights = {name: ts.weights[name] for name in names}
    tokens = sum(int(b["attention_mask"].sum()) for batches in micro for b in batches.values())
    step_loss, results = accumulate_gradients(
        accelerator, module, micro, objectives, weights, ts.mix
    )
    grad_norm = _grad_norm(accelerator, module, ts.max_grad_norm)
    check_norm = accelerator.scaler is None
    checks = torch.stack(
        [step_loss.float(), grad_norm.float() if check_norm else step_loss.float()]
    )
    checks = accelerator.gather(checks[None].to(accelerator.device))  # [processes, 2]
    outcome = StepOutcome(step_loss, grad_norm, results, tokens)
    if not bool(torch.isfinite(checks).all()):
        loss, norm = (float(x) for x in checks[~torch.isfinite(checks).all(1)][0])
        which = "" if len(names) == len(ts.objectives) else f" of {names[0]}"
        outcome.problem = f"loss{which} became {loss} at step {step}"
        if check_norm:
            outcome.problem += f" (gradient norm {norm})"
        return outcome
    ts.optimizer.step()
    if ts.scheduler is not None:
        ts.scheduler.step()
    ts.optimizer.zero_grad(set_to_none=True)
    return outcome


def evaluate(
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
    forward passes (short shards get a dummy batch that predicts nothing)."""
    was_training = module.training
    module.eval()
    inner: ObjectiveSet = accelerator.unwrap_model(module)
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
                    loss, ntok, _ = module({name: _to(batch, accelerator.device)}, heldout=True)[
                        name
                    ]
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


def _precision(requested: str) -> str:
    """accelerate's mixed_precision for ``train.precision``: auto → bf16 on GPUs that
    support it, fp16 on other GPUs, none on CPU."""
    if requested != "auto":
        return requested
    if not torch.cuda.is_available():
        return "no"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def build_optimizer(module: nn.Module, cfg: RunConfig) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases and normalisation weights."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        plain = param.ndim < 2 or "norm" in name.lower()
        (no_decay if plain else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": cfg.train.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=cfg.train.lr, betas=tuple(cfg.train.betas), eps=cfg.train.adam_eps
    )


def build_schedule(
    optimizer: torch.optim.Optimizer, cfg: RunConfig
) -> torch.optim.lr_scheduler.LambdaLR:
    """``train.warmup_steps`` of linear warm-up, then ``train.schedule``: linear decay to zero
    at ``train.steps``, or inverse square root (lr · sqrt(warmup / step); Vaswani et al.
    2017, XLM's ``adam_inverse_sqrt``). The schedule steps with every optimizer update, as
    XLM's does: with ``train.step_per_objective`` one per objective in each step, so the
    linear decay ends after ``train.steps`` × objectives updates."""
    tc = cfg.train
    if tc.schedule == "inverse_sqrt":
        return get_inverse_sqrt_schedule(optimizer, tc.warmup_steps)
    updates = tc.steps * (len(cfg.objectives) if tc.step_per_objective else 1)
    return get_linear_schedule_with_warmup(optimizer, tc.warmup_steps, updates)


def _all_finite(module: nn.Module, optimizer: torch.optim.Optimizer) -> bool:
    """Whether every parameter and optimizer-state tensor is finite (checked before saving)."""
    tensors = list(module.parameters())
    for state in optimizer.state.values():
        tensors += [v for v in state.values() if torch.is_tensor(v) and v.is_floating_point()]
    return all(bool(torch.isfinite(t).all()) for t in tensors)


def save_checkpoint(
    accelerator: Accelerator,
    module: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    run_dir: Path,
    step: int,
    *,
    position: dict[str, dict[str, int]],
    log_state: dict,
    config: dict,
    keep: int,
    train_seconds: float = 0.0,
) -> Path:
    """Write ``checkpoints/step-N`` atomically (see ``crossalign.checkpoint``) with the data
    ``position`` after step N, the log sums since the last log line, the wall-clock seconds
    trained so far and the run's ``config``;
    every process takes part (sharded optimizers save their own parts).

    A failed write (disk full, permissions) removes the partial checkpoint and raises one line
    naming the file; the previous checkpoints are untouched.
    """
    final = run_dir / "checkpoints" / checkpoint_name(step)
    tmp = final.with_name(f".{final.name}.tmp")
    main = accelerator.is_main_process

    def start() -> None:
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)

    def model_files() -> None:
        state_dict = accelerator.get_state_dict(module)  # every process (FSDP gathers here)
        if main:
            inner: ObjectiveSet = accelerator.unwrap_model(module)
            prefix = "model."
            model_state = {
                k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)
            }
            inner.model.save_pretrained(tmp, state_dict=model_state)
            tokenizer.save_pretrained(tmp)

    def finish() -> None:
        if main:
            state = {"step": step, "data": position, "log": log_state}
            state["train_seconds"] = train_seconds
            (tmp / STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
            (tmp / CONFIG).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
            write_manifest(tmp)
            (tmp / MARKER).write_text("", encoding="utf-8")
            replace_dir(tmp, final)
            prune_checkpoints(run_dir, keep)

    parts = [
        (tmp.name, start),
        (
            "trainer/ (weights, optimizer, scheduler and RNG states)",
            lambda: accelerator.save_state(str(tmp / "trainer")),
        ),
        ("model.safetensors and the tokenizer files", model_files),
        (f"{STATE}, {CONFIG}, {MANIFEST}, {MARKER} and the rename into place", finish),
    ]
    for writing, write in parts:
        failure = None
        try:
            write()
        except Exception as e:
            name = getattr(e, "filename", None)
            if name and Path(name).is_relative_to(tmp):
                writing = str(Path(name).relative_to(tmp))
            why = getattr(e, "strerror", None) or str(e).splitlines()[0] or type(e).__name__
            failure = f"writing {writing} failed ({why})"
        # every process learns of a failure on any (and waits for all to finish this part)
        failures = gather_object([failure]) if accelerator.num_processes > 1 else [failure]
        failure = next((f for f in failures if f), None)
        if failure:
            if main:
                shutil.rmtree(tmp, ignore_errors=True)
            good = [p.name for p in good_checkpoints(run_dir) if p != final]
            intact = (
                f"the last good checkpoint {good[0]} is intact"
                if good
                else "no earlier checkpoint exists"
            )
            raise CrossalignError(
                f"could not write checkpoint {final}: {failure}; {intact}; free space (or fix "
                "permissions) and continue with --resume"
            )
    return final


def _batch_sizes(cfg: RunConfig, world: int) -> tuple[int, dict[str, int], dict[str, int]]:
    """(held-out micro-batch size, each objective's global batch, each objective's
    micro-batch); every global batch splits over ``world`` processes × ``grad_accum``."""
    tc = cfg.train
    slices = world * tc.grad_accum
    own = {f"objective {oc.name}: batch_size": oc.batch_size for oc in cfg.objectives}
    for key, size in {"train.batch_size": tc.batch_size, **own}.items():
        if size and size % slices:
            raise CrossalignError(
                f"{key}={size} must be divisible by processes ({world}) × "
                f"train.grad_accum ({tc.grad_accum})"
            )
    batch_sizes = {oc.name: oc.batch_size or tc.batch_size for oc in cfg.objectives}
    per_objective = {name: size // slices for name, size in batch_sizes.items()}
    return tc.batch_size // slices, batch_sizes, per_objective


def check_step_per_objective(
    cfg: RunConfig, objectives: dict[str, Objective], processes: int
) -> None:
    """Refuse ``train.step_per_objective`` on several processes when an objective has
    parameters of its own (DWA's pointer network): an update whose backward leaves them out
    makes DDP's gradient reduction fail on the next forward."""
    if not (cfg.train.step_per_objective and processes > 1):
        return
    for name, objective in objectives.items():
        if next(objective.parameters(), None) is not None:
            raise CrossalignError(
                f"train.step_per_objective on {processes} processes: objective '{name}' has "
                "parameters of its own, which the other objectives' updates leave without a "
                "gradient; train on one process or set train.step_per_objective: false"
            )


def _start_run(
    accelerator: Accelerator, cfg: RunConfig, resume: str | None, overwrite: bool
) -> RunStart:
    """``open_run`` on the main process (lock, empty or resumable ``run_dir``); its decision,
    or its error, reaches every process."""
    start, shared = None, [None]  # to the other processes: the error, or (checkpoint, changes)
    if accelerator.is_main_process:
        try:
            config = run_config_dict(cfg)
            start = open_run(
                Path(cfg.run_dir), resume, overwrite, config, cfg.train.steps, normalise_saved
            )
            shared = [(start.resume_from, start.changed)]
        except CrossalignError as e:
            shared = [str(e)]
        except Exception as e:  # also to the other processes, which would wait otherwise
            if accelerator.num_processes == 1:
                raise
            shared = [f"{cfg.run_dir}: {type(e).__name__}: {e}"]
    if accelerator.num_processes > 1:
        broadcast_object_list(shared)
    if isinstance(shared[0], str):
        raise CrossalignError(shared[0])
    return start or RunStart(*shared[0])


SCHEDULE_KEYS = ("train.lr", "train.steps", "train.warmup_steps")
OPTIMIZER_KEYS = ("train.betas", "train.adam_eps", "train.weight_decay")


def _apply_changed_settings(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LambdaLR,
    cfg: RunConfig,
    changed: list[str],
) -> None:
    """After a checkpoint's optimizer and scheduler are loaded (they carry the old values): put
    the config's peak lr, schedule and AdamW settings in place from the resumed step on. Left
    alone when none changed, so a plain resume stays bit-identical."""
    keys = {c.split(" ", 1)[0] for c in changed}
    tc = cfg.train
    if keys & set(OPTIMIZER_KEYS):
        for i, group in enumerate(optimizer.param_groups):
            group["betas"], group["eps"] = tuple(tc.betas), tc.adam_eps
            group["weight_decay"] = tc.weight_decay if i == 0 else 0.0
    if keys & set(SCHEDULE_KEYS):
        scheduler.base_lrs = [tc.lr for _ in optimizer.param_groups]
        lrs = [tc.lr * f(scheduler.last_epoch) for f in scheduler.lr_lambdas]
        for group, lr in zip(optimizer.param_groups, lrs):
            group["initial_lr"], group["lr"] = tc.lr, lr
        scheduler._last_lr = lrs  # get_last_lr() reads it; torch has no public setter


def _grad_norm(accelerator: Accelerator, module: nn.Module, max_norm: float) -> torch.Tensor:
    """The global gradient norm (fp16 gradients unscaled first), the gradient clipped to
    ``max_norm`` when that is > 0. accelerate computes it (over the shards under FSDP); with
    no clipping the gradient is multiplied by exactly 1, so the step is unchanged."""
    norm = accelerator.clip_grad_norm_(module.parameters(), max_norm if max_norm > 0 else math.inf)
    if norm is not None:
        return norm
    # DeepSpeed without an engine gives no norm: this process's gradients
    return torch.nn.utils.get_total_norm(
        [p.grad for p in module.parameters() if p.grad is not None]
    )


def _out_of_memory(
    error: Exception, cfg: RunConfig, per_objective: dict[str, int], step: int
) -> Exception:
    """A one-line error for a step that did not fit in memory (other errors unchanged)."""
    text = str(error)
    if not isinstance(error, torch.OutOfMemoryError) and "can't allocate memory" not in text:
        return error
    sizes = ", ".join(f"{n} {b}" for n, b in per_objective.items())
    return CrossalignError(
        f"out of memory at step {step} with micro-batches of {sizes} sequences of up to "
        f"data.max_length={cfg.data.max_length} tokens: lower data.max_length or "
        "train.batch_size, or raise train.grad_accum (same global batch, smaller "
        "micro-batches)"
    )


def _divergence(run_dir: Path, step: int, what: str, main: bool) -> CrossalignError:
    """The error for a non-finite loss, gradient or weights computed from the weights after
    ``step`` updates: the checkpoint holding those weights (and any later one) is moved to
    ``checkpoints/diverged/`` so that a plain ``--resume`` takes the last good one."""
    moved = ""
    if main:
        bad = [p for p in list_checkpoints(run_dir) if checkpoint_step(p) >= step]
        folder = move_aside(bad, run_dir, "diverged")
        if folder is not None:
            names = ", ".join(p.name for p in bad)
            moved = f"{names} (its weights gave it) moved to {folder}; "
    good = good_checkpoints(run_dir)
    if not good:
        return CrossalignError(
            f"{what}; stopped before the update. {moved}no good checkpoint is left: start "
            "again (--overwrite) with a lower train.lr or more train.warmup_steps"
        )
    return CrossalignError(
        f"{what}; stopped before the update. {moved}the last good checkpoint is {good[0]}: "
        "continue from it with a lower train.lr or more train.warmup_steps "
        "(crossalign train ... train.lr=... --resume)"
    )


def train(cfg: RunConfig, resume: str | None = None, overwrite: bool = False) -> dict[str, float]:
    """Run pre-training as configured; ``resume`` is ``last`` or a checkpoint directory.

    A new run needs an empty (or absent) ``run_dir``, unless ``overwrite`` (which empties
    it); one run at a time holds ``run_dir``. Returns the final held-out metrics. Writes
    ``config.yaml``, ``metrics.jsonl``, ``checkpoints/`` and the final ``model/`` (with its
    model card) under ``cfg.run_dir``; ``train.log_with`` trackers get every log record too.
    """
    check_trackers_installed(cfg.train.log_with)
    # With no GPU, train on the CPU (gloo) also when launched as several processes.
    accelerator = Accelerator(
        mixed_precision=_precision(cfg.train.precision),
        cpu=not torch.cuda.is_available(),
        **_tracking_options(cfg),
    )
    sizes = _batch_sizes(cfg, accelerator.num_processes)
    start = _start_run(accelerator, cfg, resume, overwrite)
    try:
        held = TrainingRun.open(accelerator, cfg, start, *sizes).run()
    except OSError as e:  # metrics.jsonl, config.yaml or the final model/ (a full disk)
        good = good_checkpoints(cfg.run_dir)
        last = f"the last good checkpoint is {good[0]}" if good else "no checkpoint was written"
        raise CrossalignError(
            f"{e.filename or cfg.run_dir}: {e.strerror or e}; {last}; fix it and continue "
            "with --resume"
        ) from None
    finally:
        if start.lock is not None:
            start.lock.release()
    if cfg.train.log_with:
        accelerator.end_training()  # closes the trackers (and the process group)
    return held


def _tracking_options(cfg: RunConfig) -> dict:
    """The ``Accelerator`` options for ``train.log_with``: the trackers and their directory
    (``train.tracking_dir``, default ``RUN_DIR/tracking``); none without trackers."""
    if not cfg.train.log_with:
        return {}
    where = cfg.train.tracking_dir or str(Path(cfg.run_dir) / "tracking")
    return {"log_with": list(cfg.train.log_with), "project_dir": where}


def _samplers(
    setup: Setup, cfg: RunConfig
) -> tuple[dict[str, dict[str, StreamingText]], dict[str, SourceSampler]]:
    """Per objective: its streamed sources (read in order, not sampled) and the sampler of
    its examples (seeded by ``train.seed`` and the objective's position in the config)."""
    examples = setup.data.by_kind()
    streams = {
        name: {k: v for k, v in examples[obj.data].items() if isinstance(v, StreamingText)}
        for name, obj in setup.objectives.items()
    }
    samplers = {
        name: SourceSampler(
            {k: len(v) for k, v in examples[obj.data].items()},
            cfg.data.alpha,
            cfg.train.seed,
            i,
            sequential=frozenset(streams[name]),
        )
        for i, (name, obj) in enumerate(setup.objectives.items())
    }
    return streams, samplers


@dataclass
class TrainingRun:
    """A training run in its ``run_dir`` (taken by ``_start_run``). ``open`` builds it (and
    loads the checkpoint it resumes from); ``run`` draws each step's batches and calls
    ``run_step``, ``maybe_log``, ``maybe_eval`` and ``maybe_save`` in turn, then ``finish``.
    The fields after ``stats`` change as the run goes."""

    accelerator: Accelerator
    cfg: RunConfig
    config: dict
    """``cfg`` as plain data (``config.yaml`` and every checkpoint's copy)."""
    setup: Setup
    trainer: TrainState
    streams: dict[str, dict[str, StreamingText]]
    samplers: dict[str, SourceSampler]
    valid_batch_size: int
    """Held-out micro-batch size (``evaluate``)."""
    batch_sizes: dict[str, int]
    """Per objective, its global batch."""
    micro_sizes: dict[str, int]
    """Per objective, its micro-batch on one process."""
    stats: LogStats
    step: int = 0
    """Optimizer steps done."""
    position: dict[str, dict[str, int]] = field(default_factory=dict)
    """The data position after ``step`` (per objective, examples drawn per source)."""
    last_saved: Path | None = None
    stop: StopRequest = field(default_factory=StopRequest)
    tokens_seen: int = 0
    """This process's tokens since the last training line of the log."""
    last_time: float = 0.0
    """When ``tokens_seen`` started counting (evaluation and saving time excluded)."""
    started: float = 0.0
    """When this session's ``run`` started (``time.perf_counter``)."""
    seconds_before: float = 0.0
    """Wall-clock seconds trained by the sessions before this one (from the checkpoint)."""
    bar: tqdm | None = None
    log_file: TextIO | None = None
    """``metrics.jsonl`` opened for appending (main process only)."""
    probes: Probes = field(default_factory=Probes)
    """``train.probe_aer`` / ``train.probe_bli``, measured with every held-out evaluation."""

    @classmethod
    def open(
        cls,
        accelerator: Accelerator,
        cfg: RunConfig,
        start: RunStart,
        valid_batch_size: int,
        batch_sizes: dict[str, int],
        micro_sizes: dict[str, int],
    ) -> TrainingRun:
        """Seed, build data, tokenizer, model and objectives (``build_setup``), AdamW with
        warm-up and linear decay, prepared by ``accelerator``, and the samplers; load the
        checkpoint ``start`` resumes from; write ``config.yaml``."""
        tc = cfg.train
        set_seed(tc.seed)
        setup = build_setup(cfg, start.resume_from, accelerator)
        check_step_per_objective(cfg, setup.objectives, accelerator.num_processes)
        module = ObjectiveSet(setup.model, setup.objectives)
        optimizer = build_optimizer(module, cfg)
        scheduler = build_schedule(optimizer, cfg)
        module, optimizer = accelerator.prepare(module, optimizer)
        accelerator.register_for_checkpointing(scheduler)
        trainer = TrainState.of_run(accelerator, module, optimizer, scheduler, setup, cfg)
        streams, samplers = _samplers(setup, cfg)
        stats = LogStats(setup.objectives, setup.weights, tc.objective_mix)
        position = {n: s.state_dict() for n, s in samplers.items()}
        sizes = (valid_batch_size, batch_sizes, micro_sizes)
        config = run_config_dict(cfg)
        run = cls(
            accelerator, cfg, config, setup, trainer, streams, samplers, *sizes, stats, 0, position
        )
        run.probes = Probes.of_run(cfg, encoder_of(setup.model))
        if start.resume_from is not None:
            run.resume(start.resume_from, start.changed)
        if accelerator.is_main_process:
            text = yaml.safe_dump(run.config, sort_keys=False)
            write_text_atomic(run.run_dir / CONFIG, text)
        run.start_tracking()
        return run

    @property
    def run_dir(self) -> Path:
        """``cfg.run_dir``."""
        return Path(self.cfg.run_dir)

    def start_tracking(self) -> None:
        """Start the ``train.log_with`` trackers (main process), named after ``run_dir``, with
        the config flattened to ``section.key`` hyper-parameters."""
        if self.cfg.train.log_with:
            name = self.run_dir.resolve().name
            self.accelerator.init_trackers(name, config=flat_config(self.config))

    def resume(self, checkpoint: Path, changed: list[str]) -> None:
        """Continue from ``checkpoint``: weights, optimizer, schedule and RNG states, then
        the ``changed`` settings (``_apply_changed_settings``), the step, the data position
        and the log sums since the last training line."""
        try:
            self.accelerator.load_state(str(checkpoint / "trainer"))
        except Exception as e:  # a checkpoint without a manifest (older) that does not load
            raise CrossalignError(
                f"cannot load the trainer state of {checkpoint}: {str(e).splitlines()[0]}; "
                "resume from an earlier checkpoint (--resume CHECKPOINT)"
            ) from None
        _apply_changed_settings(self.trainer.optimizer, self.trainer.scheduler, self.cfg, changed)
        state = read_state(checkpoint)
        self.step = int(state["step"])
        self.seconds_before = float(state.get("train_seconds", 0.0))
        self.position = state["data"]
        self.stats.load_state_dict(state.get("log", {}), self.accelerator.device)
        for name, sampler in self.samplers.items():
            sampler.load_state_dict(self.position.get(name, {}))
        self.last_saved = checkpoint
        if self.accelerator.is_main_process:
            tqdm.write(f"resumed from {checkpoint} at step {self.step}")
            if changed:
                tqdm.write("changed settings applied from here: " + "; ".join(changed))

    def run(self) -> dict[str, float]:
        """Train from ``step`` to ``train.steps`` (first Ctrl-C: checkpoint and stop), then
        ``finish``; prints the summary and returns the final held-out metrics."""
        main, tc = self.accelerator.is_main_process, self.cfg.train
        previous_handler = signal.signal(signal.SIGINT, self.stop)
        self.tokens_seen, self.last_time = 0, time.perf_counter()
        self.started = self.last_time
        self.bar = tqdm(
            total=tc.steps, initial=self.step, disable=not main, desc="train", unit="step"
        )
        self.trainer.module.train()
        try:
            loader, objectives = self._loader(), self.setup.objectives
            metrics = self.run_dir / METRICS
            with open(metrics, "a", encoding="utf-8") if main else contextlib.nullcontext() as log:
                self.log_file = log
                for item in loader:
                    self.run_step([finish_collation(objectives, c) for c in item.micro])
                    self.position = item.position
                    self.maybe_log()
                    self.maybe_eval()
                    self.maybe_save()
                held = self.finish()
        finally:
            self.bar.close()  # an error message then starts on its own line
            signal.signal(signal.SIGINT, previous_handler)
        if main:
            _print_summary(self.run_dir, held, self.cfg)
        self.accelerator.wait_for_everyone()
        return held

    def _loader(self) -> DataLoader:
        """The draws of steps ``step + 1`` ... ``train.steps`` from the data ``position``,
        this process's slices collated (``step_loader``)."""
        tc = self.cfg.train
        rank = self.accelerator.process_index
        examples = self.setup.data.by_kind()
        collator = StepCollator(
            self.setup.objectives, examples, tc.seed, rank, tc.grad_accum, self.micro_sizes
        )
        plan = StepPlan(
            self.samplers, self.step, tc.steps, self.batch_sizes, self.streams, self.position
        )
        return step_loader(collator, plan, self.cfg.data.num_workers)

    def run_step(self, micro: list[dict[str, dict[str, torch.Tensor]]]) -> None:
        """Step ``step + 1`` on this process's collated micro-batches (``train_step``) with the
        objectives' weights after ``step`` steps, and its log sums; one-line errors for a step
        that does not fit in memory and for a non-finite one (which moves the checkpoints its
        weights gave aside)."""
        weights = self.setup.weights_at(self.step)
        self.trainer.weights = self.stats.weights = weights
        try:
            outcome = train_step(self.trainer, micro, self.step + 1)
        except (torch.OutOfMemoryError, RuntimeError) as e:
            raise _out_of_memory(e, self.cfg, self.micro_sizes, self.step + 1) from None
        if not outcome.finite:
            main = self.accelerator.is_main_process
            raise _divergence(self.run_dir, self.step, outcome.problem, main)
        self.tokens_seen += outcome.tokens
        for micro_results in outcome.results:
            self.stats.add(micro_results, 1.0 / self.cfg.train.grad_accum)
        self.stats.skip(outcome.skipped)
        self.step += 1
        self.stats.steps += 1
        self.bar.update(1)

    def train_seconds(self) -> float:
        """Wall-clock seconds this run has trained (logging, held-out evaluation and saving
        included), over every session that resumed it."""
        return self.seconds_before + time.perf_counter() - self.started

    def _emit(self, record: dict) -> None:
        """Append ``record`` to ``metrics.jsonl`` and send it to the trackers (main process)."""
        if self.log_file is not None:
            self.log_file.write(json.dumps(record) + "\n")
            self.log_file.flush()
            self._track(record)

    def _track(self, record: dict) -> None:
        """Log a ``metrics.jsonl`` record to the ``train.log_with`` trackers: the same keys,
        at its ``step``."""
        if self.cfg.train.log_with:
            values = {k: v for k, v in record.items() if k != "step"}
            self.accelerator.log(values, step=record["step"])

    def maybe_log(self) -> None:
        """Every ``train.log_every`` steps and after the last: a training line (step, lr,
        processes, each scheduled objective's ``weight/<objective>`` in the last step, the
        ``LogStats`` means since the last line, tokens/s over all processes)."""
        tc, step = self.cfg.train, self.step
        if step % tc.log_every and step != tc.steps:
            return
        accelerator = self.accelerator
        now = time.perf_counter()
        lr = self.trainer.scheduler.get_last_lr()[0]
        record = {"step": step, "lr": lr, "processes": accelerator.num_processes}
        for name, schedule in self.setup.schedules.items():
            if not schedule.is_constant:
                record[f"weight/{name}"] = self.trainer.weights[name]
        record.update(self.stats.flush(accelerator))
        seen = torch.tensor(float(self.tokens_seen), device=accelerator.device)
        tokens = accelerator.reduce(seen, "sum").item()
        record["tokens_per_s"] = tokens / max(now - self.last_time, 1e-9)
        record["train_seconds"] = self.train_seconds()
        self.tokens_seen, self.last_time = 0, now
        self.bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:.0f}")
        self._emit(record)

    def _evaluate(self) -> dict[str, float]:
        """Held-out metrics now (``evaluate``) and the main process's probes
        (``_probe``), appended to the log when there are any."""
        held = evaluate(
            self.accelerator,
            self.trainer.module,
            self.setup.data,
            self.valid_batch_size,
            self.cfg.train.seed,
        )
        held.update(self._probe())
        if held:
            self._emit({"step": self.step, **held})
        return held

    def _probe(self) -> dict[str, float]:
        """The ``train.probe_*`` metrics of the model now (main process; else none)."""
        if not (self.probes and self.accelerator.is_main_process):
            return {}
        model = self.accelerator.unwrap_model(self.trainer.module).model
        return self.probes.measure(model, self.setup.tokenizer)

    def maybe_eval(self) -> None:
        """Every ``train.eval_every`` steps before the last: held-out metrics, logged and
        shown."""
        tc, step = self.cfg.train, self.step
        if not (tc.eval_every and step % tc.eval_every == 0 and step < tc.steps):
            return
        held = self._evaluate()
        if held:
            self.bar.write(f"step {step}: " + _describe(held))
        self.last_time = time.perf_counter()

    def maybe_save(self) -> None:
        """Every ``train.save_every`` steps a checkpoint; after a Ctrl-C one too, then stop
        with the command that continues."""
        tc, step = self.cfg.train, self.step
        if (tc.save_every and step % tc.save_every == 0) or self.stop.requested:
            self.save()
            self.last_time = time.perf_counter()
        if self.stop.requested:
            self.bar.close()
            raise CrossalignError(
                f"interrupted at step {step}; checkpoint saved to {self.last_saved}; "
                f"continue with: crossalign train ... --resume"
            )

    def save(self) -> None:
        """Checkpoint ``step`` (``save_checkpoint``) once every process holds finite weights
        and optimizer states; non-finite ones stop the run as a divergence."""
        accelerator, module = self.accelerator, self.trainer.module
        main, step = accelerator.is_main_process, self.step
        finite = float(_all_finite(module, self.trainer.optimizer))
        finite = torch.tensor(finite, device=accelerator.device)
        # sharded states differ by process
        if accelerator.reduce(finite, "sum").item() < accelerator.num_processes:
            what = f"weights became non-finite at step {step}"
            raise _divergence(self.run_dir, step + 1, what, main)
        self.last_saved = save_checkpoint(
            accelerator,
            module,
            self.setup.tokenizer,
            self.run_dir,
            step,
            position=self.position,
            log_state=self.stats.state_dict(accelerator),
            config=self.config,
            keep=self.cfg.train.keep_checkpoints,
            train_seconds=self.train_seconds(),
        )

    def finish(self) -> dict[str, float]:
        """After the last step: its checkpoint (unless just saved), the final held-out metrics
        (logged and returned) and the exported ``model/``."""
        self.bar.close()
        if self.last_saved is None or self.last_saved.name != checkpoint_name(self.step):
            self.save()
        held = self._evaluate()
        if self.accelerator.is_main_process:
            module, tokenizer = self.trainer.module, self.setup.tokenizer
            card = self.model_card(held)
            _export_model(self.accelerator, module, tokenizer, card, self.run_dir / "model")
        return held

    def model_card(self, held: dict[str, float]) -> str:
        """The ``README.md`` of the exported model: this run's config, languages, steps and
        final held-out metrics ``held`` (``training_card``)."""
        model = self.accelerator.unwrap_model(self.trainer.module).model
        languages = self.setup.data.languages()
        return training_card(
            self.cfg, languages, self.step, held, model_languages(model), is_seq2seq(model)
        )


def _export_model(
    accelerator: Accelerator,
    module: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    card: str,
    out: Path,
) -> None:
    """The final model, tokenizer and model card (``README.md``) as one ``save_pretrained``
    directory (atomic)."""
    inner: ObjectiveSet = accelerator.unwrap_model(module)
    with atomic_dir(out) as tmp:
        inner.model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_card(tmp, card)


def _describe(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def _print_summary(run_dir: Path, held: dict[str, float], cfg: RunConfig) -> None:
    if "valid/mlm_ppl" in held:
        print(
            f"held-out MLM perplexity: {held['valid/mlm_ppl']:.2f} "
            f"(loss {held['valid/mlm_loss']:.4f})"
        )
    if "valid/tlm_ppl" in held:
        print(
            f"held-out TLM perplexity: {held['valid/tlm_ppl']:.2f} "
            f"(loss {held['valid/tlm_loss']:.4f})"
        )
    for name in ("mass", "mt"):
        if f"valid/{name}_ppl" in held:
            print(
                f"held-out {name.upper()} perplexity: {held[f'valid/{name}_ppl']:.2f} "
                f"(loss {held[f'valid/{name}_loss']:.4f})"
            )
    loader = "EncoderDecoderModel" if run_is_seq2seq(cfg) else "AutoModelForMaskedLM"
    print(f"model: {run_dir / 'model'} ({loader}.from_pretrained loads it)")
    print(f"metrics: {run_dir / METRICS}; config: {run_dir / CONFIG}")
    print(
        "next: continue training with 'crossalign train --config ... "
        f"run_dir={run_dir}-more model.path={run_dir / 'model'}', or resume this run with "
        f"more steps: 'crossalign train --config ... run_dir={run_dir} "
        f"train.steps={cfg.train.steps * 2} --resume'"
    )
