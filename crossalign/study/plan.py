"""What a study still has to do: the state of each run (done, measured, resume, train), the
runs that must be trained again because a model they start from will be, and the dry run's
lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import yaml

from crossalign.study.spec import PlannedRun
from crossalign.study.steps import PreparedStep, is_made

if TYPE_CHECKING:
    from crossalign.config import RunConfig
    from crossalign.evals.registry import Evaluation


class PlannedEval(NamedTuple):
    """One evaluation a study runs on one run's model: built options, record label and the
    checkpoint step it measures (None: the final model)."""

    evaluation: Evaluation
    options: Any
    label: str | None
    step: int | None = None

    def model(self, run_dir: Path, final: Path | None = None) -> Path | None:
        """The model it measures: the run's (``final``, by default ``RUN/model``), its
        checkpoint at ``step``, or None for an evaluation that reads no model."""
        from crossalign.checkpoint import checkpoint_dir

        if self.evaluation.model == "none":
            return None
        if self.step is None:
            return run_dir / "model" if final is None else final
        return checkpoint_dir(run_dir, self.step)


def derived_is_written(out: Path, settings: Any) -> bool:
    """Whether ``out`` holds the derived corpus ``settings`` describes (its card's
    ``command`` is the same)."""
    from crossalign.data.corpora.files import load_card

    command = settings.command_line(str(out))
    return (out / "card.json").is_file() and load_card(out).get("command") == command


def holds_config(cfg: RunConfig) -> bool:
    """Whether ``cfg.run_dir`` holds a ``config.yaml`` equal to ``cfg`` (compared as a resume
    compares it: objective options with their defaults)."""
    from crossalign.checkpoint import CONFIG
    from crossalign.objective_options import normalise_saved, run_config_dict

    saved = Path(cfg.run_dir) / CONFIG
    return saved.is_file() and normalise_saved(
        yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    ) == run_config_dict(cfg)


def run_state(cfg: RunConfig, evals: Sequence[PlannedEval] = ()) -> str:
    """What ``ensure_trained`` does with ``cfg``: ``done`` (its run directory holds a finished
    run of the same resolved config), ``measured`` (the same config, its model gone, but
    ``results.jsonl`` holds a record of every one of ``evals`` that reads a model: a study's
    records kept or moved without its models; one that reads none runs without it),
    ``resume`` (checkpoints of that config) or ``train``."""
    from crossalign.checkpoint import list_checkpoints
    from crossalign.evals.results import find_record, read_results

    run_dir = Path(cfg.run_dir)
    same = holds_config(cfg)
    if same and (run_dir / "model").is_dir():
        return "done"
    if same and evals:
        records = read_results(run_dir)
        needed = [e for e in evals if e.evaluation.model != "none"]
        if all(
            find_record(records, e.evaluation, e.model(run_dir), e.options, e.label) for e in needed
        ):
            return "measured"
    return "resume" if same and list_checkpoints(run_dir) else "train"


def reuse_checks(
    checked: Sequence[tuple[PlannedRun, RunConfig | None, list]],
) -> dict[Path, list]:
    """Per run directory, the evaluations whose records let ``run_state`` reuse a run without
    its model (``measured``): none for a run whose ``model/`` a run that will train starts
    from (``model.path``), so that it is trained again first — through chains of such runs."""
    from crossalign.study.records import named_model

    keep = {run.run_dir: list(evals) for run, _, evals in checked}
    while True:
        training = [
            cfg for run, cfg, _ in checked
            if cfg is not None and run_state(cfg, keep[run.run_dir]) in ("train", "resume")
        ]  # fmt: skip
        needed = {named_model(c.model.path).resolve() for c in training if c.model.path}
        dropped = [
            run.run_dir for run, cfg, _ in checked
            if cfg is not None and keep[run.run_dir] and run.model_dir.resolve() in needed
        ]  # fmt: skip
        if not dropped:
            return keep
        for run_dir in dropped:
            keep[run_dir] = []


def planned_state(run: PlannedRun, cfg: RunConfig | None, reuse: list) -> str:
    """``run_state`` of a planned run (``reuse``: its ``reuse_checks`` evaluations), or
    ``as is`` for a ``model`` run."""
    return "as is" if cfg is None else run_state(cfg, reuse)


def unrecorded(run: PlannedRun, state: str, evals: list) -> list:
    """The ``evals`` the run in ``state`` still has to run: those without a record in its
    ``results.jsonl`` when it is reused (``done``, ``measured``, ``as is``), else all."""
    from crossalign.evals.results import find_record, read_results

    records = read_results(run.run_dir) if state in ("done", "measured", "as is") else []
    return [
        e for e in evals
        if find_record(records, e.evaluation, e.model(run.run_dir, run.model_dir), e.options,
                       e.label) is None
    ]  # fmt: skip


def describe_plan(
    checked: Sequence[tuple[PlannedRun, RunConfig | None, list]],
    steps: Sequence[PreparedStep],
    ledger: Path,
    derives: Mapping[Path, Any],
    states: Mapping[Path, str],
    todo: Mapping[Path, list],
) -> str:
    """The lines ``--dry-run`` prints: each derived corpus, prepare step and run with what
    would be done (made / to run; ``states``: done / measured / resume / train / as is, and
    how many evaluations are still to run, ``todo``)."""

    lines = []
    for out, settings in derives.items():
        state = "made" if derived_is_written(out, settings) else "to run"
        lines.append(f"derive   {state:7} {out}")
    for step in steps:
        state = "made" if is_made(step, ledger) else "to run"
        lines.append(f"prepare  {state:7} crossalign {step.command}")
    for run, cfg, evals in checked:
        steps = 0 if cfg is None else cfg.train.steps
        lines.append(
            f"run      {states[run.run_dir]:7} {run.run_dir}  ({steps} steps; "
            f"{len(todo[run.run_dir])} of {len(evals)} evaluations to run)"
        )
    return "\n".join(lines)
