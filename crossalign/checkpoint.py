"""Checkpoints: written atomically, found and validated on resume.

A checkpoint ``run_dir/checkpoints/step-00000100`` is a ``save_pretrained`` directory (model
and tokenizer, loadable by ``AutoModelForMaskedLM.from_pretrained``) plus ``trainer/`` (the
accelerate state: weights of every trained module, optimizer, scheduler, RNG states),
``trainer_state.json`` (step, data position) and a ``COMPLETE`` marker written last. It is
built in a temporary directory and renamed into place, so an interrupted save never replaces
the last good checkpoint.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError

MARKER = "COMPLETE"
STATE = "trainer_state.json"
log = logging.getLogger(__name__)


def checkpoint_name(step: int) -> str:
    """Directory name of the checkpoint after ``step`` optimizer steps."""
    return f"step-{step:08d}"


def checkpoint_problem(path: Path) -> str | None:
    """Why ``path`` is not a usable checkpoint, or None when it is."""
    if not path.is_dir():
        return "not a directory"
    if not (path / MARKER).is_file():
        return f"no {MARKER} marker (half-written: the save was interrupted)"
    for needed in (STATE, "config.json", "trainer"):
        if not (path / needed).exists():
            return f"{needed} is missing"
    try:
        state = json.loads((path / STATE).read_text(encoding="utf-8"))
        int(state["step"])
    except (ValueError, KeyError, TypeError):
        return f"{STATE} is unreadable"
    return None


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint directories of a run (good or not), newest step first."""
    root = Path(run_dir) / "checkpoints"
    return sorted(root.glob("step-*"), reverse=True) if root.is_dir() else []


def find_resume_checkpoint(run_dir: str | Path, which: str) -> Path:
    """The checkpoint to resume from: ``last`` → newest good one in ``run_dir`` (corrupt ones
    are reported and skipped), else the directory ``which`` itself, which must be good."""
    if which != "last":
        path = Path(which)
        problem = checkpoint_problem(path)
        if problem:
            raise CrossalignError(f"cannot resume from {path}: {problem}")
        return path
    for path in list_checkpoints(run_dir):
        problem = checkpoint_problem(path)
        if problem is None:
            return path
        log.warning("skipping corrupt checkpoint %s: %s", path, problem)
    raise CrossalignError(
        f"--resume: no good checkpoint in {Path(run_dir) / 'checkpoints'}; start without --resume"
    )


def read_state(path: Path) -> dict[str, Any]:
    """The ``trainer_state.json`` of a checkpoint."""
    return json.loads((path / STATE).read_text(encoding="utf-8"))


def prune_checkpoints(run_dir: str | Path, keep: int) -> None:
    """Delete all but the ``keep`` newest good checkpoints (corrupt ones are left for
    inspection)."""
    good = [p for p in list_checkpoints(run_dir) if checkpoint_problem(p) is None]
    for path in good[keep:]:
        shutil.rmtree(path, ignore_errors=True)
