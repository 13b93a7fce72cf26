"""Pre-registered hypotheses and gates: the tests against scipy/statsmodels and hand-computed
cases, the verdicts (met, not met, inconclusive, a failing gate) and the report section."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from scipy import stats as sps

from crossalign.errors import CrossalignError
from crossalign.evals.results import ResultRecord
from crossalign.stats import benjamini_hochberg, holm, linear_contrast
from crossalign.study.hypotheses import (
    INCONCLUSIVE,
    MET,
    NOT_MET,
    Gate,
    Hypothesis,
    check_spec,
    contrast_test,
    judge_all,
    parse_contrast,
)
from crossalign.study.spec import PlannedRun, Study, StudyRun
from crossalign.study.summary import StudyResult
from crossalign.study.verdicts import hypotheses_section

RUNS = ["mlm", "align"]


def _values(**runs: list[float]) -> dict:
    """``delta`` per run and seed."""
    return {("delta", run): dict(enumerate(xs)) for run, xs in runs.items()}


def test_holm_and_benjamini_hochberg_match_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.5, 0.049]
    assert holm(p) == pytest.approx(list(multitest.multipletests(p, method="holm")[1]))
    assert benjamini_hochberg(p) == pytest.approx(
        list(multitest.multipletests(p, method="fdr_bh")[1])
    )
    with_nan = holm([0.01, float("nan"), 0.02])
    assert math.isnan(with_nan[1]) and with_nan[0] == pytest.approx(0.02)


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3*0.01, max(0.03, 2*0.02), max(0.04, 1*0.04)
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])


def test_a_two_group_contrast_is_welchs_test():
    a, b = [3.1, 2.7, 3.6, 3.0], [2.2, 2.9, 2.0]
    got = linear_contrast([(1.0, a), (-1.0, b)])
    welch = sps.ttest_ind(a, b, equal_var=False, alternative="greater")
    assert got.p == pytest.approx(welch.pvalue)
    assert got.p_opposite == pytest.approx(1 - welch.pvalue)
    assert got.estimate == pytest.approx(sum(a) / 4 - sum(b) / 3)


def test_a_weighted_contrast_by_hand():
    """D = mean(a) - 2 mean(b) - 1, transcribed: SE² = s_a²/n_a + 4 s_b²/n_b, Welch df."""
    a, b = [10.0, 12.0, 14.0], [2.0, 3.0, 4.0, 7.0]
    got = linear_contrast([(1.0, a), (-2.0, b)], constant=-1.0)
    va, vb = 4.0 / 3, 4 * (14.0 / 3) / 4  # s_a² = 4, s_b² = 14/3
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    d = 12.0 - 2 * 4.0 - 1
    assert got.estimate == pytest.approx(d)
    assert got.p == pytest.approx(sps.t.sf(d / se, df))
    half = sps.t.ppf(0.975, df) * se
    assert (got.low, got.high) == pytest.approx((d - half, d + half))
    assert got.mde == pytest.approx((sps.t.ppf(0.95, df) + sps.t.ppf(0.8, df)) * se)


def test_measures_of_one_run_are_paired_by_seed():
    """sup(mlm) - mft(mlm) > 2 is a one-sample test of the per-seed differences."""
    values = {
        ("sup", "mlm"): {0: 90.0, 1: 91.5, 2: 89.0},
        ("mft", "mlm"): {0: 87.0, 1: 88.0, 2: 87.5},
    }
    contrast = parse_contrast("sup(mlm) >= mft(mlm) + 2", ["sup", "mft"], RUNS, "h")
    got = contrast_test(contrast, values, "welch")
    diffs = [90.0 - 87.0 - 2, 91.5 - 88.0 - 2, 89.0 - 87.5 - 2]
    assert got.p == pytest.approx(sps.ttest_1samp(diffs, 0.0, alternative="greater").pvalue)


def _judge(hypothesis: Hypothesis, values: dict, gates=()):
    return judge_all([hypothesis], list(gates), [{}], lambda cell, measures: values, RUNS)


def test_met_not_met_and_inconclusive():
    h = Hypothesis("gap", {"delta": "transfer.delta"}, "delta(mlm) - 2 * delta(align) > 0")
    met = _judge(h, _values(mlm=[40.0, 41.0, 39.0], align=[3.0, 4.0, 2.0]))[1][0]
    assert met.verdict == MET and met.test.estimate == pytest.approx(34.0)
    not_met = _judge(h, _values(mlm=[10.0, 11.0, 9.0], align=[10.0, 11.0, 9.0]))[1][0]
    assert not_met.verdict == NOT_MET
    noisy = _judge(h, _values(mlm=[70.0, 10.0, 40.0], align=[10.0, 25.0, 1.0]))[1][0]
    assert noisy.verdict == INCONCLUSIVE and noisy.test is not None
    one_seed = _judge(h, _values(mlm=[40.0], align=[3.0, 4.0]))[1][0]
    assert one_seed.verdict == INCONCLUSIVE and "run 'mlm' has 1 seed" in one_seed.reason


def test_a_failed_gate_makes_every_hypothesis_inconclusive():
    h = Hypothesis("gap", {"delta": "transfer.delta"}, "delta(mlm) - 2 * delta(align) > 0")
    gate = Gate("competent", {"delta": "transfer.delta"}, "delta(mlm) < 30")
    values = _values(mlm=[40.0, 41.0, 39.0], align=[3.0, 4.0, 2.0])
    gates, results = _judge(h, values, [gate])
    assert [g.passed for g in gates] == [False] and gates[0].value == pytest.approx(-10.0)
    assert results[0].verdict == INCONCLUSIVE and results[0].reason == "gate failed: competent"
    assert results[0].test.p < 0.05  # the test ran; the verdict is withheld
    passing = Gate("competent", {"delta": "transfer.delta"}, "delta(mlm) < 50")
    assert _judge(h, values, [passing])[1][0].verdict == MET
    unmeasured = Gate("mft", {"mft": "most_frequent_tag.sup"}, "mft(mlm) > 0")
    assert _judge(h, values, [unmeasured])[1][0].reason == "gate failed: mft"
    # a gate that guards other hypotheses leaves this one judged
    elsewhere = Gate("competent", {"delta": "transfer.delta"}, "delta(mlm) < 30", hypotheses=["x"])
    assert _judge(h, values, [elsewhere])[1][0].verdict == MET
    with pytest.raises(CrossalignError, match="gates.0.hypotheses: no hypothesis 'x'"):
        check_spec([h], [elsewhere], RUNS)


def test_a_ratio_needs_the_bootstrap():
    ratio = Hypothesis("ratio", {"delta": "transfer.delta"}, "delta(mlm) / delta(align) > 2")
    with pytest.raises(
        CrossalignError, match="not linear in its measures: give it 'test: bootstrap'"
    ):
        check_spec([ratio], [], RUNS)
    ratio.test = "bootstrap"
    check_spec([ratio], [], RUNS)
    values = _values(mlm=[40.0, 41.0, 39.0, 40.5], align=[3.0, 4.0, 2.0, 3.5])
    result = _judge(ratio, values)[1][0]
    assert result.verdict == MET and result.test.estimate == pytest.approx(40.125 / 3.125 - 2)
    assert result.test.low <= result.test.estimate <= result.test.high
    close = _values(mlm=[40.0, 41.0, 39.0], align=[30.0, 30.5, 29.5])
    assert _judge(ratio, close)[1][0].verdict == NOT_MET


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("delta(mlm) > ", "is not an expression"),
        ("delta(mlm)", "must be one comparison"),
        ("aer(mlm) > 0", "'aer' is not one of its measures (delta)"),
        ("delta(tlm) > 0", "no run 'tlm' in the study (mlm, align)"),
        ("delta(mlm) ** 2 > 0", "is not a number, alias(run) or + - * /"),
    ],
)
def test_bad_contrasts_are_refused_by_name(text, message):
    with pytest.raises(CrossalignError, match="hypotheses.0") as e:
        check_spec([Hypothesis("h", {"delta": "transfer.delta"}, text)], [], RUNS)
    assert message in str(e.value)


def test_most_frequent_tag_by_hand():
    from crossalign.evals.most_frequent_tag import most_frequent_tag_accuracy

    train = [(["a", "b", "a"], ["X", "Y", "X"]), (["a", "c"], ["Z", "Y"]), (["b", "c"], ["Z", "Y"])]
    # a: X twice, Z once -> X; b: Y, Z tie -> Y (seen first); unseen d -> Y (3 of 7 overall)
    test = [(["a", "b", "d", "a"], ["X", "Z", "Y", "Z"])]
    assert most_frequent_tag_accuracy(train, test) == pytest.approx(50.0)


def _record(seed_value: float, commit: str | None) -> ResultRecord:
    return ResultRecord(
        eval="transfer", model={}, options={}, metrics={"delta": seed_value},
        versions={"git": commit},
    )  # fmt: skip


def _gap_result(tmp_path: Path, commit: Callable[[int], str | None]) -> StudyResult:
    """Three seeds of runs ``mlm`` (delta about 40) and ``align`` (about 3); a seed's record
    names ``commit(seed)``."""
    runs, records = [], {}
    for name, xs in (("mlm", [40.0, 41.0, 39.0]), ("align", [3.0, 4.0, 2.0])):
        for seed, x in enumerate(xs):
            run_dir = tmp_path / name / str(seed)
            runs.append(PlannedRun(name, seed, {}, {}, run_dir, run_dir / "c.yaml", []))
            records[run_dir] = [_record(x, commit(seed))]
    return StudyResult(runs, records, None)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def test_the_report_names_the_commit_and_warns_about_older_records(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / "notes.txt").write_text("before\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "before")
    before = _git(repo, "rev-parse", "HEAD")
    study_file = repo / "study.yaml"
    study_file.write_text("hypotheses: []\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "hypotheses")
    after = _git(repo, "rev-parse", "HEAD")

    h = Hypothesis("gap", {"delta": "transfer.delta"}, "delta(mlm) - 2 * delta(align) > 0")
    study = Study(name="s", out=str(tmp_path), runs=[StudyRun(name=n) for n in RUNS],
                  hypotheses=[h], files=[str(study_file)])  # fmt: skip
    result = _gap_result(tmp_path, lambda seed: after if seed else before)
    text, data = hypotheses_section(study, result)
    assert f"hypotheses as committed in {after[:10]}" in text
    assert data["records_not_after_commit"] == 2  # the two seed-0 records came before
    assert "**Warning:** 2 of 6 result records" in text
    assert data["hypotheses"][0]["verdict"] == MET
    assert "| gap | — | `delta(mlm) - 2 * delta(align) > 0` | welch | 34 |" in text

    study_file.write_text("hypotheses: [changed]\n")
    text, data = hypotheses_section(study, result)
    assert data["commit"] is None and "uncommitted changes" in text


def test_a_later_commit_that_only_adds_an_unread_evaluation_keeps_the_registration(tmp_path):
    """The registering commit is the oldest of the latest commits with the same design: one
    that adds an evaluation no hypothesis or gate reads, or changes a comment or the title,
    keeps it (the file it extends included); one that changes an evaluation a hypothesis
    reads moves it."""
    from crossalign.study.verdicts import hypotheses_commit

    repo = tmp_path / "repo"
    (repo / "studies").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    base, study_file = repo / "studies" / "base.yaml", repo / "studies" / "cpu.yaml"

    def commit(**texts: str) -> str:
        for name, text in texts.items():
            (repo / "studies" / f"{name}.yaml").write_text(text)
        _git(repo, "add", ".")
        _git(repo, "commit", "-qm", "change")
        return _git(repo, "rev-parse", "HEAD")

    hypothesis = ("hypotheses:\n  - {name: gap, measures: {delta: transfer.delta, w: bli_de.words},"
                  " contrast: 'delta(mlm) > 0'}\n")  # fmt: skip
    registered = commit(
        base=hypothesis + "runs: [{name: mlm, inline: {}}]\n",
        cpu="extends: base.yaml\nname: a\nevaluations:\n  - {eval: transfer}\n"
        "  - {eval: bli, label: bli_de}\n",
    )
    files = [str(study_file), str(base)]
    assert hypotheses_commit(files) == (registered, f"hypotheses as committed in {registered[:10]}")
    later = commit(
        cpu="extends: base.yaml\nname: b  # retitled\nevaluations:\n  - {eval: transfer}\n"
        "  - {eval: bli, label: bli_de}\n  - {eval: retrieval, label: layers, options: {x: 1}}\n",
    )
    commit(base="# a comment\n" + hypothesis + "runs: [{name: mlm, inline: {}}]\n")
    found, note = hypotheses_commit(files)
    assert found == registered and "only where no hypothesis or gate reads" in note
    # given without the file it extends, no older version reads: the latest commit counts
    assert hypotheses_commit([str(study_file)])[0] != registered
    moved = commit(
        cpu="extends: base.yaml\nname: b\nevaluations:\n  - {eval: transfer, options: {lr: 1}}\n"
        "  - {eval: bli, label: bli_de}\n  - {eval: retrieval, label: layers, options: {x: 1}}\n",
    )
    assert hypotheses_commit(files) == (moved, f"hypotheses as committed in {moved[:10]}")
    assert later != moved


def test_the_verdict_design_keeps_every_evaluation_a_measure_reads():
    """Labels may hold dots (``bli.de.words`` reads the evaluation labelled ``bli.de``; the
    unlabelled ``bli`` counts too, on the safe side); an evaluation read by its name counts;
    others, the title and ``contrast`` do not."""
    from crossalign.study.spec import verdict_design

    data = {
        "name": "t", "contrast": [["a", "b"]], "seeds": [0, 1],
        "hypotheses": [{"name": "h", "measures": {"w": "bli.de.words", "z": "transfer.zs"}}],
        "evaluations": [{"eval": "bli", "label": "bli.de"}, {"eval": "bli"},
                        {"eval": "transfer"}, {"eval": "retrieval", "label": "extra"}],
    }  # fmt: skip
    design = verdict_design(data)
    assert design["evaluations"] == data["evaluations"][:3]
    assert "name" not in design and "contrast" not in design and design["seeds"] == [0, 1]


def test_a_fine_tuning_seed_follows_the_run_unless_the_study_sets_it(tmp_path):
    from crossalign.evals.registry import evaluations
    from crossalign.study.run import evaluation_options

    run = PlannedRun("mlm", 3, {}, {"derived": "d"}, tmp_path, tmp_path / "c.yaml", [])
    transfer, mft = evaluations().get("transfer"), evaluations().get("most-frequent-tag")
    assert evaluation_options(transfer, {"derived": "{derived}"}, run, "e").seed == 3
    assert evaluation_options(mft, {"derived": "{derived}"}, run, "e").seed == 3
    assert evaluation_options(transfer, {"derived": "d", "seed": 0}, run, "e").seed == 0
    perplexity = evaluations().get("perplexity")  # its seed is not a fine-tuning seed
    assert evaluation_options(perplexity, {}, run, "e").seed is None
    assert Study(name="s", out="o", runs=[]).seeds == [0, 1, 2, 3, 4]


def test_a_study_report_leads_with_its_verdicts(tmp_path):
    """The study's page opens with the hypotheses' verdicts and the gates, before the runs;
    the correlations stay at its end."""
    import yaml

    from crossalign.fileio import append_jsonl
    from crossalign.study.run import write_study_report

    h = Hypothesis("gap", {"delta": "transfer.delta"}, "delta(mlm) - 2 * delta(align) > 0")
    study = Study(name="s", out=str(tmp_path / "study"), runs=[StudyRun(name=n) for n in RUNS],
                  hypotheses=[h], correlate=[["transfer.delta", "transfer.sup"]])  # fmt: skip
    result = _gap_result(tmp_path, lambda seed: None)
    for run in result.runs:  # the run directories the report reads
        run.run_dir.mkdir(parents=True)
        config = {"run_dir": str(run.run_dir), "objectives": [{"name": run.name}],
                  "train": {"seed": run.seed}}  # fmt: skip
        (run.run_dir / "config.yaml").write_text(yaml.safe_dump(config))
        (record,) = result.records[run.run_dir]
        record.metrics["sup"] = 90.0 - record.metrics["delta"]
        append_jsonl(run.run_dir / "results.jsonl", {
            "eval": "transfer", "metrics": record.metrics, "options": {}, "versions": {"eval": 1},
            "model": {"path": str(run.run_dir / "model"), "run": str(run.run_dir)},
        })  # fmt: skip
    page_path = write_study_report(study, result)
    page = page_path.read_text()
    hypotheses = json.loads((page_path.parent / "hypotheses.json").read_text())
    assert hypotheses == json.loads((page_path.parent / "report.json").read_text())["hypotheses"]
    assert hypotheses["hypotheses"][0]["verdict"] == MET
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## Hypotheses", "## Runs"] and headings[-1] == "## Correlations"
    assert page.index(f"**{MET}**") < page.index("## Runs")
