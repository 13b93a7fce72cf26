"""What a run writes and how it starts again: the run directory taken or resumed
(``start_run``), checkpoints written atomically (``save_checkpoint``, layout in
``crossalign.checkpoint``), changed settings put in place on resume
(``apply_changed_settings``), diverged checkpoints moved aside (``divergence_error``) and the
final ``model/`` (``export_model``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather_object
from torch import nn
from transformers import PreTrainedTokenizerBase

from crossalign.checkpoint import (
    CONFIG,
    MANIFEST,
    MARKER,
    STATE,
    checkpoint_dir,
    checkpoint_step,
    good_checkpoints,
    list_checkpoints,
    move_aside,
    prune_checkpoints,
    write_manifest,
)
from crossalign.config import RunConfig
from crossalign.errors import CrossalignError
from crossalign.fileio import atomic_dir, replace_dir
from crossalign.models.card import write_card
from crossalign.objective_options import normalise_saved, run_config_dict
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.run_dir import RunStart, open_run


def all_finite(module: nn.Module, optimizer: torch.optim.Optimizer) -> bool:
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
    data_fingerprint: str = "",
) -> Path:
    """Write ``checkpoints/step-N`` atomically (see ``crossalign.checkpoint``) with the data
    ``position`` after step N, the log sums since the last log line, the wall-clock seconds
    trained so far, the training data's fingerprint and the run's ``config``;
    every process takes part (sharded optimizers save their own parts).

    A failed write (disk full, permissions) removes the partial checkpoint and raises one line
    naming the file; the previous checkpoints are untouched.
    """
    final = checkpoint_dir(run_dir, step)
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
            state["data_fingerprint"] = data_fingerprint
            state["precision"] = accelerator.mixed_precision  # what train.precision resolved to
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


def start_run(
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


def apply_changed_settings(
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


def divergence_error(
    run_dir: Path, step: int, what: str, main: bool, stopped: str = "stopped before the update"
) -> CrossalignError:
    """The error for a non-finite loss, gradient or weights computed from the weights after
    ``step`` updates: the checkpoint holding those weights (and any later one) is moved to
    ``checkpoints/diverged/`` so that a plain ``--resume`` takes the last good one.
    ``stopped`` says where the run stopped."""
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
            f"{what}; {stopped}. {moved}no good checkpoint is left: start "
            "again (--overwrite) with a lower train.lr or more train.warmup_steps"
        )
    return CrossalignError(
        f"{what}; {stopped}. {moved}the last good checkpoint is {good[0]}: "
        "continue from it with a lower train.lr or more train.warmup_steps "
        "(crossalign train ... train.lr=... --resume)"
    )


def export_model(
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
