"""``crossalign compare STUDY.yaml``: a controlled comparison of run configs at equal budget.

A study file names the runs to compare (run configs, each with overrides), the seeds, an
optional matrix of variables the runs are repeated over (e.g. one derived language per
transform), an optional derived corpus per matrix cell, commands that prepare what runs share
(a tokenizer, a co-occurrence matrix), and the evaluations to run on every model; then the
report. Everything is keyed by what it depends on, so an interrupted or
repeated study continues where it stopped: a run whose ``config.yaml`` equals the config it
would get and which holds ``model/`` is reused, and so is one whose model is gone but whose
``results.jsonl`` holds every evaluation's record (a study's records kept or moved without its
models, e.g. from a GPU machine); one with checkpoints is resumed, any other is started again;
an evaluation whose record (evaluation, version, options, label, config hash) is already in
the run's ``results.jsonl`` is not run again.

Strings in the study (configs, overrides, run_dir, evaluation options) may name variables as
``{name}`` (a name alone in braces, so YAML flow mappings such as ``{name: mlm}`` stay as they
are): ``out``, ``run`` (the run's name), ``seed``, each matrix variable, ``derived``
(the derived corpus's directory) and the study's ``vars``. A string that is exactly
``{name}`` takes the variable's value with its type (a number stays a number).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from crossalign.errors import CrossalignError

if TYPE_CHECKING:
    from crossalign.config import RunConfig
    from crossalign.evals.registry import Evaluation
    from crossalign.evals.results import ResultRecord

VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A variable reference: a name alone in braces (``{name: mlm}`` in a YAML value is not one)."""


@dataclass
class StudyRun:
    """One method of the comparison: a run config and its changes."""

    name: str
    """Its name in tables and directories."""
    config: str | None = None
    """A run config file (YAML); None: the ``inline`` config."""
    inline: dict[str, Any] = field(default_factory=dict)
    """A run config given in the study file itself (used when ``config`` is None)."""
    overrides: list[str] = field(default_factory=list)
    """``key=value`` changes to its config (after the study's ``overrides``)."""
    optional: bool = False
    """Run only when named in ``--runs`` (a variant kept beside the study's methods)."""
    seeds: list[int] | None = None
    """Its own seeds instead of the study's, e.g. ``[0]`` for a starting model that the other
    runs continue from (``model.path: "{out}/runs/base/model"``; list it first)."""
    model: str | None = None
    """A model evaluated as it is, not trained (instead of ``config``/``inline``): e.g. the
    pretrained model the other runs continue from, so the report shows what training changed.
    It is evaluated once (its ``seeds``, else the study's first seed); its run directory gets
    a ``config.yaml`` naming it (``train.steps: 0``) and its records."""


@dataclass
class StudyEval:
    """One evaluation run on every model."""

    eval: str
    """A registered evaluation (``crossalign ls evaluations``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Its options (as ``crossalign eval NAME key=value``)."""
    label: str | None = None
    """A name for its records when one evaluation runs twice with other options."""
    runs: list[str] | None = None
    """The runs it measures (None: every run), e.g. BLEU on the translation models only, not
    on the encoders they start from."""


@dataclass
class StudyStep:
    """A crossalign command run before the runs of each matrix cell, e.g. a tokenizer the runs
    share or a co-occurrence matrix counted with it. It is skipped when ``creates`` exists and
    ``OUT/prepared.json`` records that the same command made it."""

    command: str
    """A crossalign command line without the program name, split like a shell line, e.g.
    ``data tokenizer --config c.yaml --out {out}/tokenizer``."""
    creates: str
    """The file or directory the command writes."""


@dataclass
class StudyDerive:
    """A derived-language corpus written before the runs of each matrix cell
    (``crossalign data derive``); its directory is the variable ``{derived}``."""

    out: str
    """Its directory."""
    settings: dict[str, Any] = field(default_factory=dict)
    """``DeriveSettings`` fields (transform, corpus, overlap, ...)."""


