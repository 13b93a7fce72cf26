"""``crossalign compare STUDY.yaml``: derive, prepare, train and evaluate everything a study
lists, reusing what is done, then write its report. Everything is keyed by what it depends on,
so an interrupted or repeated study continues where it stopped (see ``crossalign.study.spec``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from crossalign.errors import CrossalignError
from crossalign.study.plan import (
    PlannedEval,
    derived_is_written,
    describe_plan,
    holds_config,
    planned_state,
    reuse_checks,
    run_state,
    unrecorded,
)
from crossalign.study.spec import (
    PlannedRun,
    Study,
    names_dir,
    plan,
    run_strings,
    strings_in,
    substitute,
    write_run_config,
)
from crossalign.study.steps import PreparedStep, ensure_prepared, parse_step
from crossalign.study.summary import StudyResult, contrast_pairs, correlation_section

if TYPE_CHECKING:
    from crossalign.config import RunConfig
    from crossalign.evals.registry import Evaluation
    from crossalign.evals.results import ResultRecord

HYPOTHESES = "hypotheses.json"
"""The file of a study report that holds the judged hypotheses and gates alone."""


def ensure_derived(out: Path, settings: Any) -> None:
    """Write the derived corpus ``settings`` describes to ``out`` unless ``derived_is_written``."""
    from crossalign.data.derive.derivation import write_derived

    if derived_is_written(out, settings):
        print(f"derived corpus: {out} (already written)")
        return
    write_derived(out, settings, settings.command_line(str(out)))


def ensure_trained(cfg: RunConfig, label: str, evals: Sequence[PlannedEval] = ()) -> None:
    """Train the run ``cfg`` describes unless ``run_state`` finds it finished (``done``) or
    measured by every one of ``evals`` (``measured``): a run directory whose ``config.yaml``
    equals it and holds ``model/`` or all those records is reused, one with checkpoints is
    resumed, anything else is started again (``--overwrite``). A trained run's directory gets
    the digests of its model and of the model it was continued from (a resumed run keeps the
    one it started with; ``study.records``); one trained again keeps the records of a
    bit-identical model (``reinstate_records``)."""
    from crossalign.study.records import (
        MODEL_DIGEST,
        START_DIGEST,
        measured_model,
        named_model,
        reinstate_records,
        write_digest,
    )
    from crossalign.training.loop import train

    run_dir = Path(cfg.run_dir)
    state = run_state(cfg, evals)
    if state in ("done", "measured"):
        if state == "done" and not (run_dir / MODEL_DIGEST).is_file():
            write_digest(run_dir / MODEL_DIGEST, run_dir / "model")  # trained before digests
        return
    earlier = measured_model(run_dir) if holds_config(cfg) else None
    if state == "train" and run_dir.is_dir() and any(run_dir.iterdir()):
        why = (
            "holds no finished run or checkpoint of its config"
            if holds_config(cfg)
            else "holds a run of another config than the study gives it now"
        )
        if earlier is not None:
            why = "holds records of its config but no model"
        print(f"{run_dir} {why}: its model, checkpoints and results are replaced")
    print(f"== pre-training {label} ({cfg.train.steps} steps)")
    resume = state == "resume"
    started = (run_dir / START_DIGEST).is_file() and resume
    (run_dir / MODEL_DIGEST).unlink(missing_ok=True)  # a resumed run's is of no model now
    train(cfg, resume="last" if resume else None, overwrite=not resume)
    write_digest(run_dir / MODEL_DIGEST, run_dir / "model")
    if cfg.model.path and not started:
        write_digest(run_dir / START_DIGEST, named_model(cfg.model.path))
    if earlier is None:
        return
    if reinstate_records(run_dir, earlier):
        print(f"{run_dir}: trained again bit-identical to the model its records measured "
              f"(sha256 {earlier.digest[:12]}); they stand")  # fmt: skip
    else:
        print(f"{run_dir}: trained again to other weights than its records measured; its "
              "evaluations run again")  # fmt: skip


def ensure_as_is(run: PlannedRun) -> None:
    """The run directory of a ``model`` run: its ``config.yaml`` names the model,
    ``train.steps: 0`` (so a report tells it from the trained runs) and the study's seed as
    ``train.seed`` (so a report groups one model per seed as one run's seeds), and
    ``model.sha256`` its weights' digest; when the model's weights are no longer those its
    records measured, the records are dropped (its evaluations run again). A missing model is
    an error naming the run."""
    from crossalign.checkpoint import CONFIG
    from crossalign.fileio import write_text_atomic
    from crossalign.study.records import (
        MODEL_DIGEST,
        drop_results,
        model_digest,
        read_digest,
        write_digest,
    )

    assert run.model is not None
    if not run.model.exists():
        raise CrossalignError(
            f"study run '{run.name}': model {run.model} does not exist; create it first or "
            f"fix the run's 'model'"
        )
    config = {"model": {"path": str(run.model)}, "train": {"steps": 0, "seed": run.seed}}
    write_text_atomic(run.run_dir / CONFIG, yaml.safe_dump(config, sort_keys=False))
    current, file = model_digest(run.model), run.run_dir / MODEL_DIGEST
    recorded = read_digest(file)
    if current == recorded:
        return
    if recorded is not None:
        print(f"{run.run_dir}: model {run.model} is no longer the one its records measured; "
              "its evaluations run again")  # fmt: skip
        drop_results(run.run_dir)
    write_digest(file, run.model, current)


def model_uses(
    checked: Sequence[tuple[PlannedRun, RunConfig | None, list]], unsettled: set[Path]
) -> list:
    """Every record of a model's digest the study's runs hold (``study.records.ModelUse``):
    each run's own model (trained, or measured as it is), the model each continued run started
    from, and, for a model in a run directory, that run's record of it. The files of
    ``unsettled`` run directories (still to train, or a ``model`` run not yet looked at in this
    call) are left out: they are replaced before they count."""
    from crossalign.study.records import (
        MODEL_DIGEST,
        START_DIGEST,
        ModelUse,
        named_model,
        trained_in_run,
    )

    uses = []
    for run, cfg, _ in checked:
        if run.run_dir in unsettled:
            continue
        who = f"{run.name} (seed {run.seed})"
        uses.append(
            ModelUse(run.model_dir, f"{who}, which measured it", run.run_dir / MODEL_DIGEST)
        )
        start = named_model(cfg.model.path) if cfg is not None and cfg.model.path else None
        if start is not None:
            uses.append(ModelUse(start, f"{who}, continued from it", run.run_dir / START_DIGEST))
        for model in (start, run.model):
            owner = trained_in_run(model) if model is not None else None
            if owner is not None and owner not in unsettled:
                uses.append(ModelUse(model, "the run that trained it", owner / MODEL_DIGEST))
    return uses


def ensure_evaluated(run: PlannedRun, planned: PlannedEval, label: str) -> ResultRecord:
    """The record of ``planned`` on the run's model or checkpoint (none for an evaluation
    that reads none): read from ``RUN/results.jsonl`` when the same measurement is there,
    else measured and appended there. A checkpoint pruned or never saved is an error naming
    it."""
    from crossalign.evals.results import RESULTS, find_record, read_results, run_evaluation

    evaluation, opts, spec_label, step = planned
    model = planned.model(run.run_dir, run.model_dir)
    found = find_record(read_results(run.run_dir), evaluation, model, opts, spec_label)
    if found is not None:
        return found
    if model is not None and step is not None and not model.is_dir():
        raise CrossalignError(
            f"study run '{run.name}' (seed {run.seed}): {spec_label or evaluation.name} "
            f"measures checkpoint {model}, which does not exist: pruned by "
            "train.keep_checkpoints (a checkpoint saved on an interrupt counts toward it too; "
            "raise it) or deleted by compare --prune-checkpoints; delete "
            f"{run.run_dir / 'model'} to train the run again"
        )
    at = "" if step is None else f" at step {step}"
    print(f"== evaluating {label}{at}: {spec_label or evaluation.name}")
    record, _ = run_evaluation(
        evaluation, model, opts, results=run.run_dir / RESULTS, label=spec_label
    )
    return record


def checkpoint_evals(
    cfg: RunConfig, planned: PlannedEval, steps: Sequence[int], where: str
) -> list[PlannedEval]:
    """``planned`` at each checkpoint step of ``steps`` of the run ``cfg`` trains; a step
    that is not a multiple of ``train.save_every`` below ``train.steps``, or that
    ``train.keep_checkpoints`` would prune, is an error naming ``where`` and the fix. The run
    saves every ``save_every`` steps and at its last step (``TrainingLoop.finish``), then keeps
    the newest ``keep_checkpoints``."""
    tc = cfg.train
    if not tc.save_every:
        raise CrossalignError(
            f"{where}: the run saves no checkpoint but its last (train.save_every is 0); set "
            "train.save_every in the study's overrides"
        )
    last_multiple = tc.steps - tc.steps % tc.save_every
    final_extra = 1 if tc.steps % tc.save_every else 0  # the last step's own checkpoint
    for step in steps:
        if step % tc.save_every or step >= tc.steps:
            raise CrossalignError(
                f"{where}: step {step} is not a checkpoint of a run of {tc.steps} steps that "
                f"saves every {tc.save_every} (train.save_every); give multiples of "
                "train.save_every below train.steps"
            )
        kept = (last_multiple - step) // tc.save_every + 1 + final_extra
        if kept > max(tc.keep_checkpoints, 1):
            raise CrossalignError(
                f"{where}: step {step} would be pruned: the run keeps "
                f"{tc.keep_checkpoints} checkpoints (train.keep_checkpoints); set it to at "
                f"least {kept} in the study's overrides"
            )
    return [planned._replace(step=step) for step in steps]


def check_checkpoints(study: Study) -> None:
    """Refuse ``checkpoints`` on an evaluation that reads no model, or that measures no
    trained run of the study file (a ``model`` run has no checkpoints): it would silently
    measure nothing. Runs that ``--runs`` leaves out count, so a curve of a run another
    process trains is not refused here."""
    from crossalign.evals.registry import evaluations

    trained = [run.name for run in [*study.runs, *study.left_out] if run.model is None]
    for i, spec in enumerate(study.evaluations):
        if not spec.checkpoints:
            continue
        where = f"study '{study.name}': evaluations.{i} ({spec.eval})"
        if evaluations().get(spec.eval).model == "none":
            raise CrossalignError(
                f"{where} reads no model, so it has no checkpoints to measure; drop its "
                "'checkpoints'"
            )
        if not any(spec.runs is None or name in spec.runs for name in trained):
            raise CrossalignError(
                f"{where} measures no trained run (a model run has no checkpoints); drop its "
                "'checkpoints' or name a trained run in its 'runs'"
            )


def check_run(cfg: RunConfig, run: PlannedRun, made_by_study: Sequence[Path]) -> None:
    """Refuse, before any work, a run whose objectives or options are unknown or whose data
    files do not exist (unless the study writes them first): one line naming the run and the
    fix, so that a typo in a later run does not stop a study after hours of training."""
    from crossalign.data.store.prepare import named_files, resolve_sources
    from crossalign.training.setup import run_is_seq2seq

    name = f"run '{run.name}' (seed {run.seed})"
    try:
        run_is_seq2seq(cfg)  # checks every objective's name and options
        sources = resolve_sources(cfg.data)
    except CrossalignError as e:
        raise CrossalignError(f"{name}: {e}; fix the study file, then run it again") from None
    for where, path in named_files(sources):
        if exists_or_made(path.resolve(), made_by_study):
            continue
        raise CrossalignError(
            f"{name}: {where} names {path}, which does not exist; fix the study file (or its "
            "overrides), then run it again"
        )


def exists_or_made(full: Path, made_by_study: Sequence[Path]) -> bool:
    """Whether the resolved path ``full`` exists or lies under something the study writes
    before its runs read it (``made_by_study``, resolved)."""
    return full.exists() or any(full.is_relative_to(m) for m in made_by_study)


def check_evaluation_inputs(
    checked: Sequence[tuple[PlannedRun, RunConfig | None, list[PlannedEval]]],
    todo: dict[Path, list[PlannedEval]],
    made_by_study: Sequence[Path],
) -> None:
    """Refuse, before any work, an evaluation still to run (``todo``: a run's ``unrecorded``
    evaluations) whose options name a file or folder (``options.read_paths``) that does not
    exist and that the study does not write first: one line naming the run, the evaluation,
    the option and the fix, so that a missing dictionary does not stop a study after its first
    run's training."""
    from crossalign.options import read_paths

    for run, _, _ in checked:
        for planned in todo[run.run_dir]:
            for option, path in read_paths(planned.options):
                if exists_or_made(Path(path).expanduser().resolve(), made_by_study):
                    continue
                name = planned.label or planned.evaluation.name
                raise CrossalignError(
                    f"run '{run.name}' (seed {run.seed}): evaluation {name}: its option "
                    f"'{option}' names {path}, which does not exist; make it first (the study "
                    "page's commands) or fix the study file, then run it again"
                )


