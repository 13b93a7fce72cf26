"""``crossalign compare --records DIR``: a study's records kept outside its directory, for a
study that takes longer than the machine keeps its files (e.g. a session that starts from a
fresh clone each time: commit DIR between sessions).

DIR mirrors the study directory ``OUT`` without models or checkpoints: each run's
``config.yaml``, ``results.jsonl`` and ``metrics.jsonl`` at the same place under DIR as under
OUT (the layout of ``docs/studies/NAME/records/``). Before the runs, each run directory DIR
holds and OUT does not gets those files (``restore_records``), so that a run whose records
hold every evaluation is reused (``measured``, see ``crossalign.study.plan.run_state``); after
each run is measured, its files are copied to DIR (``keep_records``).

A measured run whose model a run still to train starts from is trained again. Each trained
run's directory holds ``model.sha256``, the digest of its model's files
(``write_model_digest``), so that a run trained again can be told from the one its records
measured: bit-identical, its records stand (``reinstate_records``); else they are measured
again, and runs measured from the earlier model are named (``crossalign.study.run``)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from crossalign.checkpoint import CONFIG
from crossalign.errors import CrossalignError
from crossalign.evals.results import RESULTS
from crossalign.fileio import atomic_path, file_sha256, write_text_atomic
from crossalign.run_dir import METRICS

MODEL_DIGEST = "model.sha256"
"""The digest of a trained run's ``model/`` files, beside its records."""

RECORD_FILES = (CONFIG, RESULTS, METRICS, MODEL_DIGEST)
"""The files of a run directory that ``--records`` keeps: no model, no checkpoint."""


class MeasuredModel(NamedTuple):
    """What a run directory's records say of the model they measured: its digest and the
    text of its ``results.jsonl``."""

    digest: str
    results: str


def model_digest(model_dir: Path) -> str:
    """SHA-256 over every file under ``model_dir``: each file's path (relative, sorted) and
    the SHA-256 of its bytes. Equal digests: bit-identical models."""
    digest = hashlib.sha256()
    for file in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(model_dir).as_posix()} {file_sha256(file)}\n".encode())
    return digest.hexdigest()


def write_model_digest(run_dir: Path) -> str | None:
    """Write ``RUN/model.sha256`` (``model_digest`` of ``RUN/model``); None, and nothing
    written, when the run holds no model."""
    if not (run_dir / "model").is_dir():
        return None
    digest = model_digest(run_dir / "model")
    write_text_atomic(run_dir / MODEL_DIGEST, f"{digest}  model/\n")
    return digest


def measured_model(run_dir: Path) -> MeasuredModel | None:
    """The digest and records of the model ``run_dir``'s records measured, or None when it
    holds no ``model.sha256`` or no ``results.jsonl``."""
    digest, results = run_dir / MODEL_DIGEST, run_dir / RESULTS
    if not (digest.is_file() and results.is_file()):
        return None
    return MeasuredModel(
        digest.read_text(encoding="utf-8").split()[0], results.read_text(encoding="utf-8")
    )


def reinstate_records(run_dir: Path, earlier: MeasuredModel) -> bool:
    """After ``run_dir`` was trained again: when its new model is bit-identical to the one
    ``earlier`` measured, write those records back (they measure this model) and return
    True; else return False (its evaluations run again)."""
    digest = write_model_digest(run_dir)
    if digest != earlier.digest:
        return False
    write_text_atomic(run_dir / RESULTS, earlier.results)
    return True


def record_place(run_dir: Path, out: Path, keep: Path) -> Path:
    """Where the records of ``run_dir`` go under ``keep``: its place under ``out``. A run
    directory outside ``out`` is an error naming it (its records would have no place)."""
    try:
        rel = run_dir.resolve().relative_to(out.resolve())
    except ValueError:
        raise CrossalignError(
            f"--records keeps records under their place in the study directory {out}, and run "
            f"directory {run_dir} is outside it; keep the study's run_dir under its 'out' or "
            "drop --records"
        ) from None
    return keep / rel


def restore_records(run_dirs: Sequence[Path], out: Path, keep: Path) -> list[Path]:
    """Copy the records ``keep`` holds of each of ``run_dirs`` into it, for the run
    directories that hold none of ``RECORD_FILES`` (a run directory with files of its own is
    never touched). Returns the run directories restored."""
    if keep.exists() and not keep.is_dir():
        raise CrossalignError(f"--records {keep} is a file; give a directory")
    restored = []
    for run_dir in run_dirs:
        src = record_place(run_dir, out, keep)
        files = [src / name for name in RECORD_FILES if (src / name).is_file()]
        if not files or any((run_dir / name).exists() for name in RECORD_FILES):
            continue
        run_dir.mkdir(parents=True, exist_ok=True)
        for file in files:
            with atomic_path(run_dir / file.name) as tmp:
                shutil.copyfile(file, tmp)
        restored.append(run_dir)
    return restored


def keep_records(run_dir: Path, out: Path, keep: Path) -> Path:
    """Copy ``run_dir``'s ``RECORD_FILES`` to its place under ``keep``, each atomically (an
    interrupted copy leaves the previous one); returns that place."""
    dest = record_place(run_dir, out, keep)
    for name in RECORD_FILES:
        if (run_dir / name).is_file():
            with atomic_path(dest / name) as tmp:
                shutil.copyfile(run_dir / name, tmp)
    return dest