@dataclass
class Study:
    """A study file (``configs/studies/*.yaml``)."""

    name: str
    """Its name (the report's title)."""
    out: str
    """Directory of its runs, configs and report."""
    runs: list[StudyRun]
    """The methods compared."""
    extends: str | None = None
    """Another study file (relative to this one) that this file changes: its mappings are
    merged key by key, other values (lists included) replaced."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Each run is trained once per seed (``train.seed``)."""
    matrix: dict[str, list[Any]] = field(default_factory=dict)
    """Variables every run is repeated over, e.g. ``transform: [trans, trans+inv]``."""
    vars: dict[str, Any] = field(default_factory=dict)
    """Other variables the study's strings name (e.g. the budget)."""
    overrides: list[str] = field(default_factory=list)
    """``key=value`` changes to every run's config (the shared budget)."""
    run_dir: str = "{out}/runs/{run}"
    """Directory of each run; must name every matrix variable. With several seeds and no
    ``{seed}`` in it, each seed's run goes to ``RUN_DIR/seed-N``."""
    derive: StudyDerive | None = None
    """A derived corpus per matrix cell."""
    prepare: list[StudyStep] = field(default_factory=list)
    """Commands run in order before each cell's runs (after its derived corpus); a step whose
    ``creates`` another cell already made is not repeated."""
    shared: dict[str, Any] = field(default_factory=dict)
    """Not read: a home for YAML anchors the runs' inline configs merge (``<<: *shared``)."""
    evaluations: list[StudyEval] = field(default_factory=list)
    """Evaluations run on every finished model."""
    select: list[str] | None = None
    """The runs ``compare`` runs when ``--runs`` is not given, in this order (optional ones
    included); None: every run not ``optional``. Lets a file that ``extends`` another pick
    its runs."""
    correlate: list[list[str]] = field(default_factory=list)
    """Pairs of metrics (``eval.metric`` or ``label.metric``) whose Spearman ρ over all
    runs the report shows."""
    contrast: list[list[str]] = field(default_factory=list)
    """Pairs of runs ``[baseline, method]``: the report lists the measures on which the
    method is better or worse than the baseline beyond seed noise (95% intervals apart over
    the seeds), with Welch's p."""


@dataclass
class PlannedRun:
    """One run of an expanded study."""

    name: str
    seed: int
    cell: dict[str, Any]
    """The matrix variables of its cell."""
    variables: dict[str, Any]
    run_dir: Path
    config_path: Path
    overrides: list[str]
    model: Path | None = None
    """The model a ``model`` run evaluates as it is (None: the run trains ``RUN_DIR/model``)."""

    @property
    def model_dir(self) -> Path:
        """The model its evaluations measure."""
        return self.model if self.model is not None else self.run_dir / "model"


def merge(base: Any, change: Any) -> Any:
    """``change`` laid over ``base``: mappings merged key by key (recursively), anything else
    (lists, values) replaced."""
    if isinstance(base, dict) and isinstance(change, dict):
        return {**base, **{k: merge(base.get(k), v) for k, v in change.items()}}
    return change


def _read_study(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A study file's data with its ``extends`` chain resolved (paths relative to the file
    that names them); a missing file or a chain that comes back to a file is an error."""
    from crossalign.schema import parse_yaml

    if not path.is_file():
        named = f" (extended by {seen[-1]})" if seen else ""
        raise CrossalignError(f"study file {path} does not exist{named}")
    if path.resolve() in seen:
        raise CrossalignError(f"{path}: 'extends' comes back to this file; break the chain")
    data = parse_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
    if not isinstance(data, dict):
        raise CrossalignError(f"{path}: the top level must be a mapping of keys")
    parent = data.get("extends")
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise CrossalignError(f"{path}: extends must be a file path, got {parent!r}")
    base = _read_study(path.parent / parent, (*seen, path.resolve()))
    return {**merge(base, {k: v for k, v in data.items() if k != "extends"}), "extends": parent}


def load_study(path: str | Path, overrides: Sequence[str] = ()) -> Study:
    """Read a study file (with the file it ``extends``) and apply ``key=value`` overrides to
    it (``seeds=[0,1,2]``, ``vars.steps=2000``, ``out=runs/x``); errors name the file or key."""
    from crossalign.schema import apply_override, build_dataclass

    path = Path(path)
    data = _read_study(path)
    for item in overrides:
        apply_override(data, item, Study)
    study = build_dataclass(Study, data, "")
    _check(study, path)
    return study


def select_runs(study: Study, names: Sequence[str] | None) -> Study:
    """Keep the runs named in ``names``, in that order (None: the study's ``select``, else
    every run not ``optional``); an unknown name is an error naming the study's runs."""
    from crossalign.registry import did_you_mean

    names = study.select if names is None else names
    if names is None:
        study.runs = [r for r in study.runs if not r.optional]
        return study
    runs = {r.name: r for r in study.runs}
    for name in names:
        if name not in runs:
            raise CrossalignError(
                f"study '{study.name}' has no run '{name}'{did_you_mean(name, list(runs))}; "
                f"its runs: {', '.join(runs)}"
            )
    study.runs = [runs[name] for name in names]
    return study


