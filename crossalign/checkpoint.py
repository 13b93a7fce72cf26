"""Checkpoints: written atomically with a manifest, verified and chosen on resume.

A checkpoint ``run_dir/checkpoints/step-00000100`` is a ``save_pretrained`` directory (model
and tokenizer, loadable by ``AutoModelForMaskedLM.from_pretrained``) plus ``trainer/`` (the
accelerate state: weights of every trained module, optimizer, scheduler, RNG states),
``trainer_state.json`` (step, data position, the log sums since the last log line),
``config.yaml`` (the run's settings), ``MANIFEST.json`` (size and SHA-256 of every other file)
and a ``COMPLETE`` marker written last. It is built in a temporary directory and renamed into
place, so an interrupted save never replaces the last good checkpoint; the manifest catches a
file truncated or lost afterwards (disk trouble, a copy gone wrong).

Checkpoints never deleted by the loop are moved aside instead: ``checkpoints/abandoned/`` (a
resume from an older checkpoint starts a new branch) and ``checkpoints/diverged/`` (the weights
at which the loss stopped being finite).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.fileio import file_sha256

MARKER = "COMPLETE"
STATE = "trainer_state.json"
MANIFEST = "MANIFEST.json"
CONFIG = "config.yaml"
CHECKPOINTS = "checkpoints"
"""The run directory's folder of checkpoints."""
_DELETED = ".deleted"  # the suffix of a checkpoint being deleted (``_delete``)


def checkpoint_name(step: int) -> str:
    """Directory name of the checkpoint after ``step`` optimizer steps."""
    return f"step-{step:08d}"


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    """``RUN/checkpoints/step-N``: where the checkpoint after ``step`` steps is saved."""
    return Path(run_dir) / CHECKPOINTS / checkpoint_name(step)


def is_checkpoint_place(place: str | None) -> bool:
    """Whether a model's place in its run (``ResultRecord.place``) is one of its
    checkpoints (``checkpoints/step-N``), not its final ``model``."""
    return place is not None and Path(place).parent.as_posix() == CHECKPOINTS


def checkpoint_step(path: Path) -> int | None:
    """The step in a checkpoint directory's name (None for another name)."""
    digits = path.name.removeprefix("step-")
    return int(digits) if path.name.startswith("step-") and digits.isdigit() else None


