"""A report's contrasts: for a pair of groups (a baseline and a method), every ranked measure
on which the method is better or worse than the baseline beyond seed noise — Welch's p over
the seeds, Holm-adjusted over every measure of every pair in the report (a family of many
exploratory tests), with the Benjamini–Hochberg q beside it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crossalign.checkpoint import is_checkpoint_place
from crossalign.errors import CrossalignError
from crossalign.evals.registry import Metric
from crossalign.report.collect import Cell, Collection
from crossalign.report.markdown import escape
from crossalign.report.tables import format_value, header, row_label
from crossalign.stats import benjamini_hochberg, holm, welch_p

Side = str | Sequence[str | Path]
"""A group named by its label in the report, or by run directories it holds."""


@dataclass
class Contrast:
    """One ranked measure of a method against its baseline."""

    measure: str
    """The table's title, the layer or bin (if any) and the metric's header."""
    metric: Metric
    baseline: Cell
    method: Cell
    p: float
    """Welch's two-sided p (NaN: a side has one value, or both are constant)."""
    p_holm: float = math.nan
    """``p`` Holm-adjusted over every contrast of the report."""
    q_bh: float = math.nan
    """The Benjamini–Hochberg q of ``p`` over the same family."""
    verdict: str = "n/a"
    """``better`` or ``worse`` (Holm-adjusted p < 0.05, by the metric's direction), ``≈``
    (not) or ``n/a`` (a side has no interval: one run, or no number; or no p)."""


ALPHA = 0.05
"""The level of the adjusted tests."""


def verdict(a: Cell, b: Cell, higher_is_better: bool, p_adjusted: float) -> str:
    """``b`` against ``a``: ``better``/``worse`` when the adjusted p is below ``ALPHA``,
    ``≈`` when it is not, ``n/a`` without two intervals or a p."""
    halves = (a.half_width, b.half_width)
    numbers = (a.mean, b.mean, *halves, p_adjusted)
    if None in halves or any(math.isnan(x) for x in numbers if x is not None):
        return "n/a"
    if p_adjusted >= ALPHA:
        return "≈"
    return "better" if (b.mean > a.mean) == higher_is_better else "worse"


def find_group(collection: Collection, side: Side) -> str:
    """The label of the group ``side`` names: a label, or run directories (the group holding
    the first of them). An unknown one is an error naming the report's groups."""
    labels = [g.label for g in collection.groups]
    if isinstance(side, str):
        if side in labels:
            return side
        wanted = f"no group '{side}'"
    else:
        paths = [Path(p).resolve() for p in side]
        for group in collection.groups:
            if paths and paths[0] in {r.path.resolve() for r in group.runs}:
                return group.label
        wanted = f"no run {side[0] if side else '(none given)'}"
    raise CrossalignError(f"contrast: the report has {wanted}; its groups: {', '.join(labels)}")


def contrasts(collection: Collection, baseline: Side, method: Side) -> list[Contrast]:
    """Every ranked measure (a metric with a direction) that both groups have, in table order:
    ``method`` against ``baseline`` (``find_group``); measurements of checkpoints are left
    out."""
    first, second = find_group(collection, baseline), find_group(collection, method)
    out = []
    for table in collection.tables:
        if is_checkpoint_place(table.model):
            continue  # the final models are compared; checkpoints are the curves'
        for prefix in dict.fromkeys(row.prefix for row in table.rows):
            rows = {r.group.label: r for r in table.rows if r.prefix == prefix}
            if first not in rows or second not in rows:
                continue
            for base, metric in table.columns().items():
                a, b = rows[first].cells.get(base), rows[second].cells.get(base)
                if metric.higher_is_better is None or a is None or b is None:
                    continue
                layer = row_label(prefix, alone=False) if prefix else ""
                where = " ".join(x for x in (table.title or table.name, layer) if x)
                out.append(
                    Contrast(f"{where}: {header(base, metric)}", metric, a, b,
                             welch_p(a.values, b.values))
                )  # fmt: skip
    return out


