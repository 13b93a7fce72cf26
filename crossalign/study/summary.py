"""A study's results and the sections its report adds: contrasts between runs and the
correlations between metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crossalign.study.spec import PlannedRun, Study, cells

if TYPE_CHECKING:
    from crossalign.evals.results import ResultRecord


@dataclass
class StudyResult:
    """What a study produced."""

    runs: list[PlannedRun]
    records: dict[Path, list[ResultRecord]]
    """The study's result records of each run's final model, per run directory (its
    checkpoints' records are in ``RUN/results.jsonl`` and the report's tables and curves)."""
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
