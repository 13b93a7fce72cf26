"""A report's contrasts: for a pair of groups (a baseline and a method), every ranked measure
whose 95% intervals over the seeds do not overlap — the method better or worse than the
baseline beyond seed noise — with the difference of the means and Welch's p."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from crossalign.errors import CrossalignError
from crossalign.evals.registry import Metric
from crossalign.report.collect import Cell, Collection
from crossalign.report.markdown import escape
from crossalign.stats import intervals_apart, welch_p
from crossalign.tables import format_value, header, row_label


@dataclass
class Contrast:
    """One ranked measure of a method against its baseline."""

    measure: str
    """The table's title, the layer or bin (if any) and the metric's header."""
    metric: Metric
    baseline: Cell
    method: Cell
    p: float
    """Welch's two-sided p."""
    verdict: str
    """``better`` or ``worse`` (95% intervals apart, by the metric's direction), else ``≈``."""


def contrasts(collection: Collection, baseline: str, method: str) -> list[Contrast]:
    """Every ranked measure (a metric with a direction) that both groups have, in table order:
    ``method`` against ``baseline`` (group labels). An unknown group is an error naming the
    report's groups."""
    labels = [g.label for g in collection.groups]
    for name in (baseline, method):
        if name not in labels:
            raise CrossalignError(
                f"contrast: the report has no group '{name}'; its groups: {', '.join(labels)}"
            )
    out = []
    for table in collection.tables:
        for prefix in dict.fromkeys(row.prefix for row in table.rows):
            rows = {r.group.label: r for r in table.rows if r.prefix == prefix}
            if baseline not in rows or method not in rows:
                continue
            for base, metric in table.columns().items():
                a, b = rows[baseline].cells.get(base), rows[method].cells.get(base)
                if metric.higher_is_better is None or a is None or b is None:
                    continue
                verdict = "≈"
                if intervals_apart(a.values, b.values):
                    better = (b.mean > a.mean) == metric.higher_is_better
                    verdict = "better" if better else "worse"
                layer = row_label(prefix, alone=False) if prefix else ""
                where = " ".join(x for x in (table.title or table.name, layer) if x)
                measure = f"{where}: {header(base, metric)}"
                p = welch_p(a.values, b.values)
                out.append(Contrast(measure, metric, a, b, p, verdict))
    return out


def group_pairs(collection: Collection, baseline: str, method: str) -> list[tuple[str, str]]:
    """The (baseline, method) group labels ``baseline`` and ``method`` name: the groups of
    those labels, else, for a name that is one path part of the labels (a study's run name
    with a matrix, ``trans/mlm``), each group holding it beside the group that holds the other
    name in its place. None found is an error naming the report's groups."""
    labels = [g.label for g in collection.groups]
    if baseline in labels and method in labels:
        return [(baseline, method)]
    found = []
    for label in labels:
        parts = label.split("/")
        if baseline in parts:
            other = "/".join(method if p == baseline else p for p in parts)
            if other in labels:
                found.append((label, other))
    if not found:
        raise CrossalignError(
            f"contrast: the report has no groups '{baseline}' and '{method}'; its groups: "
            f"{', '.join(labels)}"
        )
    return found


def contrast_section(collection: Collection, pairs: Sequence[Sequence[str]]) -> str:
    """Markdown: per (baseline, method) pair (``group_pairs``), how many ranked measures
    differ beyond seed noise (95% intervals apart) and a table of those, with Welch's p ("-"
    where both sides are constant over their seeds)."""
    parts = []
    resolved = [p for a, b in pairs for p in group_pairs(collection, a, b)]
    for baseline, method in resolved:
        found = contrasts(collection, baseline, method)
        apart = [c for c in found if c.verdict != "≈"]
        better = sum(c.verdict == "better" for c in apart)
        parts.append(
            f"**{method} vs {baseline}**: of {len(found)} ranked measures, {better} better and "
            f"{len(apart) - better} worse beyond seed noise (95% intervals apart); the rest "
            "within it."
        )
        if apart:
            lines = [
                f"| measure | {baseline} | {method} | difference | Welch p | verdict |",
                "|:---|---:|---:|---:|---:|:---|",
            ]
            for c in apart:
                a, b = c.baseline, c.method
                diff = format_value(b.mean - a.mean, c.metric)
                cells = [
                    escape(c.measure),
                    format_value(a.mean, c.metric, a.half_width),
                    format_value(b.mean, c.metric, b.half_width),
                    diff if diff.startswith("-") else f"+{diff}",
                    "-" if math.isnan(c.p) else f"{c.p:.2g}",
                    c.verdict,
                ]
                lines.append(f"| {' | '.join(cells)} |")
            parts.append("\n".join(lines))
    return "\n\n".join(parts)
