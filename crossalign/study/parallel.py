"""``crossalign compare --jobs N``: a study's runs trained and evaluated by N processes at
once (e.g. several small models sharing one GPU under CUDA MPS), then one report.

The parent process first makes, itself, what the seeds share: every derived corpus and prepare
output (``run_study(prepare_only=True)``), then the runs with their own ``seeds`` (a starting
model the others continue from).
Then one child ``crossalign compare --seeds S --runs R --no-report`` per seed and run, at most
N at a time, seed by seed, each writing ``OUT/logs/seed-S-R.log`` (``seed-S.log`` when a seed
has one such run): so the last process to finish holds one run, not a seed's every run, while
the other cores idle. Where a run of a seed continues from, or evaluates, another run of the
same seed (its config, overrides or evaluation options name that run's directory:
``spec.run_strings``, ``spec.names_dir``), that seed's runs stay in one child, in the study's
order. Then the parent runs the whole study again, which reuses every trained run and record
and writes the report. A failed child stops the start of new ones and is named with its log.

The child processes share the machine's CPU cores: each gets ``cores // N`` intra-op threads
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``; at least one) unless the environment sets them, so N
processes never oversubscribe the cores."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from crossalign.errors import CrossalignError
from crossalign.study.spec import Study, load_study, names_dir, plan, run_strings, select_runs


def child_command(
    study_file: str,
    overrides: Sequence[str],
    runs: Sequence[str],
    seed: int,
    records_dir: Path | None = None,
    prune: bool = False,
) -> list[str]:
    """The ``crossalign compare`` command of ``runs`` of one seed (no report), keeping their
    records in ``records_dir`` too when given, and pruning their checkpoints with ``prune``."""
    command = [sys.executable, "-m", "crossalign", "compare", study_file]
    command += ["--seeds", str(seed), "--runs", ",".join(runs), "--no-report"]
    if records_dir is not None:
        command += ["--records", str(records_dir)]
    if prune:
        command.append("--prune-checkpoints")
    return command + list(overrides)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def child_environment(
    jobs: int, environ: Mapping[str, str] | None = None, cores: int | None = None
) -> dict[str, str]:
    """The environment of one of ``jobs`` child processes: ``environ`` (default: this
    process's) with ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to ``max(1, cores //
    jobs)`` (default cores: ``available_cores()``), each unless ``environ`` already sets it."""
    env = dict(os.environ if environ is None else environ)
    threads = str(max(1, (available_cores() if cores is None else cores) // jobs))
    for name in THREAD_VARIABLES:
        env.setdefault(name, threads)
    return env


class Unit(NamedTuple):
    """The runs of one seed that one child process trains and evaluates, in order."""

    seed: int
    runs: tuple[str, ...]
    whole_seed: bool
    """Whether ``runs`` are all the seed's runs (else one of several)."""

    @property
    def name(self) -> str:
        """How the progress lines name it: ``seed 3`` or ``seed 3 mlm``."""
        return f"seed {self.seed}" if self.whole_seed else f"seed {self.seed} {self.runs[0]}"

    @property
    def log(self) -> str:
        """Its log file's name under ``OUT/logs``: ``seed-3.log`` or ``seed-3-mlm.log``."""
        return self.name.replace(" ", "-") + ".log"


def units(study: Study, runs: Sequence[str], seeds: Sequence[int]) -> list[Unit]:
    """The child processes' work, seed by seed: each of ``runs`` that a seed has alone, or the
    seed's runs together when one of them names another's directory (``names_dir``)."""
    planned = plan(study)
    out = []
    for seed in seeds:
        mine = [r for r in planned if r.seed == seed and r.name in runs]
        names = tuple(name for name in runs if any(r.name == name for r in mine))
        if not names:
            continue
        texts = {run.run_dir: run_strings(study, run) for run in mine}
        chained = any(
            names_dir(texts[run.run_dir], other.run_dir)
            for run in mine
            for other in mine
            if other.name != run.name and other.cell == run.cell
        )
        if chained or len(names) == 1:
            out.append(Unit(seed, names, True))
        else:
            out += [Unit(seed, (name,), False) for name in names]
    return out


def run_parallel(
    study_file: str,
    overrides: Sequence[str],
    jobs: int,
    names: Sequence[str] | None = None,
    report: bool = True,
    records_dir: Path | None = None,
    prune: bool = False,
) -> Path | None:
    """Run the study of ``study_file`` (with ``overrides``, the runs ``names``) with ``jobs``
    processes at once, keeping the records in ``records_dir`` too when given
    (``study.records``) and deleting each measured run's checkpoints with ``prune``
    (``run_study(prune_checkpoints=...)``); returns the report page (None without
    ``report``)."""
    from crossalign.study.run import run_study

    if jobs < 1:
        raise CrossalignError(f"--jobs {jobs} must be at least 1")
    study = select_runs(load_study(study_file, overrides), names)
    shared = [r.name for r in study.runs if r.seeds is not None]
    per_seed = [r.name for r in study.runs if r.seeds is None]
    # every derived corpus and prepare output first, so that no two processes make one
    run_study(study, report=False, prepare_only=True)
    if shared:
        print(f"== shared runs first: {', '.join(shared)}")
        # planned with the whole study: a measured starting model is trained again when a
        # seed process will continue from it
        run_study(
            study, report=False, records_dir=records_dir, only=shared, prune_checkpoints=prune
        )
    logs = Path(study.out) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    if per_seed:
        work = units(study, per_seed, study.seeds)
        _run_children(study_file, overrides, work, jobs, logs, records_dir, prune)
    return run_study(study, report=report, records_dir=records_dir, prune_checkpoints=prune).report


def _run_children(
    study_file: str,
    overrides: Sequence[str],
    work: Sequence[Unit],
    jobs: int,
    logs: Path,
    records_dir: Path | None = None,
    prune: bool = False,
) -> None:
    """One child per unit of ``work`` (``child_command``), at most ``jobs`` at a time; raises
    naming the first failed one."""
    waiting = list(work)
    env = child_environment(jobs)
    print(f"== {jobs} processes at a time, {env['OMP_NUM_THREADS']} CPU thread(s) each")
    running: dict[Unit, tuple[subprocess.Popen, object]] = {}
    failed: list[Unit] = []
    while waiting or running:
        while waiting and len(running) < jobs and not failed:
            unit = waiting.pop(0)
            log = open(logs / unit.log, "w", encoding="utf-8")  # noqa: SIM115
            command = child_command(study_file, overrides, unit.runs, unit.seed, records_dir, prune)
            running[unit] = (
                subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env),
                log,
            )
            print(f"== {unit.name}: started (log {logs / unit.log})")
        for unit, (proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[unit]
            state = "done" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
            print(f"== {unit.name}: {state}")
            if proc.returncode != 0:
                failed.append(unit)
        if failed and not running:
            break
        time.sleep(0.5)
    if failed:
        unit = failed[0]
        raise CrossalignError(
            f"{unit.name} failed; see {logs / unit.log} (the other runs are kept: run the "
            f"same command again to continue)"
        )
