"""Read run directories and aggregate them for a report: runs whose configs differ only in
``train.seed`` (and ``run_dir``, and the seed standing alone in a path: ``seed-{seed}``) form
a group; each evaluation's records become one table per
(evaluation, label, version, options, model), one row per group (and layer or bin) holding the
mean ± 95% t interval over the group's runs, the best value of each metric marked."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crossalign.checkpoint import CONFIG
from crossalign.errors import CrossalignError
from crossalign.evals.registry import (
    Evaluation,
    Metric,
    evaluations,
    option_defaults,
    split_key,
)
from crossalign.evals.results import RESULTS, ResultRecord, read_results
from crossalign.report.tables import CI
from crossalign.run_dir import METRICS, flatten, read_metrics
from crossalign.stats import t_interval

SEED_KEYS = frozenset({"train.seed", "run_dir"})
"""Flattened config keys in which the runs of one group may differ."""
SEPARATORS = "-_./ ="
ABSENT = "(absent)"
RUN_SEED = "(the run's)"
"""A run-seeded evaluation's ``seed`` option where it is the run's own seed."""

Lookup = Callable[[str], Evaluation | None]
"""The declaration of an evaluation by name, None when it is unknown."""


def registered(name: str) -> Evaluation | None:
    """The evaluation registered as ``name`` (the catalog loaded), None when there is none."""
    registry = evaluations()
    return registry.get(name) if name in registry.names() else None


@dataclass
class Run:
    """One run directory as read."""

    path: Path
    """As given."""
    label: str
    """The shortest trailing part of its path that tells it from the other runs."""
    flat: dict[str, Any]
    """Its ``config.yaml``, flattened (``train.seed``)."""
    metrics: list[dict[str, Any]]
    """The lines of its ``metrics.jsonl``."""
    results: list[ResultRecord]
    """The records of its ``results.jsonl``, in file order."""

    @property
    def seed(self) -> Any:
        """Its ``train.seed`` (None when the config has none)."""
        return self.flat.get("train.seed")


@dataclass
class Group:
    """Runs whose configs differ only in the seed."""

    label: str
    runs: list[Run]


@dataclass
class Cell:
    """One metric of one group: the mean over its runs and the 95% t half-width (None for a
    single run)."""

    mean: float
    half_width: float | None
    values: list[float]
    best: bool = False


@dataclass
class Row:
    """One group's values in a table, for one layer or bin (``prefix``; "" when none)."""

    group: Group
    prefix: str
    n: int
    """How many of the group's runs have a record in this table."""
    cells: dict[str, Cell]
    """By base metric name."""


@dataclass
class Table:
    """The records of one evaluation with one set of options, across the groups."""

    eval: str
    label: str | None
    version: Any
    options: dict[str, Any]
    model: str | None
    """The model evaluated, relative to its run (``model``, ``checkpoints/step-500``); None
    for an evaluation without a model."""
    evaluation: Evaluation | None
    """Its declaration; None for an evaluation the registry does not know."""
    metrics: dict[str, Metric] = field(default_factory=dict)
    """By base name, in the evaluation's declared order."""
    rows: list[Row] = field(default_factory=list)
    title: str = ""
    measure: str = ""
    """The title without the model: what the tables of one measurement on several models
    (a run's checkpoints and final model) share."""

    @property
    def name(self) -> str:
        """What it is reported as: the label, else the evaluation's name."""
        return self.label or self.eval

    def columns(self) -> dict[str, Metric]:
        """The metrics shown as columns: a ``<metric>_ci95`` half-width joins its metric's
        column (``tables.CI``)."""
        return {
            b: m
            for b, m in self.metrics.items()
            if not (b.endswith(CI) and b.removesuffix(CI) in self.metrics)
        }


@dataclass
class Collection:
    """Everything a report shows, as numbers."""

    runs: list[Run]
    groups: list[Group]
    tables: list[Table]
    differences: dict[str, dict[str, Any]]
    """Flattened config keys (``run_dir`` aside) whose values differ across the runs:
    ``{key: {run label: value}}``."""
    warnings: list[str] = field(default_factory=list)
    """What the reader should know before trusting the numbers (``identical_runs``)."""


