"""Study files (``configs/studies/*.yaml``): their schema, variables and expansion into runs.

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
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crossalign.errors import CrossalignError
from crossalign.study.hypotheses import Gate, Hypothesis, check_spec

VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A variable in a study string: a name alone in braces."""


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
    checkpoints: list[int] = field(default_factory=list)
    """Steps of each trained run's checkpoints measured as well as its final model: a
    learning curve, e.g. zero-shot transfer against pre-training steps. Each must be a
    multiple of the run's ``train.save_every`` below ``train.steps``, and
    ``train.keep_checkpoints`` must keep it; ``model`` runs have none. The report draws each
    metric against the step."""


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
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """Each run is trained once per seed (``train.seed``); five by default, so that a
    difference between runs can be told from seed noise. Evaluations that fine-tune
    (``transfer``) take the run's seed unless the study sets theirs."""
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
    hypotheses: list[Hypothesis] = field(default_factory=list)
    """The pre-registered hypotheses (``crossalign.study.hypotheses``): committed before the
    runs that test them; the report judges each MET, NOT MET or INCONCLUSIVE."""
    gates: list[Gate] = field(default_factory=list)
    """Competence conditions the runs must meet for the hypotheses to be judged."""
    files: list[str] = field(default_factory=list)
    """Set by ``load_study``, not read from the file: the study file and the files it
    extends (the report names the commit of each)."""
    left_out: list[StudyRun] = field(default_factory=list)
    """Set by ``select_runs``, not read from the file: the runs it left out (what they read
    still counts: ``run.kept_checkpoints``)."""


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
    that names them; ``files`` lists them, this file first); a missing file or a chain that
    comes back to a file is an error."""
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
        return {**data, "files": [str(path)]}
    if not isinstance(parent, str):
        raise CrossalignError(f"{path}: extends must be a file path, got {parent!r}")
    base = _read_study(path.parent / parent, (*seen, path.resolve()))
    merged = merge(base, {k: v for k, v in data.items() if k != "extends"})
    return {**merged, "extends": parent, "files": [str(path), *base["files"]]}


def read_study_data(path: str | Path) -> dict[str, Any]:
    """A study file's raw data, its ``extends`` chain merged (``files`` lists the files); the
    errors of ``load_study``."""
    return _read_study(Path(path))


NOT_JUDGED = ("name", "files", "extends", "shared", "contrast", "correlate")
"""Study keys no hypothesis or gate depends on (``verdict_design``): the title, where the
files are, YAML anchors (already merged into the runs), and the exploratory report sections."""


def verdict_design(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a study's verdicts depend on (``read_study_data``'s data): everything but
    ``NOT_JUDGED`` and the evaluations that no hypothesis or gate reads a measure of (by
    label, else by evaluation name: ``bli_de.words`` reads the one labelled ``bli_de``). Two
    versions of a study file with equal designs test the same hypotheses the same way; one
    that only adds an exploratory evaluation keeps its design."""
    judged = [*(data.get("hypotheses") or []), *(data.get("gates") or [])]
    read = [
        str(measure)
        for item in judged
        if isinstance(item, Mapping)
        for measure in (item.get("measures") or {}).values()
    ]

    def is_read(key: Any) -> bool:  # a measure is KEY.METRIC (a label may hold dots)
        return any(m.startswith(f"{key}.") for m in read)

    evaluations = [
        e
        for e in data.get("evaluations") or []
        if not isinstance(e, Mapping) or is_read(e.get("label") or e.get("eval"))
    ]
    kept = {k: v for k, v in data.items() if k not in NOT_JUDGED}
    return {**kept, "evaluations": evaluations}


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
        kept = [r for r in study.runs if not r.optional]
    else:
        runs = {r.name: r for r in study.runs}
        for name in names:
            if name not in runs:
                raise CrossalignError(
                    f"study '{study.name}' has no run '{name}'{did_you_mean(name, list(runs))};"
                    f" its runs: {', '.join(runs)}"
                )
        kept = [runs[name] for name in names]
    study.left_out = [*study.left_out, *(r for r in study.runs if r not in kept)]
    study.runs = kept
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
        bad = [s for s in spec.checkpoints if type(s) is not int or s < 1]
        if bad or len(set(spec.checkpoints)) != len(spec.checkpoints):
            raise CrossalignError(
                f"{path}: evaluations.{i} ({spec.eval}) checkpoints must be distinct steps "
                f">= 1, got {spec.checkpoints!r}"
            )
    try:
        check_spec(study.hypotheses, study.gates, names)
    except CrossalignError as e:
        raise CrossalignError(f"{path}: {e}") from None
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


def run_config_body(study: Study, run: PlannedRun) -> dict[str, Any]:
    """The run's config as ``write_run_config`` writes it: its file or inline config with the
    run's variables substituted (overrides not applied)."""
    from crossalign.schema import parse_yaml

    spec = next(r for r in study.runs if r.name == run.name)
    if spec.config is None:
        return substitute(spec.inline, run.variables, f"runs.{spec.name}")
    source = Path(substitute(spec.config, run.variables, f"runs.{spec.name}.config"))
    if not source.is_file():
        raise CrossalignError(f"study run '{spec.name}': config file {source} does not exist")
    raw = parse_yaml(source.read_text(encoding="utf-8"), str(source)) or {}
    return substitute(raw, run.variables, f"runs.{spec.name}")


def write_run_config(study: Study, run: PlannedRun) -> Path:
    """Write the run's config (the file or inline config, variables substituted) to its
    ``config_path`` and return the path; overrides are applied when it is loaded."""
    from crossalign.fileio import write_text_atomic

    body = run_config_body(study, run)
    write_text_atomic(run.config_path, yaml.safe_dump(body, sort_keys=False))
    return run.config_path


def run_strings(study: Study, run: PlannedRun) -> list[str]:
    """Every string ``run`` is given: its config's, its overrides (but its own ``run_dir``),
    the model it evaluates as it is and the options of the evaluations it gets (variables
    substituted); ``names_dir`` searches them for another run's directory."""
    texts = [*strings_in(run_config_body(study, run)), str(run.model or "")]
    texts += [o for o in run.overrides if not o.startswith("run_dir=")]
    for i, spec in enumerate(study.evaluations):
        if spec.runs is None or run.name in spec.runs:
            texts += strings_in(substitute(spec.options, run.variables, f"evaluations.{i}.options"))
    return texts


def names_dir(texts: Sequence[str], run_dir: Path) -> bool:
    """Whether one of ``texts`` (``run_strings``) names ``run_dir`` as a path or the start of
    one (e.g. ``model.path: "{out}/runs/mlm/seed-{seed}/model"``), relative or absolute, with
    repeated or ``./`` separators (``--out runs/x/`` gives ``runs/x//runs/mlm``), not a
    longer name that starts like it (``runs/mlm_x`` for ``runs/mlm``)."""
    forms = {os.path.normpath(run_dir), os.path.abspath(run_dir)}
    paths = [re.compile(re.escape(form) + r"(?![\w.-])") for form in forms]
    cleaned = [re.sub(r"/(?:\./)+", "/", re.sub(r"/{2,}", "/", text)) for text in texts]
    return any(path.search(text) for path in paths for text in cleaned)


def strings_in(value: Any) -> list[str]:
    """Every string in ``value``, through nested mappings and lists."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return [value] if isinstance(value, str) else []
