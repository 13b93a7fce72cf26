"""The one table printer: evaluation results and reports as aligned text or Markdown, each
value formatted by its metric's unit (fractions as percentages)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from crossalign.evals.registry import Evaluation, Metric, split_key

Style = Literal["text", "markdown"]


def format_value(value: float | None, metric: Metric, ci: float | None = None) -> str:
    """``value`` in ``metric``'s unit: fractions ×100 with two decimals, counts as integers,
    the rest with two (perplexity, percent) or four (ratio, nats) decimals; ``± ci`` after it
    when given; ``-`` for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    scale, digits = {
        "fraction": (100.0, 2),
        "percent": (1.0, 2),
        "count": (1.0, 0),
        "perplexity": (1.0, 2),
        "seconds": (1.0, 1),
    }.get(metric.unit, (1.0, 4))
    text = f"{value * scale:.{digits}f}"
    if ci is not None:
        text += f" ± {ci * scale:.{digits}f}"
    return text


def header(key: str, metric: Metric) -> str:
    """A column header: the metric's label, its unit when shown as a percentage, and an arrow
    for its direction."""
    arrow = {True: " ↑", False: " ↓", None: ""}[metric.higher_is_better]
    unit = " %" if metric.unit in ("fraction", "percent") else ""
    return f"{metric.label}{unit}{arrow}"


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], style: Style = "text"
) -> str:
    """Rows of cells under ``headers``: space-aligned text (first column left, the rest right)
    or a Markdown pipe table."""
    if style == "markdown":
        lines = ["| " + " | ".join(headers) + " |"]
        lines.append("|" + "|".join([":---"] + ["---:"] * (len(headers) - 1)) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def metric_rows(metrics: Mapping[str, float]) -> tuple[list[str], list[str], dict]:
    """Regroup flat metrics by prefix: (row prefixes in first-seen order, base names in
    first-seen order, {(prefix, base): value})."""
    prefixes: list[str] = []
    bases: list[str] = []
    cells: dict[tuple[str, str], float] = {}
    for key, value in metrics.items():
        prefix, base = split_key(key)
        if prefix not in prefixes:
            prefixes.append(prefix)
        if base not in bases:
            bases.append(base)
        cells[prefix, base] = value
    return prefixes, bases, cells


def row_label(prefix: str, alone: bool) -> str:
    """The first cell of a row: ``L8`` → ``layer 8``, ``bin3`` → ``bin 3``; the metrics
    without a prefix are ``-`` when they are the only row, else ``all``."""
    if not prefix:
        return "-" if alone else "all"
    for short, long in (("L", "layer"), ("bin", "bin")):
        rest = prefix.removeprefix(short)
        if rest != prefix and rest.lstrip("-").isdigit():
            return f"{long} {rest}"
    return prefix


CI = "_ci95"
"""A metric ``x_ci95`` is the half-width of the 95% interval of metric ``x``: shown as
``x ± half-width`` in x's column."""


def evaluation_table(
    evaluation: Evaluation, metrics: Mapping[str, float], style: Style = "text"
) -> str:
    """One evaluation's metrics as a table: one row per prefix (layer, bin; one row when
    there is none), one column per metric in the order the evaluation declares them (a
    ``<metric>_ci95`` half-width joins its metric's column)."""
    prefixes, bases, cells = metric_rows(metrics)
    folded = {b for b in bases if b.endswith(CI) and b.removesuffix(CI) in bases}
    order = [b for b in evaluation.metrics if b in bases and b not in folded]
    headers = [evaluation.name] + [header(b, evaluation.metrics[b]) for b in order]
    rows = [
        [row_label(p, len(prefixes) == 1)]
        + [
            format_value(cells.get((p, b)), evaluation.metrics[b], cells.get((p, b + CI)))
            for b in order
        ]
        for p in prefixes
    ]
    return format_table(headers, rows, style)
