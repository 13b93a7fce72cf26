"""``crossalign compare --records DIR``: a study's records kept outside its directory, for a
study that takes longer than the machine keeps its files (e.g. a session that starts from a
fresh clone each time: commit DIR between sessions).

DIR mirrors the study directory ``OUT`` without models or checkpoints: each run's
``config.yaml``, ``results.jsonl`` and ``metrics.jsonl`` at the same place under DIR as under
OUT (the layout of ``docs/studies/NAME/records/``). Before the runs, each run directory DIR
holds and OUT does not gets those files (``restore_records``), so that a run whose records
hold every evaluation is reused (``measured``, see ``crossalign.study.plan.run_state``); after
each run is measured, its files are copied to DIR (``keep_records``)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from crossalign.checkpoint import CONFIG
from crossalign.errors import CrossalignError
from crossalign.evals.results import RESULTS
from crossalign.fileio import atomic_path
from crossalign.run_dir import METRICS

RECORD_FILES = (CONFIG, RESULTS, METRICS)
"""The files of a run directory that ``--records`` keeps: no model, no checkpoint."""


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