def _check(study: Study, path: Path) -> None:
    """Refuse a study whose runs would share a directory or that names nothing to run."""
    if not study.runs:
        raise CrossalignError(f"{path}: 'runs' is empty; list the run configs to compare")
    if not study.seeds:
        raise CrossalignError(f"{path}: 'seeds' is empty; give at least one, e.g. seeds: [0]")
    names = [r.name for r in study.runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CrossalignError(f"{path}: run name '{twice[0]}' is used twice; names must differ")
    for r in study.runs:
        given = [k for k in ("config", "inline", "model") if getattr(r, k)]
        if len(given) != 1:
            raise CrossalignError(
                f"{path}: run '{r.name}' needs one of 'config' (a file), 'inline' or 'model' "
                f"(a model evaluated as it is), got {' and '.join(given) or 'none'}"
            )
        if r.seeds is not None and not r.seeds:
            raise CrossalignError(f"{path}: run '{r.name}' has empty 'seeds'; give one or drop it")
    for i, pair in enumerate(study.contrast):
        if len(pair) != 2:
            raise CrossalignError(f"{path}: contrast.{i} must be [baseline, method], got {pair!r}")
        unknown = [name for name in pair if name not in names]
        if unknown:
            raise CrossalignError(
                f"{path}: contrast.{i} names run '{unknown[0]}', which the study does not "
                f"have; its runs: {', '.join(names)}"
            )
    for i, spec in enumerate(study.evaluations):
        unknown = sorted(set(spec.runs or ()) - set(names))
        if unknown:
            raise CrossalignError(
                f"{path}: evaluations.{i} ({spec.eval}) names run '{unknown[0]}', which the "
                f"study does not have; its runs: {', '.join(names)}"
            )
    fields = set(VARIABLE.findall(study.run_dir))
    needed = {"run", *study.matrix}
    missing = sorted(needed - fields)
    if missing:
        raise CrossalignError(
            f"{path}: run_dir '{study.run_dir}' must contain {{{missing[0]}}}, or runs would "
            f"share a directory"
        )


def substitute(value: Any, variables: Mapping[str, Any], where: str) -> Any:
    """``value`` with ``{name}`` replaced in every string (recursively through lists and
    mappings); a string that is exactly ``{name}`` takes the value itself. An unknown name
    is an error naming ``where`` and the known ones."""
    if isinstance(value, dict):
        return {k: substitute(v, variables, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, variables, f"{where}.{i}") for i, v in enumerate(value)]
    if not isinstance(value, str) or "{" not in value:
        return value
    names = VARIABLE.findall(value)
    unknown = [n for n in names if n not in variables]
    if unknown:
        raise CrossalignError(
            f"{where}: '{value}' names {{{unknown[0]}}}, which the study does not define; "
            f"known: {', '.join(sorted(variables))}"
        )
    if len(names) == 1 and value == "{" + names[0] + "}":
        return variables[names[0]]
    return VARIABLE.sub(lambda m: str(variables[m.group(1)]), value)


def cells(study: Study) -> list[dict[str, Any]]:
    """Every combination of the matrix variables, in the order given ([{}] without one)."""
    keys = list(study.matrix)
    return [dict(zip(keys, combo)) for combo in itertools.product(*study.matrix.values())]


def plan(study: Study) -> list[PlannedRun]:
    """Every (cell × seed × run) of the study with its variables, directory and overrides, in
    that nesting order: a cell's runs are trained together, every run of a seed before the
    next seed (so an interrupted study has whole comparisons of its first seeds)."""
    planned = []
    every_seed = list(
        dict.fromkeys([*study.seeds, *(s for r in study.runs for s in r.seeds or [])])
    )
    for cell in cells(study):
        base = {**study.vars, "out": study.out, **cell}
        if study.derive is not None:
            base["derived"] = substitute(study.derive.out, base, "derive.out")
        for seed, run in itertools.product(every_seed, study.runs):
            seeds = run.seeds or (study.seeds[:1] if run.model else study.seeds)
            if seed in seeds:
                variables = {**base, "run": run.name, "seed": seed}
                run_dir = Path(substitute(study.run_dir, variables, "run_dir"))
                if len(seeds) > 1 and "{seed}" not in study.run_dir:
                    run_dir = run_dir / f"seed-{seed}"
                tag = "-".join(str(v) for v in cell.values())
                stem = f"{tag}-{run.name}" if tag else run.name
                suffix = f"-seed{seed}" if len(seeds) > 1 else ""
                overrides = [
                    *substitute(study.overrides, variables, "overrides"),
                    *substitute(run.overrides, variables, f"runs.{run.name}.overrides"),
                    f"run_dir={run_dir}",
                    f"train.seed={seed}",
                ]
                model = substitute(run.model, variables, f"runs.{run.name}.model")
                planned.append(
                    PlannedRun(
                        name=run.name,
                        seed=seed,
                        cell=cell,
                        variables=variables,
                        run_dir=run_dir,
                        config_path=Path(study.out) / "configs" / f"{stem}{suffix}.yaml",
                        overrides=overrides,
                        model=None if model is None else Path(model),
                    )
                )
    return planned


def write_run_config(study: Study, run: PlannedRun) -> Path:
    """Write the run's config (the file or inline config, variables substituted) to its
    ``config_path`` and return the path; overrides are applied when it is loaded."""
    from crossalign.fileio import write_text_atomic

    spec = next(r for r in study.runs if r.name == run.name)
    if spec.config is not None:
        source = Path(substitute(spec.config, run.variables, f"runs.{spec.name}.config"))
        if not source.is_file():
            raise CrossalignError(f"study run '{spec.name}': config file {source} does not exist")
        from crossalign.schema import parse_yaml

        raw = parse_yaml(source.read_text(encoding="utf-8"), str(source)) or {}
    else:
        raw = spec.inline
    body = substitute(raw, run.variables, f"runs.{spec.name}")
    write_text_atomic(run.config_path, yaml.safe_dump(body, sort_keys=False))
    return run.config_path


def derived_is_written(out: Path, settings: Any) -> bool:
    """Whether ``out`` holds the derived corpus ``settings`` describes (its card's
    ``command`` is the same)."""
    from crossalign.data.corpus import load_card

    command = settings.command_line(str(out))
    return (out / "card.json").is_file() and load_card(out).get("command") == command


def ensure_derived(out: Path, settings: Any) -> None:
    """Write the derived corpus ``settings`` describes to ``out`` unless ``derived_is_written``."""
    from crossalign.data.derive import write_derived

    if derived_is_written(out, settings):
        print(f"derived corpus: {out} (already written)")
        return
    write_derived(out, settings, settings.command_line(str(out)))


@dataclass
class PreparedStep:
    """A ``prepare`` step with its variables substituted and its command line parsed."""

    command: str
    argv: list[str]
    creates: Path
    args: Any
    """The parsed command line (its ``func`` runs it)."""


def parse_step(step: StudyStep, variables: Mapping[str, Any], where: str) -> PreparedStep:
    """``step`` with ``variables`` substituted, its command line parsed by crossalign's own
    parser (an unknown command or option is an error here, before any work)."""
    import shlex

    from crossalign.cli import build_parser

    command = substitute(step.command, variables, f"{where}.command")
    creates = Path(substitute(step.creates, variables, f"{where}.creates"))
    argv = shlex.split(command)
    if argv[:1] == ["crossalign"]:
        argv = argv[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        raise CrossalignError(
            f"{where}: '{command}' is not a crossalign command line (see the message above)"
        ) from None
    return PreparedStep(command=shlex.join(argv), argv=argv, creates=creates, args=args)


def _ledger(path: Path) -> dict[str, str]:
    """The prepare ledger ``OUT/prepared.json``: output path → the command that made it."""
    import json

    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def is_made(step: PreparedStep, ledger: Path) -> bool:
    """Whether ``step.creates`` exists and ``ledger`` records that the same command made it."""
    return step.creates.exists() and _ledger(ledger).get(str(step.creates)) == step.command


def ensure_prepared(step: PreparedStep, ledger: Path) -> None:
    """Run ``step`` unless ``is_made``; record it in ``ledger`` after it succeeds."""
    from crossalign.fileio import write_json_atomic

    key = str(step.creates)
    if is_made(step, ledger):
        print(f"prepared: {key} (already made by 'crossalign {step.command}')")
        return
    print(f"== crossalign {step.command}")
    status = step.args.func(step.args)
    if status:
        raise CrossalignError(f"'crossalign {step.command}' failed (exit status {status})")
    if not step.creates.exists():
        raise CrossalignError(
            f"'crossalign {step.command}' did not write {key}; fix the step's 'creates'"
        )
    write_json_atomic(ledger, {**_ledger(ledger), key: step.command})


def run_state(cfg: RunConfig, evals: Sequence[tuple[Evaluation, Any, str | None]] = ()) -> str:
    """What ``ensure_trained`` does with ``cfg``: ``done`` (its run directory holds a finished
    run of the same resolved config), ``measured`` (the same config, its model gone, but
    ``results.jsonl`` holds a record of every one of ``evals``: a study's records kept or moved
    without its models), ``resume`` (checkpoints of that config) or ``train``."""
    from crossalign.checkpoint import CONFIG, list_checkpoints
    from crossalign.evals.results import find_record, read_results
    from crossalign.objective_options import normalise_saved, run_config_dict

    run_dir = Path(cfg.run_dir)
    saved = run_dir / CONFIG
    same = saved.is_file() and normalise_saved(
        yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
    ) == run_config_dict(cfg)
    if same and (run_dir / "model").is_dir():
        return "done"
    if same and evals:
        records = read_results(run_dir)
        model = run_dir / "model"
        if all(find_record(records, e, model, opts, label) for e, opts, label in evals):
            return "measured"
    return "resume" if same and list_checkpoints(run_dir) else "train"


def reuse_checks(
    checked: Sequence[tuple[PlannedRun, RunConfig | None, list]],
) -> dict[Path, list]:
    """Per run directory, the evaluations whose records let ``run_state`` reuse a run without
    its model (``measured``): none for a run whose ``model/`` a run that will train starts
    from (``model.path``), so that it is trained again first — through chains of such runs."""
    keep = {run.run_dir: list(evals) for run, _, evals in checked}
    while True:
        training = [
            cfg for run, cfg, _ in checked
            if cfg is not None and run_state(cfg, keep[run.run_dir]) in ("train", "resume")
        ]  # fmt: skip
        needed = {Path(c.model.path).resolve() for c in training if c.model.path}
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


def unrecorded(run: PlannedRun, state: str, evals: list) -> int:
    """How many of ``evals`` the run in ``state`` still has to run: those without a record
    in its ``results.jsonl`` when it is reused (``done``, ``measured``, ``as is``), else all."""
    from crossalign.evals.results import find_record, read_results

    records = read_results(run.run_dir) if state in ("done", "measured", "as is") else []
    return sum(find_record(records, e, run.model_dir, o, label) is None for e, o, label in evals)


def ensure_trained(
    cfg: RunConfig, label: str, evals: Sequence[tuple[Evaluation, Any, str | None]] = ()
) -> Path:
    """Train the run ``cfg`` describes unless ``run_state`` finds it finished (``done``) or
    measured by every one of ``evals`` (``measured``): a run directory whose ``config.yaml``
    equals it and holds ``model/`` or all those records is reused, one with checkpoints is
    resumed, anything else is started again (``--overwrite``). Returns ``run_dir``."""
    from crossalign.training import train

    state = run_state(cfg, evals)
    if state not in ("done", "measured"):
        print(f"== pre-training {label} ({cfg.train.steps} steps)")
        resume = state == "resume"
        train(cfg, resume="last" if resume else None, overwrite=not resume)
    return Path(cfg.run_dir)


def ensure_as_is(run: PlannedRun) -> None:
    """The run directory of a ``model`` run: its ``config.yaml`` names the model and
    ``train.steps: 0`` (so a report tells it from the trained runs); a missing model is an
    error naming the run."""
    from crossalign.checkpoint import CONFIG
    from crossalign.fileio import write_text_atomic

    assert run.model is not None
    if not run.model.exists():
        raise CrossalignError(
            f"study run '{run.name}': model {run.model} does not exist; create it first or "
            f"fix the run's 'model'"
        )
    config = {"model": {"path": str(run.model)}, "train": {"steps": 0}}
    write_text_atomic(run.run_dir / CONFIG, yaml.safe_dump(config, sort_keys=False))


def ensure_evaluated(
    run: PlannedRun, evaluation: Evaluation, opts: Any, spec_label: str | None, label: str
) -> ResultRecord:
    """The record of ``evaluation`` with built options ``opts`` (and record label
    ``spec_label``) on the run's model: read from ``RUN/results.jsonl`` when the same
    measurement is there, else measured and appended there."""
    from crossalign.evals.results import RESULTS, find_record, read_results, run_evaluation

    found = find_record(read_results(run.run_dir), evaluation, run.model_dir, opts, spec_label)
    if found is not None:
        return found
    print(f"== evaluating {label}: {spec_label or evaluation.name}")
    record, _ = run_evaluation(
        evaluation, run.model_dir, opts, results=run.run_dir / RESULTS, label=spec_label
    )
    return record


@dataclass
class StudyResult:
    """What a study produced."""

    runs: list[PlannedRun]
    records: dict[Path, list[ResultRecord]]
    """The study's result records per run directory."""
    report: Path | None


def run_metrics(records: Sequence[ResultRecord]) -> dict[str, float]:
    """A run's metrics keyed ``eval.metric`` (``label.metric`` for labelled records)."""
    out = {}
    for record in records:
        for key, value in record.metrics.items():
            out[f"{record.label or record.eval}.{key}"] = value
    return out


def contrast_pairs(study: Study, runs: Sequence[PlannedRun]) -> list[tuple[list[Path], list[Path]]]:
    """The study's ``contrast`` pairs as run directories, per matrix cell: (the baseline's
    runs, the method's runs) of each cell where ``runs`` has both."""
    out = []
    for baseline, method in study.contrast:
        for cell in cells(study):
            sides = [[r.run_dir for r in runs if r.name == n and r.cell == cell] for n in
                     (baseline, method)]  # fmt: skip
            if all(sides):
                out.append((sides[0], sides[1]))
    return out


def correlation_section(study: Study, result: StudyResult) -> str:
    """Markdown: Spearman's ρ (and p) of each ``correlate`` pair over every run."""
    from crossalign.stats import spearman

    lines = ["| x | y | runs | ρ | p |", "|---|---|---:|---:|---:|"]
    per_run = [run_metrics(result.records[r.run_dir]) for r in result.runs]
    for x, y in study.correlate:
        points = [(m[x], m[y]) for m in per_run if x in m and y in m]
        rho, p = spearman([a for a, _ in points], [b for _, b in points])
        cell = ("n/a", "n/a") if math.isnan(rho) else (f"{rho:.2f}", f"{p:.2g}")
        lines.append(f"| {x} | {y} | {len(points)} | {cell[0]} | {cell[1]} |")
    return "\n".join(lines)


def describe_plan(
    checked: Sequence[tuple[PlannedRun, RunConfig | None, list]],
    steps: Sequence[PreparedStep],
    ledger: Path,
    derives: Mapping[Path, Any],
    reuse: Mapping[Path, list],
) -> str:
    """The lines ``--dry-run`` prints: each derived corpus, prepare step and run with what
    would be done (made / to run; done / measured / resume / train, and how many evaluations
    are still to run)."""

    lines = []
    for out, settings in derives.items():
        state = "made" if derived_is_written(out, settings) else "to run"
        lines.append(f"derive   {state:7} {out}")
    for step in steps:
        state = "made" if is_made(step, ledger) else "to run"
        lines.append(f"prepare  {state:7} crossalign {step.command}")
    for run, cfg, evals in checked:
        state = planned_state(run, cfg, reuse[run.run_dir])
        todo = unrecorded(run, state, evals)
        steps = 0 if cfg is None else cfg.train.steps
        lines.append(
            f"run      {state:7} {run.run_dir}  ({steps} steps; "
            f"{todo} of {len(evals)} evaluations to run)"
        )
    return "\n".join(lines)


def run_compare(
    study: Study,
    *,
    report: bool = True,
    dry_run: bool = False,
    seeds: Sequence[int] | None = None,
) -> StudyResult:
    """Derive, train and evaluate everything ``study`` lists (reusing what is done), then
    write its report to ``OUT/report`` (``crossalign report`` over its runs, plus the
    correlations). ``dry_run``: check the study and print what would be done, nothing more.
    ``seeds``: only the runs of these seeds, in the directories the whole study gives them
    (e.g. one process per seed on a machine with room for several), and no report."""
    from crossalign.config import load_config
    from crossalign.data.derive_settings import DeriveSettings
    from crossalign.evals.registry import evaluations
    from crossalign.schema import build_dataclass

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
    if report and not dry_run:  # not after hours of training
        from crossalign.extras import require

        require("matplotlib", "plots", "the study's report (or --no-report)")
    # every derive setting, run config and evaluation option is checked before any work
    derives: dict[Path, DeriveSettings] = {}
    steps: dict[Path, PreparedStep] = {}
    cell_steps: list[list[PreparedStep]] = []
    checked = []
    for run in runs:
        if study.derive is not None:
            out = Path(run.variables["derived"])
            if out not in derives:
                raw = substitute(study.derive.settings, run.variables, "derive.settings")
                derives[out] = build_dataclass(DeriveSettings, raw, "derive.settings")
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
            opts = evaluation.build_options(substitute(spec.options, run.variables, where))
            evals.append((evaluation, opts, spec.label))
        checked.append((run, cfg, evals))
    ledger = Path(study.out) / "prepared.json"
    reuse = reuse_checks(checked)
    if dry_run:
        print(describe_plan(checked, list(steps.values()), ledger, derives, reuse))
        return StudyResult(runs=runs, records={}, report=None)
    # a cell whose runs all need no work (e.g. records copied without models) does not make
    # its derived corpus or prepare outputs when they are missing
    busy = set()
    for run, cfg, evals in checked:
        state = planned_state(run, cfg, reuse[run.run_dir])
        if state in ("train", "resume") or unrecorded(run, state, evals):
            busy.add(repr(run.cell))
    records: dict[Path, list[ResultRecord]] = {}
    pending: list[PreparedStep] = []  # missing outputs idle cells did not make
    for (run, cfg, evals), mine in zip(checked, cell_steps):
        idle = repr(run.cell) not in busy
        if study.derive is not None:
            out = Path(run.variables["derived"])
            if out in derives and (not idle or out.exists()):
                ensure_derived(out, derives.pop(out))
        steps_now, pending = [*pending, *mine], []
        for step in steps_now:
            if idle and not step.creates.exists():
                pending.append(step)  # made with the next busy cell, which may share it
            else:
                ensure_prepared(step, ledger)
        label = " ".join([*(str(v) for v in run.cell.values()), run.name, f"seed {run.seed}"])
        if cfg is None:
            ensure_as_is(run)
        else:
            ensure_trained(cfg, label, reuse[run.run_dir])
        records[run.run_dir] = [
            ensure_evaluated(run, evaluation, opts, spec_label, label)
            for evaluation, opts, spec_label in evals
        ]
    result = StudyResult(runs=runs, records=records, report=None)
    if report:
        from crossalign.report import write_report

        extra = [("Correlations", correlation_section(study, result))] if study.correlate else []
        pairs = contrast_pairs(study, runs)
        paths = write_report(
            [r.run_dir for r in runs], Path(study.out) / "report", title=study.name,
            extra_sections=extra, contrasts=pairs,
        )  # fmt: skip
        result.report = Path(paths.markdown)
    return result
