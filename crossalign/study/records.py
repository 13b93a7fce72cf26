"""A study's records kept outside its directory (``crossalign compare --records DIR``), and the
digests that tell whether the runs a study compares measured the models they say.

``--records DIR`` is for a study that takes longer than the machine keeps its files (e.g. a
session that starts from a fresh clone each time: commit DIR between sessions). DIR mirrors
the study directory ``OUT`` without models or checkpoints: each run's ``RECORD_FILES`` at the
same place under DIR as under OUT (the layout of ``docs/studies/NAME/records/``). Before the
runs, each run directory DIR holds and OUT does not gets those files (``restore_records``), so
that a run whose records hold every evaluation is reused (``measured``, see
``crossalign.study.plan.run_state``); after each run is measured, its files are copied to DIR
(``keep_records``).

A measured run whose model a run still to train starts from is trained again, so a study
carried this way could compare runs continued from two different starting models. Each run
directory therefore holds the digest of the model it trained or measured (``model.sha256``)
and, for a run continued from a model, of that model (``start.sha256``); every run that
records a digest of one model must record the same (``check_same_models``). A run trained again
bit-identical to the model its records measured keeps them (``reinstate_records``)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from crossalign.checkpoint import CONFIG
from crossalign.errors import CrossalignError
from crossalign.evals.results import RESULTS
from crossalign.fileio import (
    atomic_dir,
    atomic_path,
    check_writable,
    file_sha256,
    write_text_atomic,
)
from crossalign.run_dir import METRICS

MODEL_DIGEST = "model.sha256"
"""The digest of the model a run trained (``RUN/model``) or, a ``model`` run, measured."""

START_DIGEST = "start.sha256"
"""The digest of the model a run was continued from (its ``model.path``)."""

RECORD_FILES = (CONFIG, RESULTS, METRICS, MODEL_DIGEST, START_DIGEST)
"""The files of a run directory that ``--records`` keeps: no model, no checkpoint."""

WEIGHTS = ("*.safetensors", "*.bin")
"""The files of a model directory its digest covers: the weights, not the model card or
``config.json`` (which name paths and library versions)."""

_DIGEST_LINE = re.compile(r"([0-9a-f]{64})  [^\n]*\r?\n?")


def named_model(path: str | Path) -> Path:
    """The model directory a ``model.path`` names, whether or not it exists yet: a run
    directory (``config.yaml``, no ``config.json``) means its ``model/``, as
    ``crossalign.models.load.model_dir`` reads it; ``~`` is expanded."""
    path = Path(path).expanduser()
    if (path / CONFIG).is_file() and not (path / "config.json").is_file():
        return path / "model"
    return path


def trained_in_run(model: Path) -> Path | None:
    """The run directory whose ``model/`` ``model`` is (it holds ``config.yaml``), or None."""
    return model.parent if model.name == "model" and (model.parent / CONFIG).is_file() else None


def model_digest(model_dir: Path) -> str | None:
    """SHA-256 over the weight files of ``model_dir`` (``WEIGHTS``): each file's name (sorted)
    and the SHA-256 of its bytes. Equal digests: bit-identical weights. None for a path that
    is no local directory of weights (e.g. a model hub id)."""
    files = sorted({f for pattern in WEIGHTS for f in Path(model_dir).glob(pattern)})
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.name} {file_sha256(file)}\n".encode())
    return digest.hexdigest()


def read_digest(path: Path) -> str | None:
    """The digest a ``model.sha256``/``start.sha256`` file holds (None when there is none); a
    malformed file is an error naming it and the fix."""
    if not path.is_file():
        return None
    match = _DIGEST_LINE.fullmatch(path.read_text(encoding="utf-8"))
    if match is None:
        raise CrossalignError(
            f"{path} is not a digest line ('<64 hex digits>  <model>'); delete it and train "
            "its run again (remove the run directory)"
        )
    return match.group(1)


def write_digest(path: Path, model_dir: Path, digest: str | None = None) -> str | None:
    """Write ``digest`` (by default ``model_digest(model_dir)``) to ``path`` as
    ``<digest>  <model_dir>``; returns it. A model with no local weights (a hub id) has no
    digest: ``path`` is removed, so that no earlier digest stands for it."""
    if digest is None:
        digest = model_digest(model_dir)
    if digest is None:
        path.unlink(missing_ok=True)
    else:
        write_text_atomic(path, f"{digest}  {Path(model_dir).as_posix()}\n")
    return digest


class MeasuredModel(NamedTuple):
    """What a run directory's records say of the model they measured: its digest and the
    text of its ``results.jsonl``."""

    digest: str
    results: str


def measured_model(run_dir: Path) -> MeasuredModel | None:
    """The digest and records of the model ``run_dir``'s records measured, or None when it
    holds no ``model.sha256`` or no ``results.jsonl``."""
    digest, results = read_digest(run_dir / MODEL_DIGEST), run_dir / RESULTS
    if digest is None or not results.is_file():
        return None
    return MeasuredModel(digest, results.read_text(encoding="utf-8"))


def reinstate_records(run_dir: Path, earlier: MeasuredModel) -> bool:
    """After ``run_dir`` was trained again (its ``model.sha256`` written): when its model is
    bit-identical to the one ``earlier`` measured, write those records back (they measure
    this model) and return True; else drop any record left in it (a resumed run keeps its
    ``results.jsonl``) and return False, so that its evaluations run again."""
    if read_digest(run_dir / MODEL_DIGEST) == earlier.digest:
        write_text_atomic(run_dir / RESULTS, earlier.results)
        return True
    drop_results(run_dir)
    return False


def drop_results(run_dir: Path) -> None:
    """Remove ``run_dir``'s ``results.jsonl``: its records measured weights the run no longer
    has, so its evaluations run again."""
    (run_dir / RESULTS).unlink(missing_ok=True)


class ModelUse(NamedTuple):
    """One run's record of a model: the model's path, who recorded it and the digest file."""

    model: Path
    who: str
    file: Path


def check_same_models(uses: Iterable[ModelUse]) -> None:
    """Refuse records that give one model two digests: runs measured, or continued from,
    different weights under the same path (e.g. a starting model trained again to other
    weights after some runs were continued from it). Names the model, who recorded which
    digest, the model's digest now, and the fix. A use whose file does not exist (records made
    before digests, a model with no local weights) is not checked."""
    seen: dict[str, dict[str, list[ModelUse]]] = {}
    for use in uses:
        digest = read_digest(use.file)
        if digest is not None:
            model = os.path.abspath(use.model)
            seen.setdefault(model, {}).setdefault(digest, []).append(use)
    for model, digests in seen.items():
        if len(digests) > 1:
            parts = "; ".join(
                f"{digest[:12]} by {', '.join(f'{u.who} ({u.file})' for u in users)}"
                for digest, users in digests.items()
            )
            now = model_digest(Path(model))
            raise CrossalignError(
                f"model {model} has two digests in this study's records ({parts}; its weights "
                f"now: {now[:12] if now else 'absent'}): runs measured from different weights "
                "would be compared; remove the run directories (and their copies under "
                "--records) whose digest is not the model's now, then run the study again"
            )


def record_place(run_dir: Path, out: Path, keep: Path) -> Path:
    """Where the records of ``run_dir`` go under ``keep``: its place under ``out``. A run
    directory outside ``out`` is an error naming it (its records would have no place)."""
    try:
        rel = Path(os.path.abspath(run_dir)).relative_to(os.path.abspath(out))
    except ValueError:
        raise CrossalignError(
            f"--records keeps records under their place in the study directory {out}, and run "
            f"directory {run_dir} is outside it; keep the study's run_dir under its 'out' or "
            "drop --records"
        ) from None
    return keep / rel


def check_records_dir(keep: Path, run_dirs: Sequence[Path], out: Path) -> None:
    """Refuse, before any work, a ``--records`` directory that cannot be written (a file, no
    permission), or run directories with no place under it (``record_place``)."""
    check_writable(keep / RESULTS, "--records")
    for run_dir in run_dirs:
        record_place(run_dir, out, keep)


def restorable(run_dirs: Sequence[Path], out: Path, keep: Path) -> list[Path]:
    """The run directories of ``run_dirs`` that hold none of ``RECORD_FILES`` while ``keep``
    holds their ``config.yaml``."""
    return [
        run_dir
        for run_dir in run_dirs
        if not any((run_dir / name).exists() for name in RECORD_FILES)
        and (record_place(run_dir, out, keep) / CONFIG).is_file()
    ]


def restore_records(run_dirs: Sequence[Path], out: Path, keep: Path) -> list[Path]:
    """Copy the records ``keep`` holds of each of ``run_dirs`` into it, for the run
    directories that hold none of ``RECORD_FILES`` (one that holds any keeps its own), each
    file atomically and ``config.yaml`` last: a restore cut short leaves no ``config.yaml``,
    so the run is trained again rather than reused from part of its records. Returns the run
    directories restored."""
    restored = restorable(run_dirs, out, keep)
    for run_dir in restored:
        src = record_place(run_dir, out, keep)
        for name in [*RECORD_FILES[1:], CONFIG]:
            if (src / name).is_file():
                with atomic_path(run_dir / name) as tmp:
                    shutil.copyfile(src / name, tmp)
    return restored


def keep_records(run_dir: Path, out: Path, keep: Path) -> Path:
    """Make ``run_dir``'s place under ``keep`` hold exactly its ``RECORD_FILES``, replaced as
    one directory (an interrupted copy leaves the previous records whole); returns that
    place."""
    dest = record_place(run_dir, out, keep)
    with atomic_dir(dest) as tmp:
        for name in RECORD_FILES:
            if (run_dir / name).is_file():
                shutil.copyfile(run_dir / name, tmp / name)
    return dest
