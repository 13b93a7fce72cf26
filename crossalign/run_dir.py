"""The rules a run directory keeps: one run at a time, a finished run is never replaced
silently, a resume continues the same run, and nothing logged or saved is lost.

``open_run`` applies them before training starts (main process only): it takes the lock,
refuses a non-empty ``run_dir`` without ``--resume``/``--overwrite``, picks and verifies the
checkpoint to resume from, compares the settings with those the run was started with, starts
a new branch when resuming from an older checkpoint, and cuts ``metrics.jsonl`` back to the
checkpoint's step.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crossalign.checkpoint import (
    CONFIG,
    checkpoint_step,
    find_resume_checkpoint,
    list_checkpoints,
    move_aside,
    read_state,
)
from crossalign.errors import CrossalignError
from crossalign.fileio import read_jsonl_lines, write_lines_atomic

LOCK = ".lock"
METRICS = "metrics.jsonl"

# Settings that may change on --resume (applied from the resumed step on); every other key
# makes it a different run. ``train.steps`` may not fall below the checkpoint's step.
CHANGEABLE = frozenset(
    {
        "train.steps",
        "train.grad_accum",
        "train.lr",
        "train.weight_decay",
        "train.betas",
        "train.adam_eps",
        "train.warmup_steps",
        "train.max_grad_norm",
        "train.compile",
        "train.compile_backend",
        "train.log_every",
        "train.eval_every",
        "train.save_every",
        "train.keep_checkpoints",
        "train.log_with",
        "train.tracking_dir",
        "data.cache_dir",
        "data.num_proc",
        "data.num_workers",
    }
)
IGNORED = frozenset({"run_dir"})


class RunLock:
    """An exclusive OS lock on ``run_dir/.lock`` (POSIX ``lockf``): the kernel drops it when
    the process ends however it ends, so a crashed run never blocks its own resume, and it is
    not inherited by forked DataLoader workers. The file names the holder."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self.file = None

    def acquire(self) -> None:
        """Take the lock, or raise naming the process that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (held while training)
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            f.close()
            raise CrossalignError(
                f"{self.path.parent} is in use by another run ({holder}); wait for it to "
                "finish, or choose another run_dir"
            ) from None
        f.seek(0)
        f.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        f.write(f"pid {os.getpid()} on {socket.gethostname()} since {started}: ")
        f.write(" ".join(sys.argv) + "\n")
        f.flush()
        self.file = f

    def release(self) -> None:
        """Drop the lock (the file stays; an unlocked file blocks nobody)."""
        if self.file is not None:
            self.file.close()
            self.file = None


@dataclass
class RunStart:
    """What ``open_run`` decided: the checkpoint to resume from (None for a new run), the
    settings changed on resume, and the lock to release at the end."""

    resume_from: Path | None
    changed: list[str] = field(default_factory=list)
    lock: RunLock | None = None


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts and lists as ``{"a.b.0.c": leaf}``; a list of plain values (``betas``, a
    file pair) is one leaf."""
    if isinstance(data, dict) and data:
        items = data.items()
    elif isinstance(data, list) and any(isinstance(x, (dict, list)) for x in data):
        items = enumerate(data)
    else:
        return {prefix: data}
    out = {}
    for key, value in items:
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def setting_changes(saved: dict, new: dict) -> tuple[list[str], list[str]]:
    """``(refused, changed)``: keys whose value differs between the config a run was started
    with and the new one, as ``key old → new``. Keys the saved config lacks (written by an
    older version) are not compared."""
    old, now = flatten(saved), flatten(new)
    refused, changed = [], []
    for key in sorted(old.keys() | now.keys()):
        if key in IGNORED or old.get(key, "(absent)") == now.get(key, "(absent)"):
            continue
        if key not in old and key.count(".") == 1:
            continue  # a config field newer than the saved config
        text = f"{key} {old.get(key, '(absent)')} → {now.get(key, '(absent)')}"
        (changed if key in CHANGEABLE else refused).append(text)
    return refused, changed


