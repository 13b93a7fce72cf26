"""One optimizer step (``train_step``): forward and backward over this process's
micro-batches weighted by predicted tokens (``accumulate_gradients``), the gradient norm and
its clipping, the finiteness check gathered over processes, then the AdamW and schedule
steps. The only place optimizer steps happen."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType
from torch import nn

from crossalign.config import RunConfig
from crossalign.objectives import Objective
from crossalign.training.setup import Setup


def _to(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


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
    defer_checks: bool = True
    """Leave the finiteness check on the device when the optimizer can skip a step itself
    (``skips_on_device``); False reads it on the host before every update, as the loop did
    before (a device sync per step; kept for ``bench/train_throughput.py`` and the tests)."""

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
    (attention-mask positions) of this process's micro-batches.

    ``checks`` [processes, 2] holds every process's step loss and gradient norm (the loss
    twice under fp16 loss scaling, whose scaler skips overflowing steps itself). A step whose
    checks are not all finite made no update. ``deferred``: the optimizer skipped it on the
    device (``found_inf``), without waiting for the device, so the caller reads ``ok`` later
    (``DivergenceWatch``); otherwise the step was checked on the host before the update.
    ``finite`` and ``problem`` read the checks (a device sync). With ``step_per_objective`` it
    sums the step's updates (``combine_updates``), and ``skipped`` names the objectives it did
    not train."""

    loss: torch.Tensor
    grad_norm: torch.Tensor
    results: list[dict]
    tokens: int
    checks: torch.Tensor | None = None
    step: int = 0
    what: str = ""
    """Which update, for the message: empty, or " of OBJECTIVE" with ``step_per_objective``."""
    checked_norm: bool = True
    deferred: bool = False
    skipped: tuple[str, ...] = ()

    @property
    def ok(self) -> torch.Tensor:
        """Whether every check is finite: a bool tensor on the device (no sync)."""
        if self.checks is None:
            return torch.ones((), dtype=torch.bool, device=self.loss.device)
        return torch.isfinite(self.checks).all()

    @property
    def problem(self) -> str:
        """Empty when the step was taken; else what became non-finite (reads the device)."""
        if self.checks is None or bool(self.ok):
            return ""
        row = first_bad_row(self.checks)
        return describe_problem(row, self.step, self.what, self.checked_norm)

    @property
    def finite(self) -> bool:
        """Whether the loss (and, without fp16 scaling, the gradient norm) was finite on every
        process, so that the update was made (reads the device)."""
        return not self.problem


def first_bad_row(checks: torch.Tensor) -> torch.Tensor:
    """The first process's (loss, norm) row [2] of ``checks`` [processes, 2] with a
    non-finite value (the first row when all are finite), found on the device."""
    bad = ~torch.isfinite(checks).all(1)
    return checks[bad.int().argmax()]


def describe_problem(row: torch.Tensor, step: int, what: str, checked_norm: bool) -> str:
    """The message for a non-finite step: "loss became nan at step 6 (gradient norm nan)"."""
    loss, norm = (float(x) for x in row)
    text = f"loss{what} became {loss} at step {step}"
    return text + (f" (gradient norm {norm})" if checked_norm else "")


class DivergenceWatch:
    """The first non-finite step of a run, kept on the device so that steps need not wait for
    it: ``record`` each deferred outcome, and read ``first`` at log, evaluation and save
    boundaries (one sync): (step, message) or None."""

    def __init__(self, device: torch.device) -> None:
        self.step = torch.zeros((), dtype=torch.long, device=device)
        self.row = torch.zeros(2, device=device)
        self.what, self.checked_norm = "", True

    def record(self, outcome: StepOutcome) -> None:
        """Remember ``outcome`` if it is the first non-finite step (device ops only)."""
        assert outcome.checks is not None
        new = (self.step == 0) & ~outcome.ok
        self.step = torch.where(new, outcome.step, self.step)
        self.row = torch.where(new, first_bad_row(outcome.checks).float(), self.row)
        self.what, self.checked_norm = outcome.what, outcome.checked_norm

    def first(self) -> tuple[int, str] | None:
        """(step, message) of the first non-finite step recorded, or None (reads the
        device)."""
        step = int(self.step)
        if not step:
            return None
        return step, describe_problem(self.row, step, self.what, self.checked_norm)


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` (or the one an accelerate wrapper holds) skips a step on the device
    given ``found_inf``: PyTorch's fused Adam/AdamW/SGD with every parameter group fused (a
    checkpoint saved by a non-fused optimizer restores ``fused: None`` into its groups)."""
    inner = getattr(optimizer, "optimizer", optimizer)
    if not getattr(inner, "_step_supports_amp_scaling", False):
        return False
    return all(group.get("fused") for group in getattr(inner, "param_groups", []))


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
        if not updates[-1].deferred and not updates[-1].finite:  # no sync when deferred
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
    last = updates[-1] if updates else None
    return StepOutcome(
        loss=torch.stack([zero, *(u.loss for u in updates)]).sum(),
        grad_norm=torch.stack([zero, *(u.grad_norm.float() for u in updates)]).max(),
        results=[{k: v for u in updates for k, v in u.results[m].items()} for m in range(n_micro)],
        tokens=sum(u.tokens for u in updates),
        checks=last.checks if last else None,
        step=last.step if last else 0,
        what=last.what if last else "",
        checked_norm=last.checked_norm if last else True,
        skipped=skipped,
    )


def optimizer_update(
    ts: TrainState, micro: list[dict[str, dict[str, torch.Tensor]]], names: list[str], step: int
) -> StepOutcome:
    """One optimizer update on the objectives ``names`` of this process's micro-batches
    ``micro`` in step ``step``: forward and backward (``accumulate_gradients``), the gradient
    norm (clipped to ``max_grad_norm``), a check gathered over processes that the loss and
    gradient norm are finite, then the AdamW and schedule steps.

    A non-finite update is not made. With a fused optimizer (``skips_on_device``) the check
    stays on the device: the kernel skips the update itself and the outcome is ``deferred``
    (the caller reads it at its next boundary). Otherwise, and with ``step_per_objective``
    (whose updates stop at the first non-finite one), the check is read here, before the
    update. With fp16 the gradient scaler skips overflowing steps itself, so only the loss is
    checked there."""
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
    which = "" if len(names) == len(ts.objectives) else f" of {names[0]}"
    outcome = StepOutcome(step_loss, grad_norm, results, tokens, checks, step, which, check_norm)
    # DeepSpeed steps its engine inside backward, before any check could skip the update
    deepspeed = accelerator.distributed_type == DistributedType.DEEPSPEED
    deferred = ts.defer_checks and check_norm and not ts.step_per_objective and not deepspeed
    if deferred and skips_on_device(ts.optimizer):
        # the fused kernel leaves weights, moments and step count as they were when
        # found_inf is 1: the step does not wait for the device
        inner = getattr(ts.optimizer, "optimizer", ts.optimizer)
        inner.found_inf = (~outcome.ok).float()
        try:
            ts.optimizer.step()
        finally:
            del inner.found_inf
        outcome.deferred = True
    elif not outcome.finite:
        return outcome
    else:
        ts.optimizer.step()
    if ts.scheduler is not None:
        ts.scheduler.step()
    ts.optimizer.zero_grad(set_to_none=True)
    return outcome


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