def evaluation_options(
    evaluation: Evaluation, options: dict[str, Any], run: PlannedRun, where: str
) -> Any:
    """The built options of a study evaluation on ``run``: its variables substituted, and
    the run's seed as ``seed`` for an evaluation whose seed follows the run's
    (``Evaluation.run_seed``) unless the study sets it."""
    raw = substitute(options, run.variables, where)
    if evaluation.run_seed and "seed" not in raw:
        raw = {**raw, "seed": run.seed}
    return evaluation.build_options(raw)


def run_study(
    study: Study,
    *,
    report: bool = True,
    dry_run: bool = False,
    seeds: Sequence[int] | None = None,
    prepare_only: bool = False,
    records_dir: Path | None = None,
    only: Sequence[str] | None = None,
    prune_checkpoints: bool = False,
) -> StudyResult:
    """Derive, train and evaluate everything ``study`` lists (reusing what is done), then
    write its report to ``OUT/report`` (``crossalign report`` over its runs, plus the
    correlations). ``dry_run``: check the study and print what would be done, nothing more.
    ``seeds``: only the runs of these seeds, in the directories the whole study gives them
    (e.g. one process per seed on a machine with room for several), and no report.
    ``prepare_only``: make every derived corpus and prepare output, nothing more (what
    processes running the seeds share: ``study.parallel``). ``records_dir``: start from the
    run records it holds and copy each run's there once measured (``study.records``).
    ``only``: train and evaluate only the runs of these names, planned with the whole study
    (a measured starting model is trained again when a run of another process will continue
    from it), and no report. ``prune_checkpoints``: delete a trained run's checkpoints once
    its model is saved and every evaluation of it recorded, unless a run of ``study`` names
    them (``kept_checkpoints``)."""
    from crossalign.config import load_config
    from crossalign.data.derive.settings import DeriveSettings
    from crossalign.evals.registry import evaluations
    from crossalign.schema import build_dataclass
    from crossalign.study.records import check_same_models, keep_records

    runs = plan(study)
    if seeds is not None:
        unknown = sorted(set(seeds) - {r.seed for r in runs})
        if unknown:
            raise CrossalignError(
                f"study '{study.name}' has no seed {unknown[0]}; its seeds: "
                f"{', '.join(str(s) for s in dict.fromkeys(r.seed for r in runs))}"
            )
        runs = [r for r in runs if r.seed in seeds]
        report = False  # a report of some seeds would replace the study's
    if only is not None:
        report = False
    if report and not dry_run:  # not after hours of training
        from crossalign.extras import require

        require("matplotlib", "plots", "the study's report (or --no-report)")
    # every derive setting, run config and evaluation option is checked before any work
    check_checkpoints(study)
    derives: dict[Path, DeriveSettings] = {}
    steps: dict[Path, PreparedStep] = {}
    cell_steps: list[list[PreparedStep]] = []
    checked = []
    for run in runs:
        if study.derive is not None:
            derived = Path(run.variables["derived"])
            if derived not in derives:
                raw = substitute(study.derive.settings, run.variables, "derive.settings")
                derives[derived] = build_dataclass(DeriveSettings, raw, "derive.settings")
        mine = []
        for i, spec in enumerate(study.prepare):
            step = parse_step(spec, run.variables, f"prepare.{i}")
            if step.creates not in steps:
                steps[step.creates] = step
                mine.append(step)
        cell_steps.append(mine)
        cfg = None if run.model else load_config(write_run_config(study, run), run.overrides)
        evals = []
        for spec in study.evaluations:
            if spec.runs is not None and run.name not in spec.runs:
                continue
            evaluation = evaluations().get(spec.eval)
            where = f"evaluations.{spec.eval}.options"
            planned = PlannedEval(
                evaluation, evaluation_options(evaluation, spec.options, run, where), spec.label
            )
            evals.append(planned)
            if spec.checkpoints and cfg is not None:
                where = f"run '{run.name}': evaluations.{spec.eval}.checkpoints"
                evals += checkpoint_evals(cfg, planned, spec.checkpoints, where)
        checked.append((run, cfg, evals))
    # what the study writes before its runs read it: derived corpora, prepare outputs and
    # the run directories (a run may start from another's model)
    made_by_study = [p.resolve() for p in [*derives, *steps, *(r.run_dir for r in runs)]]
    for run, cfg, _ in checked:
        if cfg is not None:
            check_run(cfg, run, made_by_study)
    ledger = Path(study.out) / "prepared.json"
    if records_dir is not None:
        from crossalign.study.records import check_records_dir, restorable, restore_records

        run_dirs = [r.run_dir for r in runs]
        check_records_dir(records_dir, run_dirs, Path(study.out))
        if dry_run:
            found = len(restorable(run_dirs, Path(study.out), records_dir))
            print(f"--records {records_dir}: the records of {found} runs would be restored "
                  "first (not by --dry-run: the states below are without them)")  # fmt: skip
        elif not prepare_only:
            restored = restore_records(run_dirs, Path(study.out), records_dir)
            print(f"restored the records of {len(restored)} runs from {records_dir}")
    reuse = reuse_checks(checked)
    states = {run.run_dir: planned_state(run, cfg, reuse[run.run_dir]) for run, cfg, _ in checked}
    todo = {run.run_dir: unrecorded(run, states[run.run_dir], evals) for run, _, evals in checked}
    check_evaluation_inputs(checked, todo, made_by_study)
    if dry_run:
        print(describe_plan(checked, list(steps.values()), ledger, derives, states, todo))
        return StudyResult(runs=runs, records={}, report=None)
    # runs whose digests are replaced before they count: those to train, and model runs
    unsettled = {d for d, state in states.items() if state in ("as is", "train", "resume")}
    if not prepare_only:
        check_same_models(model_uses(checked, unsettled))  # records restored or left before
    # a cell whose runs all need no work (e.g. records copied without models) does not make
    # its derived corpus or prepare outputs when they are missing
    busy = set()
    for run, _, _ in checked:
        if prepare_only or states[run.run_dir] in ("train", "resume") or todo[run.run_dir]:
            busy.add(repr(run.cell))
    keep = kept_checkpoints(study) if prune_checkpoints else set()
    records: dict[Path, list[ResultRecord]] = {}
    pending: list[PreparedStep] = []  # missing outputs idle cells did not make
    for (run, cfg, evals), mine in zip(checked, cell_steps):
        idle = repr(run.cell) not in busy
        if study.derive is not None:
            derived = Path(run.variables["derived"])
            if derived in derives and (not idle or derived.exists()):
                ensure_derived(derived, derives.pop(derived))
        steps_now, pending = [*pending, *mine], []
        for step in steps_now:
            if idle and not step.creates.exists():
                pending.append(step)  # made with the next busy cell, which may share it
            else:
                ensure_prepared(step, ledger)
        if prepare_only or (only is not None and run.name not in only):
            continue
        label = " ".join([*(str(v) for v in run.cell.values()), run.name, f"seed {run.seed}"])
        if cfg is None:
            ensure_as_is(run)
        else:
            ensure_trained(cfg, label, reuse[run.run_dir])
        unsettled.discard(run.run_dir)
        # before its evaluations: a model trained again to other weights than runs measured
        # or continued from it stops the study here
        check_same_models(model_uses(checked, unsettled))
        # hypotheses, gates and contrasts judge the final models; a checkpoint's record
        # (RUN/results.jsonl and the report's curves) must not stand in for its run's
        measured = [ensure_evaluated(run, planned, label) for planned in evals]
        records[run.run_dir] = final_records(run, measured)
        if records_dir is not None:
            keep_records(run.run_dir, Path(study.out), records_dir)
        if prune_checkpoints and cfg is not None and run.run_dir not in keep:
            prune_measured(run.run_dir)
    result = StudyResult(runs=runs, records=records, report=None)
    if report and not prepare_only:
        result.report = write_study_report(study, result)
    return result


