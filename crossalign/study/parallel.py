"""``crossalign compare --jobs N``: a study's seeds trained and evaluated by N processes at
once (e.g. several small models sharing one GPU under CUDA MPS), then one report.

The parent process first makes, itself, what the seeds share: every derived corpus and prepare
output (``run_study(prepare_only=True)``), then the runs with their own ``seeds`` (a starting
model the others continue from).
Then one child ``crossalign compare --seeds S --no-report`` per seed, at most N at a time,
each writing ``OUT/logs/seed-S.log``; then the parent runs the whole study again, which reuses
every trained run and record and writes the report. A failed child stops the start of new
ones and is named with its log.

The seed processes share the machine's CPU cores: each gets ``cores // N`` intra-op threads
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``; at least one) unless the environment sets them, so N
processes never oversubscribe the cores."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from crossalign.errors import CrossalignError
from crossalign.study.spec import load_study, select_runs


def child_command(
    study_file: str,
    overrides: Sequence[str],
    runs: Sequence[str],
    seed: int,
    records_dir: Path | None = None,
) -> list[str]:
    """The ``crossalign compare`` command of one seed's runs (no report), keeping its
    records in ``records_dir`` too when given."""
    command = [sys.executable, "-m", "crossalign", "compare", study_file]
    command += ["--seeds", str(seed), "--runs", ",".join(runs), "--no-report"]
    if records_dir is not None:
        command += ["--records", str(records_dir)]
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
    """The environment of one of ``jobs`` seed processes: ``environ`` (default: this
    process's) with ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to ``max(1, cores //
    jobs)`` (default cores: ``available_cores()``), each unless ``environ`` already sets it."""
    env = dict(os.environ if environ is None else environ)
    threads = str(max(1, (available_cores() if cores is None else cores) // jobs))
    for name in THREAD_VARIABLES:
        env.setdefault(name, threads)
    return env


def run_parallel(
    study_file: str,
    overrides: Sequence[str],
    jobs: int,
    names: Sequence[str] | None = None,
    report: bool = True,
    records_dir: Path | None = None,
) -> Path | None:
    """Run the study of ``study_file`` (with ``overrides``, the runs ``names``) with ``jobs``
    seed processes at once, keeping the records in ``records_dir`` too when given
    (``study.records``); returns the report page (None without ``report``)."""
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
        run_study(study, report=False, records_dir=records_dir, only=shared)
    logs = Path(study.out) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    if per_seed:
        _run_children(study_file, overrides, per_seed, study.seeds, jobs, logs, records_dir)
    return run_study(study, report=report, records_dir=records_dir).report


def _run_children(
    study_file: str,
    overrides: Sequence[str],
    runs: Sequence[str],
    seeds: Sequence[int],
    jobs: int,
    logs: Path,
    records_dir: Path | None = None,
) -> None:
    """One child per seed, at most ``jobs`` at a time; raises naming the first failed one."""
    waiting = list(seeds)
    env = child_environment(jobs)
    print(f"== {jobs} seed processes at a time, {env['OMP_NUM_THREADS']} CPU thread(s) each")
    running: dict[int, tuple[subprocess.Popen, object]] = {}
    failed: list[int] = []
    while waiting or running:
        while waiting and len(running) < jobs and not failed:
            seed = waiting.pop(0)
            log = open(logs / f"seed-{seed}.log", "w", encoding="utf-8")  # noqa: SIM115
            command = child_command(study_file, overrides, runs, seed, records_dir)
            running[seed] = (
                subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env),
                log,
            )
            print(f"== seed {seed}: started (log {logs / f'seed-{seed}.log'})")
        for seed, (proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[seed]
            state = "done" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
            print(f"== seed {seed}: {state}")
            if proc.returncode != 0:
                failed.append(seed)
        if failed and not running:
            break
        time.sleep(0.5)
    if failed:
        seed = failed[0]
        raise CrossalignError(
            f"seed {seed} failed; see {logs / f'seed-{seed}.log'} (the other seeds' runs are "
            f"kept: run the same command again to continue)"
        )
