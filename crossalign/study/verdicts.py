"""The report's "Hypotheses" section: each pre-registered hypothesis judged from the study's
records (``crossalign.study.hypotheses``), the gates, and whether the records were produced
under the committed version of the hypotheses."""

from __future__ import annotations

import math
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.study.hypotheses import GateResult, HypothesisResult, Values, judge_all
from crossalign.study.spec import Study, cells, read_study_data, verdict_design
from crossalign.study.summary import StudyResult, run_metrics


def values_from(study: Study, result: StudyResult):
    """``values_of(cell, measures)`` for ``judge_all``: per ``(alias, run)`` the measure's
    value per seed, from the records of that cell's runs."""

    def values_of(cell: dict[str, Any], measures: Mapping[str, str]) -> Values:
        out: dict[tuple[str, str], dict[int, float]] = {}
        for run in result.runs:
            if run.cell != cell:
                continue
            metrics = run_metrics(result.records.get(run.run_dir, []))
            for alias, key in measures.items():
                value = metrics.get(key)
                if value is not None and not math.isnan(value):
                    out.setdefault((alias, run.name), {})[run.seed] = float(value)
        return out

    return values_of


def _git(args: Sequence[str], cwd: Path, strip: bool = True) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() if strip else done.stdout


def hypotheses_commit(files: Sequence[str]) -> tuple[str | None, str]:
    """The commit that registered the study's design as it is now (None when the files are not
    in a git checkout or have uncommitted changes), and a sentence saying so: the oldest
    commit of the files' latest run of commits with the same ``spec.verdict_design``, so that
    a later commit that only adds an evaluation no hypothesis or gate reads (or changes a
    comment or the title) does not count its runs' records as made before the hypotheses."""
    if not files:
        return None, "the study's files are unknown"
    paths = [Path(f).resolve() for f in files]
    cwd = paths[0].parent
    if _git(["status", "--porcelain", "--", *map(str, paths)], cwd):
        return None, "the study file has uncommitted changes: its hypotheses are not registered"
    log = _git(["log", "--first-parent", "--format=%H", "--", *map(str, paths)], cwd)
    if not log:
        return None, "the study file is not committed in a git checkout"
    commits = log.split()
    design = verdict_design(read_study_data(paths[0]))
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    registered = commits[0]
    for commit in commits[1:]:
        if top is None or _design_at(commit, paths, Path(top).resolve()) != design:
            break
        registered = commit
    note = f"hypotheses as committed in {registered[:10]}"
    if registered != commits[0]:
        note += (
            f"; changed since (last in {commits[0][:10]}) only where no hypothesis or gate reads"
        )
    return registered, note


def _design_at(commit: str, paths: Sequence[Path], top: Path) -> dict[str, Any] | None:
    """``verdict_design`` of the study file ``paths[0]`` (extending ``paths[1:]``) as of
    ``commit`` of the checkout at ``top``; None where one of them is missing there or does not
    read."""
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            relative = path.relative_to(top).as_posix()
            text = _git(["show", f"{commit}:{relative}"], top, strip=False)
            if text is None:
                return None
            copy = Path(tmp) / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(text, encoding="utf-8")
        try:
            return verdict_design(read_study_data(Path(tmp) / paths[0].relative_to(top)))
        except CrossalignError:
            return None


def records_not_after(commit: str, commits: Sequence[str | None], cwd: Path) -> int:
    """How many of the records' ``commits`` (the checkout's commit when each evaluation ran)
    do not contain ``commit``: produced before the hypotheses were committed, on another
    branch, or at an unknown commit. One git call per distinct commit."""
    after = {
        seen: _git(["merge-base", "--is-ancestor", commit, seen], cwd) is not None
        for seen in set(commits) - {None}
    }
    return sum(seen is None or not after[seen] for seen in commits)


def _number(x: float | None, spec: str = ".3g") -> str:
    return "n/a" if x is None or math.isnan(x) else format(x, spec)


def _cell_name(cell: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in cell.items()) or "—"


def hypotheses_section(study: Study, result: StudyResult) -> tuple[str, dict[str, Any]]:
    """Markdown of the hypotheses' verdicts and the gates, and the same as plain data."""
    gates, judged = judge_all(
        study.hypotheses,
        study.gates,
        cells(study),
        values_from(study, result),
    )
    commit, note = hypotheses_commit(study.files)
    lines = [f"Pre-registered in the study file ({note})."]
    stale = 0
    if commit is not None:
        commits = [r.versions.get("git") for rs in result.records.values() for r in rs]
        stale = records_not_after(commit, commits, Path(study.files[0]).resolve().parent)
        if stale:
            lines.append(
                f"\n**Warning:** {stale} of {len(commits)} result records were produced at a "
                f"commit that does not contain {commit[:10]} (before the hypotheses were "
                "committed, or at another or an unknown commit)."
            )
    if gates:
        lines += [
            "",
            "| gate | cell | condition | D at the means (passes at ≥ 0; > 0 for > and <) "
            "| passed |",
            "|---|---|---|---|---|",
        ]
        for g in gates:
            lines.append(
                f"| {g.gate.name} | {_cell_name(g.cell)} | `{g.gate.condition}` | "
                f"{_number(g.value)} | {'yes' if g.passed else '**no**'} |"
            )
    lines += [
        "",
        "| hypothesis | cell | contrast (D > 0) | test | D | 95% interval | p | MDE "
        "| spread (SD) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for h in judged:
        t = h.test
        interval = f"[{_number(t.low)}, {_number(t.high)}]" if t else "n/a"
        spread = "; ".join(f"{k} {_number(v)}" for k, v in h.spread.items()) or "n/a"
        verdict = f"**{h.verdict}**" + (f" ({h.reason})" if h.reason else "")
        lines.append(
            f"| {h.hypothesis.name} | {_cell_name(h.cell)} | `{h.hypothesis.contrast}` | "
            f"{h.hypothesis.test} | {_number(t.estimate if t else None)} | {interval} | "
            f"{_number(t.p if t else None, '.2g')} | {_number(t.mde if t else None)} | "
            f"{spread} | {verdict} |"
        )
    lines.append(
        "\nMET: one-sided p < α. NOT MET: the opposite one-sided p < α. INCONCLUSIVE: "
        "neither, too few seeds, or a failed gate. MDE: the smallest true D the test finds "
        "with 80% power at α = 0.05 and these seeds (Welch tests only)."
    )
    data = {
        "commit": commit,
        "note": note,
        "records_not_after_commit": stale,
        "gates": [_gate_json(g) for g in gates],
        "hypotheses": [_hypothesis_json(h) for h in judged],
    }
    return "\n".join(lines), data


def _gate_json(g: GateResult) -> dict[str, Any]:
    return {"name": g.gate.name, "cell": g.cell, "condition": g.gate.condition,
            "value": g.value, "passed": g.passed}  # fmt: skip


def _hypothesis_json(h: HypothesisResult) -> dict[str, Any]:
    t = h.test
    test = None if t is None else {
        "estimate": t.estimate, "ci95": [t.low, t.high], "p": t.p,
        "p_opposite": t.p_opposite, "mde": t.mde,
    }  # fmt: skip
    return {"name": h.hypothesis.name, "cell": h.cell, "contrast": h.hypothesis.contrast,
            "test": h.hypothesis.test, "alpha": h.hypothesis.alpha, "verdict": h.verdict,
            "reason": h.reason, "result": test, "spread": h.spread}  # fmt: skip