def kept_checkpoints(study: Study) -> set[Path]:
    """The run directories whose checkpoints something of ``study`` names, runs left out by
    ``select_runs`` included: another run (continued from one, an evaluation option reading
    one), a ``prepare`` step or the ``derive`` settings. ``--prune-checkpoints`` keeps them."""
    from crossalign.checkpoint import CHECKPOINTS

    everything = dataclasses.replace(study, runs=[*study.runs, *study.left_out], left_out=[])
    runs = plan(everything)
    steps = [{"command": s.command, "creates": s.creates} for s in everything.prepare]
    shared = [*steps, everything.derive.settings if everything.derive else {}]
    common = [t for run in runs for t in strings_in(substitute(shared, run.variables, "prepare"))]
    own = {id(run): run_strings(everything, run) for run in runs}
    return {
        run.run_dir
        for run in runs
        if names_dir(common, run.run_dir / CHECKPOINTS)
        or any(names_dir(own[id(o)], run.run_dir / CHECKPOINTS) for o in runs if o is not run)
    }


def prune_measured(run_dir: Path) -> None:
    """Delete the checkpoints of the measured run ``run_dir`` when its ``model/`` is saved
    (``checkpoint.remove_checkpoints``); a run whose records stand without its model keeps
    them."""
    from crossalign.checkpoint import remove_checkpoints

    if (run_dir / "model").is_dir():
        gone = remove_checkpoints(run_dir)
        if gone:
            print(f"{run_dir}: deleted its {gone} checkpoint(s); its model and records stay")


