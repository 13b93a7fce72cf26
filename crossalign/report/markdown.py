"""The report page as Markdown: runs and groups, one comparison table per evaluation (best
values bold), per-layer figures, training curves, config differences, then any extra
sections. ``report.html`` is rendered from this text."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from crossalign.report.collect import Collection, Run, Table
from crossalign.report.plots import Figures
from crossalign.report.tables import CI, format_table, format_value, header, row_label

FIGURES = "figures"


def escape(text: Any) -> str:
    """``text`` with the characters the page's Markdown gives a meaning escaped."""
    return re.sub(r"([\\`*|\[\]])", r"\\\1", str(text))


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def results_table(table: Table) -> str:
    """One evaluation's table: a row per group (and layer or bin), a column per metric,
    ``mean ± 95% half-width`` over the group's runs (for a single run, the half-width the
    evaluation reported as ``<metric>_ci95``, if any), the best of each column (per layer or
    bin) bold; an ``n`` column (runs with a record) when a group has several runs."""
    several = any(len(row.group.runs) > 1 for row in table.rows)
    prefixed = any(row.prefix for row in table.rows)
    columns = table.columns()
    headers = ["group" if several else "run"] + [""] * prefixed + ["n"] * several
    headers += [escape(header(base, metric)) for base, metric in columns.items()]
    rows = []
    for row in table.rows:
        cells = [escape(row.group.label)]
        if prefixed:
            cells.append(escape(row_label(row.prefix, alone=False)))
        if several:
            cells.append(str(row.n))
        for base, metric in columns.items():
            cell = row.cells.get(base)
            if cell is None:
                cells.append("-")
                continue
            half = cell.half_width
            reported = row.cells.get(base + CI)
            if half is None and reported is not None and len(reported.values) == 1:
                half = reported.mean
            if metric.unit == "count":  # sizes: the mean alone
                half = None
            text = format_value(cell.mean, metric, half)
            cells.append(f"**{text}**" if cell.best else text)
        rows.append(cells)
    return format_table(headers, rows, "markdown")


def train_minutes(run: Run) -> float | None:
    """Wall-clock minutes the run trained (its last ``train_seconds`` log entry; 0 for a
    model evaluated as it is, ``train.steps: 0``), or None for a log without one."""
    if run.flat.get("train.steps") == 0:
        return 0.0
    seconds = [m["train_seconds"] for m in run.metrics if "train_seconds" in m]
    return seconds[-1] / 60 if seconds else None


def eval_minutes(run: Run) -> float:
    """Wall-clock minutes of the run's evaluations (their records' ``time.seconds``)."""
    return sum(float(r.time.get("seconds", 0.0)) for r in run.results) / 60


def _minutes(values: Sequence[float | None]) -> str:
    """Mean of ``values`` in minutes, ``n/a`` when any is missing."""
    if not values or any(v is None for v in values):
        return "n/a"
    return f"{sum(values) / len(values):.1f}"


def runs_table(collection: Collection) -> str:
    """Each group with its seeds, run directories and mean wall-clock minutes per run of
    training and of evaluation."""
    rows = [
        [
            escape(g.label),
            escape(", ".join("—" if r.seed is None else str(r.seed) for r in g.runs)),
            escape(", ".join(str(r.path) for r in g.runs)),
            _minutes([train_minutes(r) for r in g.runs]),
            _minutes([eval_minutes(r) for r in g.runs]),
        ]
        for g in collection.groups
    ]
    headers = ["group", "seeds", "runs", "training min/run", "evaluation min/run"]
    return format_table(headers, rows, "markdown")


def compute_line(collection: Collection) -> str:
    """Total wall-clock hours of training and evaluation over every run (training of runs
    logged before ``train_seconds`` existed is left out and said so)."""
    trained = [train_minutes(r) for r in collection.runs]
    known = [t for t in trained if t is not None]
    evaluated = sum(eval_minutes(r) for r in collection.runs)
    missing = len(trained) - len(known)
    note = f" ({missing} run{'s' * (missing != 1)} without a logged time)" if missing else ""
    return (
        f"Wall-clock time: {sum(known) / 60:.2f} h training{note}, {evaluated / 60:.2f} h "
        "evaluation."
    )


def differences_table(collection: Collection) -> str:
    """A row per run, a column per config key whose value differs across the runs."""
    keys = list(collection.differences)
    rows = [
        [escape(run.label)] + [escape(_value(collection.differences[k][run.label])) for k in keys]
        for run in collection.runs
    ]
    return format_table(["run"] + [escape(k) for k in keys], rows, "markdown")


def render(
    collection: Collection,
    figures: Figures,
    title: str,
    extra_sections: Sequence[tuple[str, str]] = (),
    lead_sections: Sequence[tuple[str, str]] = (),
) -> str:
    """The whole page; figures are linked as ``figures/NAME.png``. ``lead_sections`` ((title,
    Markdown body) pairs) follow the title's paragraph, before the runs; ``extra_sections``
    end the page."""
    n_runs, n_groups = len(collection.runs), len(collection.groups)
    parts = [
        f"# {escape(title)}",
        f"{n_runs} run{'s' * (n_runs != 1)} in {n_groups} group{'s' * (n_groups != 1)} "
        "(runs whose configs differ only in `train.seed`, also where it names a path: "
        "`seed-{seed}`). A value is the mean over a "
        "group's runs ± the half-width of its 95% Student-t interval (none for one run); "
        "bold: the best of its column (↑ higher is better, ↓ lower; counts are not ranked).",
        *[f"**Warning:** {escape(w)}" for w in collection.warnings],
        *_sections(lead_sections),
        "## Runs",
        runs_table(collection),
        compute_line(collection),
    ]
    if collection.tables:
        parts.append("## Results")
    for i, table in enumerate(collection.tables):
        parts += [f"### {escape(table.title)}", results_table(table)]
        if i in figures.layers:
            parts.append(f"![{escape(table.title)} by layer]({FIGURES}/{figures.layers[i]})")
    if figures.checkpoints:
        parts.append("## Against the training step")
        parts += [
            f"![{escape(name)} against the training step]({FIGURES}/{file})"
            for name, file in figures.checkpoints
        ]
    if figures.curves:
        parts.append("## Training")
        parts += [f"![{escape(key)}]({FIGURES}/{name})" for key, name in figures.curves]
    parts.append("## Config differences")
    if collection.differences:
        parts.append(differences_table(collection))
    else:
        parts.append("The runs' configs are the same (apart from `run_dir`).")
    parts += _sections(extra_sections)
    return "\n\n".join(parts) + "\n"


def _sections(sections: Sequence[tuple[str, str]]) -> list[str]:
    """Each (title, body) pair as a level-two heading and its body."""
    return [part for title, body in sections for part in (f"## {escape(title)}", body.strip())]