@dataclass
class PairContrasts:
    """The contrasts of one (baseline, method) pair, with the groups' labels."""

    baseline: str
    method: str
    measures: list[Contrast]


def pair_contrasts(
    collection: Collection, pairs: Sequence[tuple[Side, Side]]
) -> list[PairContrasts]:
    """``contrasts`` of every pair, once, for the report's section and its JSON; their p-values
    adjusted as one family (Holm, Benjamini–Hochberg) and each judged on its Holm p."""
    found = [
        PairContrasts(find_group(collection, a), find_group(collection, b),
                      contrasts(collection, a, b))
        for a, b in pairs
    ]  # fmt: skip
    family = [c for pair in found for c in pair.measures]
    ps = [c.p for c in family]
    for c, p_holm, q in zip(family, holm(ps), benjamini_hochberg(ps)):
        c.p_holm, c.q_bh = p_holm, q
        c.verdict = verdict(c.baseline, c.method, bool(c.metric.higher_is_better), p_holm)
    return found


def contrast_json(found: Sequence[PairContrasts]) -> list[dict]:
    """``pair_contrasts`` as plain data (``report.json``): per pair the two group labels and
    every ranked measure with both means, half-widths, Welch's p, its Holm p and BH q (None
    for NaN) and the verdict."""

    def number(x: float | None) -> float | None:
        return None if x is None or math.isnan(x) else x

    def cell(c: Cell) -> dict:
        return {"mean": number(c.mean), "ci95_half_width": c.half_width}

    return [
        {
            "baseline": pair.baseline,
            "method": pair.method,
            "measures": [
                {"measure": c.measure, "baseline": cell(c.baseline), "method": cell(c.method),
                 "welch_p": number(c.p), "holm_p": number(c.p_holm), "bh_q": number(c.q_bh),
                 "verdict": c.verdict}
                for c in pair.measures
            ],
        }
        for pair in found
    ]  # fmt: skip


def contrast_section(found: Sequence[PairContrasts]) -> str:
    """Markdown of ``pair_contrasts``: per pair, how many ranked measures differ beyond seed
    noise (Holm-adjusted Welch p < 0.05 over the report's family of tests), lie within it, or
    have no interval, and a table of those apart, with Welch's p, its Holm p and BH q ("-"
    where a side is constant over its seeds)."""
    tests = sum(not math.isnan(c.p) for pair in found for c in pair.measures)
    parts = []
    for pair in found:
        baseline, method, measures = pair.baseline, pair.method, pair.measures
        count = {v: sum(c.verdict == v for c in measures) for v in ("better", "worse", "≈", "n/a")}
        line = (
            f"**{method} vs {baseline}**: of {len(measures)} ranked measures, {count['better']} "
            f"better and {count['worse']} worse beyond seed noise (Holm-adjusted Welch p < "
            f"{ALPHA} over the report's {tests} tests), {count['≈']} within it"
        )
        if count["n/a"]:
            line += f", {count['n/a']} without an interval (a group of one run) or a p"
        parts.append(line + ".")
        apart = [c for c in measures if c.verdict in ("better", "worse")]
        if apart:
            lines = [
                f"| measure | {escape(baseline)} | {escape(method)} | difference | Welch p "
                "| Holm p | BH q | verdict |",
                "|:---|---:|---:|---:|---:|---:|---:|:---|",
            ]
            for c in apart:
                a, b = c.baseline, c.method
                diff = format_value(b.mean - a.mean, c.metric)
                cells = [
                    escape(c.measure),
                    format_value(a.mean, c.metric, a.half_width),
                    format_value(b.mean, c.metric, b.half_width),
                    diff if diff.startswith("-") else f"+{diff}",
                    *("-" if math.isnan(x) else f"{x:.2g}" for x in (c.p, c.p_holm, c.q_bh)),
                    c.verdict,
                ]
                lines.append(f"| {' | '.join(cells)} |")
            parts.append("\n".join(lines))
    return "\n\n".join(parts)