def write_study_report(study: Study, result: StudyResult) -> Path:
    """Write ``OUT/report`` for ``result``: ``crossalign report`` over the study's runs, led by
    its pre-registered hypotheses and gates judged (also printed, and written on their own as
    ``hypotheses.json``), then the tables, and the correlations and the contrasts at the end;
    returns the Markdown page."""
    from crossalign.report import write_report

    runs = result.runs
    extra = [("Correlations", correlation_section(study, result))] if study.correlate else []
    data: dict[str, Any] = {}
    lead: list[tuple[str, str]] = []
    if study.hypotheses or study.gates:
        from crossalign.study.verdicts import hypotheses_section

        section, data["hypotheses"] = hypotheses_section(study, result)
        lead.append(("Hypotheses", section))
        for h in data["hypotheses"]["hypotheses"]:
            cell = "".join(f" [{k}={v}]" for k, v in h["cell"].items())
            why = f" ({h['reason']})" if h["reason"] else ""
            print(f"hypothesis {h['name']}{cell}: {h['verdict']}{why}")
    paths = write_report(
        [r.run_dir for r in runs], Path(study.out) / "report", title=study.name,
        lead_sections=lead, extra_sections=extra, contrasts=contrast_pairs(study, runs),
        extra_json=data, extra_files={HYPOTHESES: data["hypotheses"]} if data else None,
    )  # fmt: skip
    return Path(paths.markdown)