def _compare_settings(
    config: dict,
    checkpoint: Path,
    run_dir: Path,
    normalise: Callable[[dict], dict] | None = None,
) -> list[str]:
    """The settings changed since the run started (the saved config through ``normalise``);
    refuses the ones that make it a different run, and ``train.steps`` below the checkpoint's
    step."""
    saved_path = checkpoint / CONFIG
    if not saved_path.is_file():
        saved_path = run_dir / CONFIG
    if not saved_path.is_file():
        return []
    saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
    if normalise is not None:
        saved = normalise(saved)
    refused, changed = setting_changes(saved, config)
    if refused:
        raise CrossalignError(
            f"--resume: {'; '.join(refused)} differ from the run's settings ({saved_path}), "
            "which makes it a different run; start it in a new run_dir (changeable on resume: "
            "train.steps, train.lr and the other train.* schedule and logging keys except "
            "seed, batch_size, objective_mix and precision)"
        )
    step = int(read_state(checkpoint)["step"])
    steps = config.get("train", {}).get("steps", step)
    if steps < step:
        raise CrossalignError(
            f"--resume: train.steps={steps} is below the checkpoint's step {step}; resume "
            f"with train.steps >= {step}, or from an earlier checkpoint (--resume CHECKPOINT)"
        )
    return changed


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of a run's ``metrics.jsonl`` in order (training lines carry ``loss``,
    held-out lines ``valid/...``); [] when there is none. A half-written last line is dropped."""
    return [record for _, record in read_jsonl_lines(Path(run_dir) / METRICS)]


def truncate_metrics(path: Path, step: int, finished: bool) -> list[str]:
    """Cut ``metrics.jsonl`` back to what the checkpoint after ``step`` had logged (the resumed
    run logs the rest again) and return the dropped lines. ``finished``: the run ends at
    ``step``, so its final held-out line is dropped too (the resumed run writes it again)."""

    def kept(record: dict) -> bool:
        if record["step"] != step:
            return record["step"] < step
        return not (finished and any(k.startswith("valid/") for k in record))

    keep, dropped = [], []
    for line, record in read_jsonl_lines(path):
        (keep if kept(record) else dropped).append(line)
    if path.is_file():
        write_lines_atomic(path, keep)
    return dropped


def open_run(
    run_dir: Path,
    resume: str | None,
    overwrite: bool,
    config: dict,
    steps: int,
    normalise: Callable[[dict], dict] | None = None,
) -> RunStart:
    """Take ``run_dir`` for this run (see the module docstring); ``config`` is the resolved
    config as plain data, ``steps`` its ``train.steps``; ``normalise`` brings a saved config to
    today's form before it is compared (``crossalign.objective_options.normalise_saved``).
    Raises CrossalignError with the fix when the run may not start."""
    lock = RunLock(run_dir)
    lock.acquire()
    try:
        if resume is None:
            _claim(run_dir, overwrite)
            return RunStart(None, lock=lock)
        resume_from = find_resume_checkpoint(run_dir, resume)
        changed = _compare_settings(config, resume_from, run_dir, normalise)
        step = int(read_state(resume_from)["step"])
        later = [
            p
            for p in list_checkpoints(run_dir)
            if checkpoint_step(p) > step and p.resolve() != resume_from.resolve()
        ]
        dropped = truncate_metrics(run_dir / METRICS, step, finished=step >= steps)
        folder = move_aside(later, run_dir, "abandoned")
        if folder is not None:
            write_lines_atomic(folder / METRICS, dropped)
            print(
                f"resuming from {resume_from.name} starts a new branch: the later checkpoints "
                f"and their {len(dropped)} metrics lines were moved to {folder}",
                file=sys.stderr,
            )
        return RunStart(resume_from, changed, lock)
    except BaseException:
        lock.release()
        raise


def _claim(run_dir: Path, overwrite: bool) -> None:
    """A new run needs an empty ``run_dir``; ``overwrite`` empties it."""
    present = sorted(p.name for p in run_dir.iterdir() if p.name != LOCK)
    if not present:
        return
    if not overwrite:
        what = "checkpoints" if "checkpoints" in present else "files"
        raise CrossalignError(
            f"{run_dir} already holds a run ({', '.join(present[:5])}"
            f"{', …' if len(present) > 5 else ''}); continue it with --resume"
            f"{'' if what == 'checkpoints' else ' (it has no checkpoint)'}, start again with "
            "--overwrite (deletes them), or set run_dir=... for a new run"
        )
    for name in present:
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