def read_run(path: str | Path) -> Run:
    """Read one run directory (its label is filled in by ``collect``). No ``config.yaml``, or
    neither training metrics nor result records, is an error naming it."""
    path = Path(path)
    config_path = path / CONFIG
    if not config_path.is_file():
        raise CrossalignError(
            f"{path}: not a run directory (no {CONFIG}); give the run_dir of a training run"
        )
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        reason = " ".join(str(e).split())
        raise CrossalignError(f"{config_path}: not valid YAML ({reason}); repair it") from None
    if not isinstance(config, dict):
        raise CrossalignError(f"{config_path}: not a run config (a YAML mapping); repair it")
    metrics = read_metrics(path)
    results = read_results(path)
    if not metrics and not results:
        raise CrossalignError(
            f"{path}: nothing to report (no {METRICS} lines and no {RESULTS} records); train "
            "the run or evaluate its model first"
        )
    return Run(path, "", flatten(config), metrics, results)


def suffix_labels(paths: Sequence[Path]) -> list[str]:
    """The fewest trailing path parts (the same number for all) that tell ``paths`` apart."""
    parts = [p.resolve().parts for p in paths]
    longest = max(len(p) for p in parts)
    for depth in range(1, longest + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    return ["/".join(p) for p in parts]


def group_label(labels: Sequence[str]) -> str:
    """A group's name from its runs' labels: the common start cut back to a word boundary
    (``mlm-s0``, ``mlm-s1`` → ``mlm``; ``mlm/seed-0``, ``mlm/seed-1`` → ``mlm``); the labels
    joined when they share none."""
    if len(labels) == 1:
        return labels[0]
    prefix = os.path.commonprefix(list(labels))
    if any(len(label) > len(prefix) and label[len(prefix)] not in SEPARATORS for label in labels):
        prefix = prefix[: max(prefix.rfind(c) for c in SEPARATORS) + 1]
    prefix = re.sub(r"[-_./ =]*seed$", "", prefix.rstrip(SEPARATORS))  # mlm/seed-0, mlm/seed-1
    return prefix.rstrip(SEPARATORS) or ", ".join(labels)


def seedless(value: Any, seed: Any) -> Any:
    """``value`` with the run's ``seed`` read as ``{seed}`` where it stands alone in a string
    (not next to a letter or digit): ``runs/mlm/seed-3/model`` with seed 3 reads
    ``runs/mlm/seed-{seed}/model``, so that runs measuring (or continuing) one model per seed
    group as runs of one config do. Other values, and any value when the seed is not an
    integer, are returned as they are."""
    if not isinstance(value, str) or not isinstance(seed, int) or isinstance(seed, bool):
        return value
    return re.sub(rf"(?<![0-9A-Za-z]){seed}(?![0-9A-Za-z])", "{seed}", value)


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Runs whose flattened configs are equal apart from ``train.seed``, ``run_dir`` and the
    seed standing alone in a string (``seedless``), in the order of their first run."""
    by_config: dict[str, list[Run]] = {}
    for run in runs:
        same = {k: seedless(v, run.seed) for k, v in run.flat.items() if k not in SEED_KEYS}
        by_config.setdefault(json.dumps(same, sort_keys=True, default=str), []).append(run)
    groups = [
        Group(group_label([r.label for r in members]), members) for members in by_config.values()
    ]
    names = [g.label for g in groups]
    for g in groups:
        if names.count(g.label) > 1:
            g.label = ", ".join(r.label for r in g.runs)
    return groups


def config_differences(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """The flattened keys (``run_dir`` aside) whose values are not the same in every run."""
    keys = list(dict.fromkeys(k for run in runs for k in run.flat if k != "run_dir"))
    out = {}
    for key in keys:
        values = {run.label: run.flat.get(key, ABSENT) for run in runs}
        if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
            out[key] = values
    return out


def _table_key(record: ResultRecord, options: dict[str, Any] | None = None) -> tuple:
    text = json.dumps(record.options if options is None else options, sort_keys=True, default=str)
    return (record.eval, record.label, record.versions.get("eval"), text, record.place)


def table_options(record: ResultRecord, run: Run, evaluation: Evaluation | None) -> dict[str, Any]:
    """The options a record is tabled under. An option the record predates (absent from it)
    reads as its declared default: an evaluation's figures do not change for the same options
    without a new ``version``, so a default that is added keeps the old behaviour. The
    ``seed`` of an evaluation whose seed follows the run's (``Evaluation.run_seed``) reads
    ``RUN_SEED`` when it is the run's own, so that a group's runs share one table."""
    if evaluation is None:
        return dict(record.options)
    options = {**option_defaults(evaluation), **record.options}  # as find_record reads them
    if evaluation.run_seed and run.seed is not None and options.get("seed") == run.seed:
        options["seed"] = RUN_SEED
    return options


def _metric(evaluation: Evaluation | None, base: str, values: Sequence[float]) -> Metric:
    """A base name's declaration; an unknown one is shown plainly and never ranked."""
    if evaluation is not None and base in evaluation.metrics:
        return evaluation.metrics[base]
    integral = all(float(v).is_integer() for v in values)
    return Metric(label=base, unit="count" if integral else "ratio", higher_is_better=None)


def _mark_best(table: Table) -> None:
    """Mark, per layer or bin and per ranked metric, the best mean (ties all marked) when
    at least two rows have one."""
    for prefix in dict.fromkeys(row.prefix for row in table.rows):
        rows = [row for row in table.rows if row.prefix == prefix]
        for base, metric in table.metrics.items():
            if metric.higher_is_better is None:
                continue
            cells = [
                row.cells[base]
                for row in rows
                if base in row.cells and not math.isnan(row.cells[base].mean)
            ]
            if len(cells) < 2:
                continue
            pick = max if metric.higher_is_better else min
            best = pick(c.mean for c in cells)
            for c in cells:
                c.best = math.isclose(c.mean, best, rel_tol=1e-9, abs_tol=1e-12)


def _title(table: Table, tables: Sequence[Table], model: bool = True) -> str:
    """The table's name, with what tells it from other tables of the same name: the
    options that differ, the evaluation's version and (``model``) the model evaluated."""
    same = [t for t in tables if t.name == table.name and t is not table]
    keys = dict.fromkeys(k for t in [table, *same] for k in t.options)
    details = [table.eval] if table.label else []
    details += [
        f"{k}={table.options.get(k, ABSENT)}"
        for k in keys
        if any(t.options.get(k, ABSENT) != table.options.get(k, ABSENT) for t in same)
    ]
    if any(t.version != table.version for t in same):
        details.append(f"version {table.version}")
    if model and (
        any(t.model != table.model for t in same) or table.model not in (None, "model", ".")
    ):
        details.append("final model" if table.model == "model" else f"model {table.model}")
    return f"{table.name} ({', '.join(details)})" if details else table.name


def result_tables(groups: Sequence[Group], lookup: Lookup) -> list[Table]:
    """One table per (evaluation, label, version, options, model), in first-seen order; of
    a measurement recorded twice for one run, the later record counts."""
    latest: dict[tuple, dict[int, ResultRecord]] = {}
    options_of: dict[tuple, dict[str, Any]] = {}
    for group in groups:
        for run in group.runs:
            for record in run.results:
                options = table_options(record, run, lookup(record.eval))
                key = _table_key(record, options)
                options_of.setdefault(key, options)
                latest.setdefault(key, {})[id(run)] = record
    tables = []
    for key, by_run in latest.items():
        name, label, version, _, model = key
        evaluation = lookup(name)
        table = Table(name, label, version, options_of[key], model, evaluation)
        all_metrics: dict[str, list[float]] = {}
        for record in by_run.values():
            for k, v in record.metrics.items():
                all_metrics.setdefault(split_key(k)[1], []).append(v)
        declared = list(evaluation.metrics) if evaluation is not None else []
        bases = [b for b in declared if b in all_metrics]
        bases += [b for b in all_metrics if b not in bases]
        table.metrics = {b: _metric(evaluation, b, all_metrics[b]) for b in bases}
        prefixes = dict.fromkeys(
            split_key(k)[0] for record in by_run.values() for k in record.metrics
        )
        for prefix in prefixes:
            for group in groups:
                records = [by_run[id(r)] for r in group.runs if id(r) in by_run]
                cells = {}
                for base in bases:
                    full = f"{prefix}/{base}" if prefix else base
                    values = [float(r.metrics[full]) for r in records if full in r.metrics]
                    if values:
                        cells[base] = Cell(*t_interval(values), values)
                if cells:
                    table.rows.append(Row(group, prefix, len(records), cells))
        _mark_best(table)
        tables.append(table)
    for table in tables:
        table.title = _title(table, tables)
        table.measure = _title(table, tables, model=False)
    return tables


def _and(labels: Sequence[str]) -> str:
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


def identical_runs(groups: Sequence[Group]) -> list[str]:
    """A warning for each set of runs of one group whose result records are identical: the
    same measurement with the same model config hash and the same metrics, as a copied run
    directory holds. Such runs would count as separate seeds (n, and a ± of 0)."""
    warnings = []
    for group in groups:
        runs_of: dict[tuple, list[Run]] = {}
        for run in group.runs:
            latest = {_table_key(r): r for r in run.results}
            for key, rec in latest.items():
                sha = rec.model.get("config_sha256")
                if sha is not None:
                    metrics = json.dumps(rec.metrics, sort_keys=True, default=str)
                    runs_of.setdefault((key, sha, metrics), []).append(run)
        evals_of: dict[tuple[str, ...], list[str]] = {}
        for (key, _, _), runs in runs_of.items():
            if len(runs) > 1:
                name = key[1] or key[0]  # the label, else the evaluation
                evals_of.setdefault(tuple(r.label for r in runs), []).append(name)
        for labels, names in evals_of.items():
            warnings.append(
                f"{_and(labels)} hold identical result records ({', '.join(dict.fromkeys(names))}"
                "): the same config hash and metrics, as a copied run directory holds; they "
                f"count as {len(labels)} seeds in group {group.label}; give one of them"
            )
    return warnings


def collect(run_dirs: Sequence[str | Path], lookup: Lookup | None = None) -> Collection:
    """Read ``run_dirs`` (a directory given twice counts once), group them by config and
    aggregate their result records. ``lookup`` declares the evaluations (default: the
    registry)."""
    unique = list({Path(p).resolve(): Path(p) for p in run_dirs}.values())
    runs = [read_run(p) for p in unique]
    for run, label in zip(runs, suffix_labels([r.path for r in runs])):
        run.label = label
    groups = group_runs(runs)
    tables = result_tables(groups, lookup or registered)
    return Collection(runs, groups, tables, config_differences(runs), identical_runs(groups))


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def as_json(collection: Collection) -> dict[str, Any]:
    """The aggregated numbers (``report.json``): runs, groups, one entry per table with
    each row's mean, 95% half-width, values and best mark, and the config differences."""
    return {
        "runs": [{"path": str(r.path), "label": r.label, "seed": r.seed} for r in collection.runs],
        "groups": [
            {"label": g.label, "runs": [r.label for r in g.runs], "seeds": [r.seed for r in g.runs]}
            for g in collection.groups
        ],
        "tables": [
            {
                "title": t.title,
                "eval": t.eval,
                "label": t.label,
                "version": t.version,
                "options": t.options,
                "model": t.model,
                "rows": [
                    {
                        "group": row.group.label,
                        "prefix": row.prefix,
                        "n": row.n,
                        "metrics": {
                            base: {
                                "mean": _number(c.mean),
                                "ci95_half_width": None
                                if c.half_width is None
                                else _number(c.half_width),
                                "values": [_number(v) for v in c.values],
                                "best": c.best,
                            }
                            for base, c in row.cells.items()
                        },
                    }
                    for row in t.rows
                ],
            }
            for t in collection.tables
        ],
        "config_differences": collection.differences,
        "warnings": collection.warnings,
    }