def final_records(run: PlannedRun, records: Sequence[ResultRecord]) -> list[ResultRecord]:
    """``records`` without those of a trained run's checkpoints (``checkpoints/step-N``):
    hypotheses, gates and contrasts judge the final models. A ``model`` run's records are all
    of its model."""
    if run.model is not None:
        return list(records)
    from crossalign.checkpoint import is_checkpoint_place

    return [r for r in records if not is_checkpoint_place(r.place)]


def report_study(study: Study) -> StudyResult:
    """The study's report from the records its run directories hold, with nothing trained or
    evaluated: every run directory with a ``results.jsonl`` is read as it is, whatever options
    or version of an evaluation made its records (the latest record of each evaluation or
    label on a run's final model counts; its checkpoints' records go to the report's tables
    and curves only). For judging a study's hypotheses from records kept without models."""
    from crossalign.evals.results import RESULTS, read_results

    runs = [r for r in plan(study) if (r.run_dir / RESULTS).is_file()]
    if not runs:
        raise CrossalignError(
            f"study '{study.name}': no run directory under {study.out} holds {RESULTS}; run "
            "'crossalign compare' first"
        )
    records = {r.run_dir: final_records(r, read_results(r.run_dir)) for r in runs}
    result = StudyResult(runs=runs, records=records, report=None)
    result.report = write_study_report(study, result)
    return result
