"""The report's figures as PNG (matplotlib's Agg renderer, imported only when drawing):
training and validation curves against the step, one line per run; metrics by layer
(``L<n>/…`` keys) and against the checkpoint step (one evaluation measured on a run's
checkpoints and its final model), one line per group with its 95% interval as a band."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossalign.checkpoint import checkpoint_step, is_checkpoint_place
from crossalign.report.collect import Collection, Run, Table
from crossalign.report.tables import header

DPI = 100


@dataclass
class Figures:
    """The figures written, by file name in the figures directory."""

    curves: list[tuple[str, str]] = field(default_factory=list)
    """(quantity, file name): ``loss``, ``train/ppl``, ``valid/*_ppl``."""
    layers: dict[int, str] = field(default_factory=dict)
    """Index of a table with per-layer metrics → its figure."""
    checkpoints: list[tuple[str, str]] = field(default_factory=list)
    """(evaluation name, file name): its metrics against the checkpoint step."""


def slug(text: str, limit: int = 60) -> str:
    """``text`` as a file name stem: runs of other characters than letters and digits
    become ``-``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:limit].strip("-") or "figure"


def _axes(panels: int, width: float, height: float) -> tuple[Any, list[Any]]:
    from crossalign.extras import require

    Figure = require("matplotlib.figure", "plots", "a report's figures").Figure

    cols = min(panels, 3)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width * cols, height * rows))
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def _band(ax: Any, x: list, cells: list, scale: float, label: str) -> None:
    """A line through the cells' means (× ``scale``) at ``x``, their 95% intervals as a
    band."""
    y = [c.mean * scale for c in cells]
    (line,) = ax.plot(x, y, marker="o", markersize=3, label=label)
    half = [math.nan if c.half_width is None else c.half_width * scale for c in cells]
    if not all(math.isnan(h) for h in half):
        low = [m - h for m, h in zip(y, half)]
        high = [m + h for m, h in zip(y, half)]
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)


def _save(fig: Any, path: Path) -> None:
    for ax in fig.axes:
        if ax.get_visible() and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=DPI)


def curve_keys(runs: Sequence[Run]) -> list[str]:
    """The logged quantities drawn as curves: ``loss``, ``train/ppl`` and each
    ``valid/*_ppl``, those present in some run."""
    seen = dict.fromkeys(key for run in runs for record in run.metrics for key in record)
    valid = [k for k in seen if k.startswith("valid/") and k.endswith("_ppl")]
    return [k for k in ("loss", "train/ppl") if k in seen] + valid


def plot_curves(runs: Sequence[Run], directory: Path) -> list[tuple[str, str]]:
    """One figure per quantity of ``curve_keys`` against the step, one line per run
    (perplexities on a log scale); returns (quantity, file name) pairs."""
    written = []
    for key in curve_keys(runs):
        fig, (ax,) = _axes(1, 5.0, 3.2)
        for run in runs:
            points = [(r["step"], r[key]) for r in run.metrics if key in r and "step" in r]
            if points:
                steps, values = zip(*points)
                marker = "o" if key.startswith("valid/") else None
                ax.plot(steps, values, marker=marker, markersize=3, label=run.label)
        ax.set_xlabel("step")
        ax.set_ylabel(key)
        if key.endswith("ppl"):
            ax.set_yscale("log")
        name = f"curve-{slug(key)}.png"
        _save(fig, directory / name)
        written.append((key, name))
    return written


def layer_number(prefix: str) -> int | None:
    """``L8`` → 8; None for any other prefix."""
    match = re.fullmatch(r"L(-?\d+)", prefix)
    return int(match.group(1)) if match else None


def plot_layers(table: Table, path: Path) -> bool:
    """Each non-count metric of ``table`` against the layer, one panel per metric, one line
    per group (its 95% interval as a band; fractions as percentages). False, and nothing
    written, when the table has no per-layer values."""
    rows = [row for row in table.rows if layer_number(row.prefix) is not None]
    bases = [
        b
        for b, m in table.columns().items()
        if m.unit != "count" and any(b in row.cells for row in rows)
    ]
    if not bases:
        return False
    fig, axes = _axes(len(bases), 4.0, 3.0)
    groups = list(dict.fromkeys(row.group.label for row in rows))
    for ax, base in zip(axes, bases):
        metric = table.metrics[base]
        scale = 100.0 if metric.unit == "fraction" else 1.0
        for group in groups:
            cells = sorted(
                (layer_number(row.prefix), row.cells[base])
                for row in rows
                if row.group.label == group and base in row.cells
            )
            if not cells:
                continue
            _band(ax, [layer for layer, _ in cells], [c for _, c in cells], scale, group)
        ax.set_xlabel("layer")
        ax.set_title(header(base, metric), fontsize="medium")
    fig.suptitle(table.title, fontsize="medium")
    _save(fig, path)
    return True


def model_step(table: Table, group_runs: Sequence[Run]) -> int | None:
    """The training step of the model ``table`` measured: a checkpoint's from its name, a
    trained run's final model's from its runs' ``train.steps``; None when unknown, when
    they differ, or for a model evaluated as it is (``train.steps: 0``)."""
    if is_checkpoint_place(table.model):
        return checkpoint_step(Path(table.model))
    if table.model != "model":
        return None
    steps = {run.flat.get("train.steps") for run in group_runs}
    step = steps.pop() if len(steps) == 1 else None
    return step if isinstance(step, int) and step > 0 else None


def checkpoint_families(tables: Sequence[Table]) -> list[list[Table]]:
    """Tables of one measurement (``Table.measure``) on several models of the runs, at
    least one a checkpoint: a learning curve each, in first-seen order."""
    families: dict[str, list[Table]] = {}
    for table in tables:
        families.setdefault(table.measure, []).append(table)
    return [f for f in families.values() if any(is_checkpoint_place(t.model) for t in f)]


def plot_checkpoints(family: Sequence[Table], path: Path) -> bool:
    """Each non-count metric of one measurement against the training step of the model it
    measured (the runs' checkpoints and final models), one panel per metric, one line per
    group and layer or bin (its 95% interval as a band). False, and nothing written, when
    no metric has two steps."""
    points: dict[tuple[str, str], list] = {}  # (metric, line) -> [(step, cell)]
    first = family[0]
    bases = [b for b, m in first.columns().items() if m.unit != "count"]
    for table in family:
        for row in table.rows:
            step = model_step(table, row.group.runs)
            if step is None:
                continue
            line = f"{row.group.label} {row.prefix}".strip()
            for base in bases:
                if base in row.cells:
                    points.setdefault((base, line), []).append((step, row.cells[base]))
    drawn = [b for b in bases if any(len(v) > 1 for (m, _), v in points.items() if m == b)]
    if not drawn:
        return False
    fig, axes = _axes(len(drawn), 4.0, 3.0)
    for ax, base in zip(axes, drawn):
        metric = first.metrics[base]
        scale = 100.0 if metric.unit == "fraction" else 1.0
        for (m, line), cells in points.items():
            if m != base:
                continue
            cells.sort(key=lambda p: p[0])
            _band(ax, [step for step, _ in cells], [c for _, c in cells], scale, line)
        ax.set_xlabel("training step")
        ax.set_title(header(base, metric), fontsize="medium")
    fig.suptitle(first.measure, fontsize="medium")
    _save(fig, path)
    return True


def write_figures(collection: Collection, directory: Path) -> Figures:
    """Draw every figure of the report into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    figures = Figures(curves=plot_curves(collection.runs, directory))
    for i, table in enumerate(collection.tables):
        stem = f"layers-{slug(table.title)}"
        name, n = f"{stem}.png", 1
        while name in figures.layers.values():
            n += 1
            name = f"{stem}-{n}.png"
        if plot_layers(table, directory / name):
            figures.layers[i] = name
    for family in checkpoint_families(collection.tables):
        name = f"checkpoints-{slug(family[0].measure)}-{len(figures.checkpoints) + 1}.png"
        if plot_checkpoints(family, directory / name):
            figures.checkpoints.append((family[0].measure, name))
    return figures