def write_manifest(path: Path) -> None:
    """Record the size and SHA-256 of every file under checkpoint ``path`` in its manifest."""
    files = {
        str(p.relative_to(path)): {"size": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name not in (MANIFEST, MARKER)
    }
    (path / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n", encoding="utf-8")


def _manifest_problem(path: Path) -> str | None:
    """Why the files of ``path`` do not match its manifest (None when they all do)."""
    try:
        files = json.loads((path / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} is unreadable"
    for name, want in files.items():
        file = path / name
        if not file.is_file():
            return f"{name} is missing"
        size = file.stat().st_size
        if size != want["size"]:
            return f"{name} has {size} bytes, the manifest says {want['size']} (truncated?)"
        if file_sha256(file) != want["sha256"]:
            return f"{name} does not match its checksum (corrupted)"
    return None


def checkpoint_problem(path: Path, verify: bool = False) -> str | None:
    """Why ``path`` is not a usable checkpoint, or None when it is. ``verify`` also checks
    every file against the manifest (reads them all: done before resuming)."""
    if not path.is_dir():
        return "not a directory" if not path.exists() else "not a directory but a file"
    if not (path / MARKER).is_file():
        if (path / "trainer").is_dir() or (path / STATE).is_file():
            return f"no {MARKER} marker (half-written: the save was interrupted)"
        return "not a checkpoint (a checkpoint is a checkpoints/step-N directory of a run)"
    for needed in (STATE, "config.json", "trainer"):
        if not (path / needed).exists():
            return f"{needed} is missing"
    try:
        int(read_state(path)["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"{STATE} is unreadable"
    if verify and ((path / MANIFEST).exists() or (path / CONFIG).exists()):
        # checkpoints written with a manifest (they also hold config.yaml) must still have it
        return _manifest_problem(path)
    return None


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint directories of a run (good or not), newest step first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if checkpoint_step(p) is not None]
    return sorted(found, key=checkpoint_step, reverse=True)


def good_checkpoints(run_dir: str | Path) -> list[Path]:
    """The usable checkpoints of a run (marker, state and weights present; the manifest is not
    read), newest step first."""
    return [p for p in list_checkpoints(run_dir) if checkpoint_problem(p) is None]


def find_resume_checkpoint(run_dir: str | Path, which: str) -> Path:
    """The checkpoint to resume from: ``last`` → the newest good one in ``run_dir`` (bad ones
    are reported on stderr, one line each naming the file, and skipped), else the directory
    ``which`` itself, which must be good. Files are verified against the manifest."""
    if which != "last":
        path = Path(which)
        problem = checkpoint_problem(path, verify=True)
        if problem:
            raise CrossalignError(f"cannot resume from {path}: {problem}")
        return path
    for path in list_checkpoints(run_dir):
        problem = checkpoint_problem(path, verify=True)
        if problem is None:
            return path
        print(f"skipping checkpoint {path}: {problem}", file=sys.stderr)
    raise CrossalignError(
        f"--resume: no good checkpoint in {Path(run_dir) / 'checkpoints'}; start again without "
        "--resume (with --overwrite if run_dir has other files)"
    )


def read_state(path: Path) -> dict[str, Any]:
    """The ``trainer_state.json`` of a checkpoint."""
    return json.loads((path / STATE).read_text(encoding="utf-8"))


def prune_checkpoints(run_dir: str | Path, keep: int) -> None:
    """Delete all but the ``keep`` newest good checkpoints; the newest is always kept (also
    with ``keep`` 0), and bad ones are left for inspection."""
    _clear_deleted(Path(run_dir) / CHECKPOINTS)
    for path in good_checkpoints(run_dir)[max(keep, 1) :]:
        _delete(path)


def remove_checkpoints(run_dir: str | Path) -> int:
    """Delete every good checkpoint of a finished run, the newest too (``crossalign compare
    --prune-checkpoints``, once the run's ``model/`` is saved and measured); bad ones and the
    folders moved aside (``abandoned/``, ``diverged/``) stay for inspection, and an emptied
    ``checkpoints/`` goes. Returns how many were deleted."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return 0
    _clear_deleted(root)
    found = good_checkpoints(run_dir)
    for path in found:
        _delete(path)
    if not any(root.iterdir()):
        root.rmdir()
    return len(found)


def _delete(path: Path) -> None:
    """Remove the checkpoint ``path``, first renamed out of the names a checkpoint has, so that
    an interrupted deletion leaves no half checkpoint where a good one was listed."""
    aside = path.with_name(f".{path.name}{_DELETED}")
    if aside.exists():
        shutil.rmtree(aside, ignore_errors=True)
    path.rename(aside)
    shutil.rmtree(aside, ignore_errors=True)


def _clear_deleted(root: Path) -> None:
    """Finish the deletions ``_delete`` left interrupted in the checkpoints folder ``root``."""
    for left in root.glob(f".*{_DELETED}") if root.is_dir() else ():
        shutil.rmtree(left, ignore_errors=True)


def move_aside(paths: list[Path], run_dir: str | Path, why: str) -> Path | None:
    """Move checkpoint directories (and anything else given) into
    ``checkpoints/<why>/<UTC time>/``; returns that folder (None when ``paths`` is empty)."""
    if not paths:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = Path(run_dir) / CHECKPOINTS / why / stamp
    n = 1
    while folder.exists():
        n += 1
        folder = folder.with_name(f"{stamp}-{n}")
    folder.mkdir(parents=True)
    for path in paths:
        path.rename(folder / path.name)
    return folder
