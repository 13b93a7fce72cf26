"""``write_report``: read runs, draw the figures and write ``report.md``, ``report.html`` and
``report.json`` into a directory that replaces the previous report only once complete."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.fileio import atomic_dir, write_json_atomic, write_text_atomic
from crossalign.report import html, markdown
from crossalign.report.collect import Lookup, as_json, collect
from crossalign.report.contrast import Side, contrast_json, contrast_section, pair_contrasts
from crossalign.report.plots import write_figures

MARKDOWN, HTML, JSON = "report.md", "report.html", "report.json"
MANIFEST = "manifest.json"
"""The files a report wrote (``{"files": [relative paths]}``): only these are replaced."""
TITLE = "crossalign report"


@dataclass(frozen=True)
class ReportPaths:
    """The files of a written report."""

    markdown: Path
    html: Path
    json: Path
    figures: list[Path]


def _written_before(out: Path) -> set[str]:
    """The files (relative paths) the report in ``out`` wrote: those of its manifest; for a
    report written before the manifest, its pages and the figures they link."""
    manifest = out / MANIFEST
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
        return {str(f) for f in files} | {MANIFEST}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if manifest.exists():
        return set()  # not a manifest this writes: nothing counts as the report's
    pages = {MARKDOWN, HTML, JSON}
    linked = set()
    for name in (MARKDOWN, JSON):
        try:
            text = (out / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        linked.update(re.findall(rf"{markdown.FIGURES}/[\w.+-]+\.png", text))
    return pages | linked


def _not_written(out: Path, ours: set[str], most: int = 6) -> list[str]:
    """Up to ``most`` paths in ``out`` (relative; a folder named once, not its contents) that
    are not among ``ours`` (the files a report wrote) nor a folder holding some of them, nor
    the empty ``figures/`` that a report without figures leaves (any other folder, empty or
    not, is named)."""
    folders = {Path(f).parent.as_posix() for f in ours} - {"."}
    found: list[str] = []
    pending = [out]
    while pending and len(found) < most:
        for path in sorted(pending.pop().iterdir()):
            name = path.relative_to(out).as_posix()
            is_dir = path.is_dir() and not path.is_symlink()
            if name in folders and is_dir:
                pending.append(path)
            elif name == markdown.FIGURES and is_dir and not any(path.iterdir()):
                continue
            elif not (name in ours and not is_dir):
                found.append(name)
    return sorted(found)[:most]


def _check_out(out: Path) -> None:
    """``out`` is replaced as a whole, so it may be new, empty, or hold a previous report
    and nothing else: a file or folder in it that the report did not write (its manifest
    lists them) is refused, never deleted."""
    if out.exists() and not out.is_dir():
        raise CrossalignError(f"--out {out} is a file; give a directory for the report")
    others = _not_written(out, _written_before(out)) if out.is_dir() else []
    if others:
        raise CrossalignError(
            f"--out {out} holds files that are not a report ({', '.join(others[:5])}"
            f"{', …' if len(others) > 5 else ''}), which writing the report would delete; "
            "move them out, or give a new or empty directory"
        )


def write_report(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    title: str | None = None,
    lead_sections: Sequence[tuple[str, str]] = (),
    extra_sections: Sequence[tuple[str, str]] = (),
    contrasts: Sequence[tuple[Side, Side]] = (),
    lookup: Lookup | None = None,
    extra_json: Mapping[str, Any] | None = None,
    extra_files: Mapping[str, Any] | None = None,
) -> ReportPaths:
    """Report on ``run_dirs`` in ``out`` (``report.md``, ``report.html``, ``report.json``,
    ``figures/*.png``): one comparison table per evaluation over groups of runs that differ
    only in the seed, training curves, per-layer figures, config differences, then
    ``extra_sections`` ((title, Markdown body) pairs) and, for each (baseline, method) pair of
    ``contrasts`` (group labels, or run directories of the groups), the measures on which
    they differ beyond seed noise (``contrast_section``); ``extra_json`` adds keys to
    ``report.json`` (e.g. a study's hypotheses), and ``extra_files`` writes each value as a
    JSON file of its own, by name, beside it (a study's ``hypotheses.json``).
    ``lead_sections`` (the same pairs) come first, right after the title and before the runs:
    a study's verdicts lead its page. ``lookup``
    declares the evaluations (default: the registry). A failure leaves the previous report in
    ``out`` as it was."""
    if not run_dirs:
        raise CrossalignError("report: give at least one run directory")
    out = Path(out)
    _check_out(out)
    title = title or TITLE
    collection = collect(run_dirs, lookup)
    for warning in collection.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    found = pair_contrasts(collection, contrasts)
    if found:
        extra_sections = [*extra_sections, ("Contrasts", contrast_section(found))]
    with atomic_dir(out) as tmp:
        figures = write_figures(collection, tmp / markdown.FIGURES)
        page = markdown.render(collection, figures, title, extra_sections, lead_sections)
        write_text_atomic(tmp / MARKDOWN, page)
        write_text_atomic(tmp / HTML, html.render(page, tmp, title))
        summary = as_json(collection)
        summary["title"] = title
        summary["figures"] = [f"{markdown.FIGURES}/{name}" for _, name in figures.curves]
        summary["figures"] += [f"{markdown.FIGURES}/{name}" for name in figures.layers.values()]
        summary["figures"] += [f"{markdown.FIGURES}/{name}" for _, name in figures.checkpoints]
        summary["contrasts"] = contrast_json(found)
        summary.update(extra_json or {})
        write_json_atomic(tmp / JSON, summary)
        for name, value in (extra_files or {}).items():
            write_json_atomic(tmp / name, value)
        written = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file())
        write_json_atomic(tmp / MANIFEST, {"files": written})
    return ReportPaths(
        out / MARKDOWN, out / HTML, out / JSON, [out / name for name in summary["figures"]]
    )
