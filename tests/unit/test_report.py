"""`crossalign report`: seed groups with t intervals, best values by direction, config
differences, figures, a self-contained HTML page, and clear errors for bad run dirs."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
import scipy.stats
import yaml
from markdown_it import MarkdownIt

from crossalign.errors import CrossalignError
from crossalign.evals.registry import Evaluation, Metric
from crossalign.fileio import append_jsonl
from crossalign.report import html, markdown, plots, write_report
from crossalign.report.collect import Cell
from crossalign.report.contrast import verdict
from crossalign.stats import t_interval, welch_p


@dataclass
class NoOptions:
    pass


BLI = Evaluation(
    "bli",
    "test BLI",
    NoOptions,
    {
        "hit@1": Metric("Hit@1", "fraction"),
        "aer": Metric("AER", "fraction", higher_is_better=False),
        "words": Metric("words", "count", higher_is_better=None),
    },
    run="tests:none",
)
LOOKUP = {"bli": BLI}.get


@pytest.fixture(autouse=True)
def tiny_figures(monkeypatch):
    monkeypatch.setattr(plots, "DPI", 20)


def make_run(root: Path, name: str, config: dict, metrics=(), results=()) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"run_dir": str(run), **config}))
    for line in metrics:
        append_jsonl(run / "metrics.jsonl", line)
    for line in results:
        append_jsonl(run / "results.jsonl", line)
    return run


def record(run_name: str, eval_name: str, metrics: dict, options=None, label=None) -> dict:
    run = f"/runs/{run_name}"
    out = {
        "eval": eval_name,
        "model": {"path": f"{run}/model", "run": run, "config_sha256": "0"},
        "options": options or {"layer": 8},
        "metrics": metrics,
        "versions": {"eval": 1},
    }
    if label:
        out["label"] = label
    return out


def config(objective: str, seed: int) -> dict:
    return {"objectives": [{"name": objective}], "train": {"seed": seed, "lr": 0.001}}


def table_lines(page: str, title: str) -> list[str]:
    """The rows of the Markdown table under ``### title``."""
    section = page.split(f"### {title}\n\n", 1)[1]
    return [line for line in section.split("\n\n", 1)[0].splitlines()[2:]]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def test_t_interval_matches_scipy():
    values = [0.41, 0.43, 0.40, 0.47]
    mean, half = t_interval(values)
    sem = scipy.stats.sem(values)
    low, high = scipy.stats.t.interval(0.95, len(values) - 1, loc=mean, scale=sem)
    assert mean == pytest.approx(sum(values) / 4)
    assert (mean - half, mean + half) == pytest.approx((low, high), rel=1e-12)
    assert t_interval([0.5]) == (0.5, None)


def test_seeds_form_one_row_with_mean_and_t_interval(tmp_path):
    hits = {"mlm": [0.30, 0.34, 0.35], "xlm": [0.50, 0.52, 0.57]}
    runs = [
        make_run(
            tmp_path,
            f"{obj}-s{seed}",
            config(obj, seed),
            results=[record(f"{obj}-s{seed}", "bli", {"hit@1": hits[obj][seed]})],
        )
        for obj in hits
        for seed in range(3)
    ]
    paths = write_report(runs, tmp_path / "report", lookup=LOOKUP)
    summary = json.loads(paths.json.read_text())
    assert [g["label"] for g in summary["groups"]] == ["mlm", "xlm"]
    (table,) = summary["tables"]
    assert [(row["group"], row["n"]) for row in table["rows"]] == [("mlm", 3), ("xlm", 3)]
    for row, obj in zip(table["rows"], hits):
        mean, half = t_interval(hits[obj])
        assert row["metrics"]["hit@1"]["mean"] == pytest.approx(mean)
        assert row["metrics"]["hit@1"]["ci95_half_width"] == pytest.approx(half)
    rows = table_lines(paths.markdown.read_text(), "bli")
    assert cells(rows[0]) == [
        "mlm",
        "3",
        f"{100 * sum(hits['mlm']) / 3:.2f} ± {100 * t_interval(hits['mlm'])[1]:.2f}",
    ]


def test_best_marked_by_direction_ties_all_marked_counts_never(tmp_path):
    values = {
        "a": {"hit@1": 0.40, "aer": 0.20, "words": 900},
        "b": {"hit@1": 0.60, "aer": 0.30, "words": 1000},
        "c": {"hit@1": 0.60, "aer": 0.25, "words": 1000},
    }
    runs = [
        make_run(tmp_path, name, config(name, 0), results=[record(name, "bli", m)])
        for name, m in values.items()
    ]
    page = write_report(runs, tmp_path / "report", lookup=LOOKUP).markdown.read_text()
    rows = {cells(line)[0]: cells(line)[1:] for line in table_lines(page, "bli")}
    assert rows == {
        "a": ["40.00", "**20.00**", "900"],
        "b": ["**60.00**", "30.00", "1000"],
        "c": ["**60.00**", "25.00", "1000"],
    }
    assert "Hit@1 % ↑ | AER % ↓ | words |" in page


def test_unknown_evaluation_reported_plainly_and_unranked(tmp_path):
    runs = [
        make_run(tmp_path, n, config(n, 0), results=[record(n, "mystery", {"score": v})])
        for n, v in (("a", 0.25), ("b", 0.75))
    ]
    page = write_report(runs, tmp_path / "report", lookup=LOOKUP).markdown.read_text()
    assert [cells(line) for line in table_lines(page, "mystery")] == [
        ["a", "0.2500"],
        ["b", "0.7500"],
    ]


def test_an_evaluations_own_half_width_joins_its_column_for_a_single_run(tmp_path):
    lookup = {
        "gap": Evaluation(
            "gap",
            "test",
            NoOptions,
            {"gap": Metric("gap", "nats", False), "gap_ci95": Metric("gap ±", "nats", None)},
            run="tests:none",
        )
    }.get
    runs = [
        make_run(
            tmp_path,
            "one",
            config("one", 0),
            results=[record("one", "gap", {"gap": 0.5, "gap_ci95": 0.1})],
        ),
        make_run(
            tmp_path,
            "two-s0",
            config("two", 0),
            results=[record("two-s0", "gap", {"gap": 0.2, "gap_ci95": 0.1})],
        ),
        make_run(
            tmp_path,
            "two-s1",
            config("two", 1),
            results=[record("two-s1", "gap", {"gap": 0.4, "gap_ci95": 0.1})],
        ),
    ]
    page = write_report(runs, tmp_path / "report", lookup=lookup).markdown.read_text()
    half = t_interval([0.2, 0.4])[1]
    assert [cells(line) for line in table_lines(page, "gap")] == [
        ["one", "1", "0.5000 ± 0.1000"],
        ["two", "2", f"**0.3000 ± {half:.4f}**"],
    ]


def test_options_and_labels_make_separate_tables_and_the_latest_record_wins(tmp_path):
    run = make_run(
        tmp_path,
        "a",
        config("mlm", 0),
        results=[
            record("a", "bli", {"hit@1": 0.1}),
            record("a", "bli", {"hit@1": 0.2}, options={"layer": 4}),
            record("a", "bli", {"hit@1": 0.3}, label="bli_train"),
            record("a", "bli", {"hit@1": 0.4}),
        ],
    )
    page = write_report([run], tmp_path / "report", lookup=LOOKUP).markdown.read_text()
    assert cells(table_lines(page, "bli (layer=8)")[0]) == ["a", "40.00"]
    assert cells(table_lines(page, "bli (layer=4)")[0]) == ["a", "20.00"]
    assert cells(table_lines(page, "bli_train (bli)")[0]) == ["a", "30.00"]


@dataclass
class SeededOptions:
    layer: int = 8
    all_layers: bool = False
    seed: int = 0


TAGGER = Evaluation(
    "tagger",
    "test tagger",
    SeededOptions,
    {"zs": Metric("ZS", "percent")},
    run="tests:none",
    run_seed=True,
)


def test_a_run_seeded_evaluation_pools_its_seeds_and_an_option_added_later_reads_its_default(
    tmp_path,
):
    def rec(name, seed, zs, **extra):
        return record(name, "tagger", {"zs": zs}, options={"layer": 8, "seed": seed, **extra})

    runs = [
        make_run(tmp_path, "mlm-s0", config("mlm", 0), results=[rec("mlm-s0", 0, 80.0)]),
        # written after ``all_layers`` was added, with its default
        make_run(
            tmp_path, "mlm-s1", config("mlm", 1), results=[rec("mlm-s1", 1, 82.0, all_layers=False)]
        ),
        # a seed the study set, not the run's: its own table
        make_run(tmp_path, "mlm-s2", config("mlm", 2), results=[rec("mlm-s2", 7, 90.0)]),
    ]
    lookup = {"tagger": TAGGER}.get
    summary = write_report(runs, tmp_path / "report", lookup=lookup).json.read_text()
    pooled, other = json.loads(summary)["tables"]
    assert pooled["options"] == {"layer": 8, "seed": "(the run's)", "all_layers": False}
    assert [(r["group"], r["n"]) for r in pooled["rows"]] == [("mlm", 2)]
    assert pooled["rows"][0]["metrics"]["zs"]["mean"] == pytest.approx(81.0)
    assert other["options"]["seed"] == 7 and other["rows"][0]["n"] == 1
    # without the declaration nothing is filled in or pooled: three tables
    plain = write_report(runs, tmp_path / "plain", lookup={}.get).json.read_text()
    assert len(json.loads(plain)["tables"]) == 3


def test_config_differences_list_the_differing_keys_with_their_values(tmp_path):
    runs = [
        make_run(tmp_path, f"{obj}-s{seed}", config(obj, seed), metrics=[{"step": 1, "loss": 1.0}])
        for obj, seed in (("mlm", 0), ("xlm", 1))
    ]
    summary = json.loads(write_report(runs, tmp_path / "report").json.read_text())
    assert summary["config_differences"] == {
        "objectives.0.name": {"mlm-s0": "mlm", "xlm-s1": "xlm"},
        "train.seed": {"mlm-s0": 0, "xlm-s1": 1},
    }
    page = (tmp_path / "report" / "report.md").read_text()
    section = page.split("## Config differences\n\n", 1)[1]
    assert section.splitlines()[0] == "| run | objectives.0.name | train.seed |"
    assert section.splitlines()[2:4] == ["| mlm-s0 | mlm | 0 |", "| xlm-s1 | xlm | 1 |"]


def test_per_layer_figure_and_curves_inlined_in_a_self_contained_page(tmp_path):
    runs = []
    for obj in ("mlm", "xlm"):
        for seed in range(2):
            by_layer = {f"L{n}/aer": 0.5 - 0.01 * n + 0.01 * seed for n in (0, 4, 8)}
            runs.append(
                make_run(
                    tmp_path,
                    f"{obj}-s{seed}",
                    config(obj, seed),
                    metrics=[
                        {"step": 1, "loss": 5.0, "train/ppl": 140.0},
                        {"step": 2, "loss": 4.0, "train/ppl": 60.0},
                        {"step": 2, "valid/mlm_ppl": 70.0, "valid/mlm_loss": 4.2},
                    ],
                    results=[record(f"{obj}-s{seed}", "bli", by_layer)],
                )
            )
    paths = write_report(runs, tmp_path / "report", title="Layers", lookup=LOOKUP)
    names = sorted(p.name for p in paths.figures)
    assert names == [
        "curve-loss.png",
        "curve-train-ppl.png",
        "curve-valid-mlm-ppl.png",
        "layers-bli.png",
    ]
    assert sorted(p.name for p in (tmp_path / "report" / "figures").iterdir()) == names
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths.figures)
    page = paths.markdown.read_text()
    assert "![bli by layer](figures/layers-bli.png)" in page
    assert [cells(line)[:2] for line in table_lines(page, "bli")] == [
        ["mlm", "layer 0"],
        ["xlm", "layer 0"],
        ["mlm", "layer 4"],
        ["xlm", "layer 4"],
        ["mlm", "layer 8"],
        ["xlm", "layer 8"],
    ]
    html = paths.html.read_text()
    assert html.count('<img src="data:image/png;base64,') == 4
    assert 'src="http' not in html and "<script" not in html and "<link" not in html
    assert "<title>Layers</title>" in html and '<td style="text-align:right">layer 4</td>' in html


def test_extra_sections_are_appended_lead_sections_lead_and_both_rendered(tmp_path):
    run = make_run(tmp_path, "a", config("mlm", 0), metrics=[{"step": 1, "loss": 1.0}])
    body = "| x | y |\n|:---|---:|\n| alignment | **0.81** |\n\n- one `item`"
    lead = [("Hypotheses", "| h | verdict |\n|:---|:---|\n| more | **MET** |")]
    paths = write_report(
        [run], tmp_path / "r", lead_sections=lead, extra_sections=[("Correlations", body)]
    )
    page = paths.markdown.read_text()
    assert page.endswith(f"## Correlations\n\n{body}\n")
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## Hypotheses", "## Runs"]
    assert page.index("| more | **MET** |") < page.index("## Runs")
    html = paths.html.read_text()
    assert '<td style="text-align:right"><strong>0.81</strong></td>' in html
    assert "<li>one <code>item</code></li>" in html


def test_html_is_markdown_its_rendering_with_images_inlined(tmp_path):
    png = b"\x89PNG\r\n\x1a\n not really a picture"
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.png").write_bytes(png)
    page = (
        "# T <script>\n\nSome *emphasis*, **bold *nested***, a [link](x.md).\n\n"
        "1. first\n2. second\n\n| a | b |\n|---|--:|\n| x \\| y | 1 |\n\n"
        "![a *plot*](figures/a.png)\n\ninline ![i](figures/a.png) image\n"
    )
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    want = parser.disable(["link", "autolink"]).render(page)
    want = want.replace('src="figures/a.png"', f'src="{uri}"')
    lone = f'<p><img src="{uri}" alt="a plot" /></p>'
    assert lone in want and "<em>emphasis</em>" in want and "<td>x | y</td>" in want
    figure = f'<figure><img src="{uri}" alt="a plot" /><figcaption>a <em>plot</em></figcaption>'
    assert html.body(page, tmp_path) == want.replace(lone, figure + "</figure>")
    assert "&lt;script&gt;" in want and "a [link](x.md)." in want and "<a " not in want
    with pytest.raises(ValueError, match="not a file under"):
        html.body("![gone](figures/gone.png)", tmp_path)
    with pytest.raises(ValueError, match="not a file under"):
        html.body("![far](https://example.org/a.png)", tmp_path)


def test_a_half_written_last_line_is_dropped(tmp_path, capsys):
    run = make_run(
        tmp_path,
        "a",
        config("mlm", 0),
        metrics=[{"step": 1, "loss": 2.0}],
        results=[record("a", "bli", {"hit@1": 0.5})],
    )
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "lo')
    with open(run / "results.jsonl", "a") as f:
        f.write('{"eval": "bli", "met')
    paths = write_report([run], tmp_path / "report", lookup=LOOKUP)
    assert cells(table_lines(paths.markdown.read_text(), "bli")[0]) == ["a", "50.00"]
    assert "dropping a half-written last line" in capsys.readouterr().err


def test_bad_run_dirs_are_one_line_errors_naming_them(tmp_path):
    good = make_run(tmp_path, "good", config("mlm", 0), metrics=[{"step": 1, "loss": 1.0}])
    empty = make_run(tmp_path, "empty", config("mlm", 1))
    (tmp_path / "plain").mkdir()
    for bad, words in ((tmp_path / "plain", "no config.yaml"), (empty, "nothing to report")):
        with pytest.raises(CrossalignError) as e:
            write_report([good, bad], tmp_path / "report")
        assert str(bad) in str(e.value) and words in str(e.value)
        assert "\n" not in str(e.value)
    assert not (tmp_path / "report").exists()


def test_a_failed_report_keeps_the_previous_one_and_others_files_are_safe(tmp_path, monkeypatch):
    run = make_run(tmp_path, "a", config("mlm", 0), metrics=[{"step": 1, "loss": 1.0}])
    out = tmp_path / "report"
    first = write_report([run], out, title="first").markdown.read_text()

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(markdown, "render", broken)
    with pytest.raises(RuntimeError):
        write_report([run], out, title="second")
    assert (out / "report.md").read_text() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "report"]
    with pytest.raises(CrossalignError, match=r"not a report \(a, report\)"):
        write_report([run], tmp_path)
    assert (run / "config.yaml").is_file()


def test_cli_report(tmp_path, capsys):
    from crossalign.cli import main

    run = make_run(tmp_path, "a", config("mlm", 0), metrics=[{"step": 1, "loss": 1.0}])
    assert main(["report", str(run), "--out", str(tmp_path / "r"), "--title", "T"]) == 0
    assert "report.md" in capsys.readouterr().out
    assert (tmp_path / "r" / "report.md").read_text().startswith("# T\n")
    assert main(["report", str(tmp_path / "missing"), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crossalign: error: ") and "missing" in err and err.count("\n") == 1
    other = make_run(tmp_path, "b", config("xlm", 0), metrics=[{"step": 1, "loss": 1.0}])
    args = ["report", str(run), str(other), "--out", str(tmp_path / "r3"), "--contrast", "a,b"]
    assert main(args) == 0
    assert "**b vs a**: of 0 ranked measures" in (tmp_path / "r3" / "report.md").read_text()
    with pytest.raises(SystemExit):
        main(["report", str(run), "--out", str(tmp_path / "r4"), "--contrast", "a"])
    assert "'a' is not BASELINE,METHOD" in capsys.readouterr().err


def test_group_names_drop_the_seed_part_of_run_names():
    from crossalign.report.collect import group_label

    assert group_label(["mlm/seed-0", "mlm/seed-1"]) == "mlm"
    assert group_label(["mlm-s0", "mlm-s1"]) == "mlm"
    assert group_label(["xlm_seed_0", "xlm_seed_1", "xlm_seed_2"]) == "xlm"
    assert group_label(["a", "b"]) == "a, b"


def test_runs_measuring_one_model_per_seed_form_one_group(tmp_path):
    """A study's ``model`` run (one kept model per seed) and a run continued from a per-seed
    model differ in a path only where it names the seed: one group; a path that differs
    elsewhere, or names another run's seed, keeps its runs apart."""
    from crossalign.report.collect import collect, seedless

    def as_is(name: str, seed: int, path: str) -> Path:
        cfg = {"model": {"path": path}, "train": {"steps": 0, "seed": seed}}
        return make_run(tmp_path, name, cfg, results=[record(name, "bli", {"hit@1": seed / 10})])

    runs = [as_is(f"gc/seed-{s}", s, f"runs/s/mlm_gc/seed-{s}/model") for s in (0, 1, 2)]
    runs.append(as_is("v2/seed-2", 2, "runs/s_v2/mlm/seed-2/model"))  # v2: not the seed
    runs.append(as_is("v2/seed-3", 3, "runs/s_v2/mlm/seed-3/model"))
    runs.append(as_is("x/seed-2", 2, "runs/a/mlm/seed-2/model"))  # differs elsewhere
    runs.append(as_is("x/seed-3", 3, "runs/b/mlm/seed-3/model"))
    runs.append(as_is("odd/seed-1", 1, "runs/s/mlm/seed-0/model"))  # another seed's model
    groups = collect(runs, LOOKUP).groups
    assert [[r.label for r in g.runs] for g in groups] == [
        ["gc/seed-0", "gc/seed-1", "gc/seed-2"],
        ["v2/seed-2", "v2/seed-3"],
        ["x/seed-2"],
        ["x/seed-3"],
        ["odd/seed-1"],
    ]
    table = collect(runs[:3], LOOKUP).tables[0]
    assert [(row.n, row.cells["hit@1"].values) for row in table.rows] == [(3, [0.0, 0.1, 0.2])]
    assert seedless("runs/seed-12/model-1", 1) == "runs/seed-12/model-{seed}"
    assert seedless("x/1", True) == "x/1"
    assert seedless(1, 1) == 1


def test_runs_table_gives_training_and_evaluation_minutes(tmp_path):
    def timed(name: str, seed: int, train_s: list[float], eval_s: list[float]) -> Path:
        lines = [{"step": i + 1, "loss": 1.0, "train_seconds": s} for i, s in enumerate(train_s)]
        results = [dict(record(name, "bli", {"hit@1": 0.5}), time={"seconds": s}) for s in eval_s]
        return make_run(tmp_path, name, config("mlm", seed), metrics=lines, results=results)

    runs = [timed("a-s0", 0, [30.0, 120.0], [60.0, 30.0]), timed("a-s1", 1, [240.0], [90.0])]
    runs.append(make_run(tmp_path, "b-s0", config("xlm", 0), metrics=[{"step": 1, "loss": 1.0}]))
    page = write_report(runs, tmp_path / "report", lookup=LOOKUP).markdown.read_text()
    section = page.split("## Runs\n\n", 1)[1]
    rows = [cells(line) for line in section.split("\n\n", 1)[0].splitlines()[2:]]
    # a: training (2 + 4) / 2 = 3.0 min per run, evaluation (1.5 + 1.5) / 2 = 1.5
    assert rows[0][0] == "a" and rows[0][3:] == ["3.0", "1.5"]
    assert rows[1][0] == "b-s0" and rows[1][3:] == ["n/a", "0.0"]
    assert (
        "Wall-clock time: 0.10 h training (1 run without a logged time), 0.05 h evaluation." in page
    )


def test_welch_p_matches_scipy_and_the_verdict_reads_the_adjusted_p():
    a, b = [0.30, 0.34, 0.35], [0.50, 0.52, 0.57]
    assert welch_p(a, b) == pytest.approx(scipy.stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert math.isnan(welch_p([0.3], b)) and math.isnan(welch_p([1.0, 1.0], [2.0, 2.0]))
    low, high = Cell(0.30, 0.05, []), Cell(0.50, 0.10, [])
    assert verdict(low, high, True, 0.01) == "better" and verdict(low, high, False, 0.01) == "worse"
    assert verdict(high, low, True, 0.049) == "worse"
    assert verdict(low, high, True, 0.05) == "≈"  # adjusted p at the level: not apart
    assert verdict(Cell(0.3, None, []), high, True, 0.01) == "n/a"  # one run: no interval
    assert verdict(Cell(math.nan, 0.1, []), high, True, 0.01) == "n/a"
    assert verdict(low, high, True, math.nan) == "n/a"


def test_contrast_lists_measures_apart_by_direction_with_welch_p(tmp_path):
    pairs_of = {  # xlm: better hit@1 and worse (higher) AER beyond noise; words are not ranked
        "mlm": [(0.30, 0.20), (0.34, 0.21), (0.35, 0.22)],
        "xlm": [(0.50, 0.30), (0.52, 0.31), (0.57, 0.33)],
        "tlm": [(0.20, 0.20), (0.40, 0.22), (0.45, 0.21)],
    }
    values = {
        obj: [{"hit@1": h, "aer": e, "words": 9} for h, e in seeds]
        for obj, seeds in pairs_of.items()
    }
    runs = [
        make_run(tmp_path, f"{obj}-s{seed}", config(obj, seed),
                 results=[record(f"{obj}-s{seed}", "bli", m)])
        for obj, seeds in values.items()
        for seed, m in enumerate(seeds)
    ]  # fmt: skip
    pairs = [("mlm", "xlm"), ("mlm", "tlm")]
    page = write_report(runs, tmp_path / "r", lookup=LOOKUP, contrasts=pairs).markdown.read_text()
    section = page.split("## Contrasts\n\n", 1)[1]
    assert (
        "**xlm vs mlm**: of 2 ranked measures, 1 better and 1 worse beyond seed noise "
        "(Holm-adjusted Welch p < 0.05 over the report's 4 tests), 0 within it." in section
    )
    assert (
        "**tlm vs mlm**: of 2 ranked measures, 0 better and 0 worse beyond seed noise "
        "(Holm-adjusted Welch p < 0.05 over the report's 4 tests), 2 within it." in section
    )
    rows = [cells(line) for line in section.splitlines() if line.startswith("| bli")]
    hit = [v["hit@1"] for v in values["mlm"]], [v["hit@1"] for v in values["xlm"]]
    p = scipy.stats.ttest_ind(*hit, equal_var=False).pvalue
    assert rows[0][0] == "bli: Hit@1 % ↑" and rows[0][3] == "+20.00" and rows[0][7] == "better"
    aer = [v["aer"] for v in values["mlm"]], [v["aer"] for v in values["xlm"]]
    p_aer = scipy.stats.ttest_ind(*aer, equal_var=False).pvalue
    # Holm over the 4 tests: p_aer is the smallest (x4), p the second (x3)
    assert rows[0][4:7] == [f"{p:.2g}", f"{3 * p:.2g}", f"{p * 4 / 2:.2g}"]
    assert rows[1][0] == "bli: AER % ↓" and rows[1][7] == "worse"
    assert rows[1][5] == f"{4 * p_aer:.2g}"
    summary = json.loads((tmp_path / "r" / "report.json").read_text())["contrasts"]
    assert [(c["baseline"], c["method"]) for c in summary] == pairs
    hit_json = summary[0]["measures"][0]
    assert hit_json["verdict"] == "better" and hit_json["welch_p"] == pytest.approx(p)
    assert hit_json["holm_p"] == pytest.approx(3 * p)
    assert hit_json["method"]["mean"] == pytest.approx(sum(hit[1]) / 3)
    with pytest.raises(CrossalignError, match="no group 'bert'; its groups: mlm, xlm, tlm$"):
        write_report(runs, tmp_path / "r2", lookup=LOOKUP, contrasts=[("mlm", "bert")])
    assert not (tmp_path / "r2").exists()
    # a group of one run has no interval: its measures are counted apart, not as noise
    one = make_run(
        tmp_path, "one", config("one", 0), results=[record("one", "bli", values["xlm"][0])]
    )
    page = write_report([*runs, one], tmp_path / "r3", lookup=LOOKUP, contrasts=[("mlm", "one")])
    assert "0 within it, 2 without an interval (a group of one run) or a p." in (
        page.markdown.read_text()
    )


def test_contrast_sides_given_as_run_directories_pick_their_groups(tmp_path):
    runs = {
        (cell, obj): [
            make_run(tmp_path, f"{cell}/{obj}/seed-{seed}", {**config(obj, seed), "cell": cell},
                     results=[record(obj, "bli", {"hit@1": h + 0.01 * seed})])
            for seed in range(2)
        ]
        for cell in ("trans", "inv")
        for obj, h in (("mlm", 0.3), ("xlm", 0.6))
    }  # fmt: skip
    pairs = [(runs[cell, "mlm"], runs[cell, "xlm"]) for cell in ("trans", "inv")]
    every = [run for group in runs.values() for run in group]
    text = write_report(every, tmp_path / "r", lookup=LOOKUP, contrasts=pairs).markdown.read_text()
    assert "**trans/xlm vs trans/mlm**: of 1 ranked measures, 1 better" in text
    assert "**inv/xlm vs inv/mlm**: of 1 ranked measures, 1 better" in text


def test_contrasts_compare_final_models_not_checkpoints(tmp_path):
    """A measurement of checkpoints (a study's ``checkpoints``) gets its own tables and a
    curve, but the contrasts, and their multiple-test adjustment, count final models only."""

    def at(rec: dict, place: str) -> dict:
        run = rec["model"]["run"]
        return {**rec, "model": {**rec["model"], "path": f"{run}/{place}"}}

    runs = []
    for obj, hits in {"mlm": (0.30, 0.34, 0.35), "xlm": (0.50, 0.52, 0.57)}.items():
        for seed, hit in enumerate(hits):
            name = f"{obj}-s{seed}"
            final = record(name, "bli", {"hit@1": hit, "aer": 0.2 + seed / 100})
            early = at(record(name, "bli", {"hit@1": hit / 2, "aer": 0.1 + seed}),
                       "checkpoints/step-00000002")  # fmt: skip
            cfg = {**config(obj, seed), "train": {**config(obj, seed)["train"], "steps": 4}}
            runs.append(make_run(tmp_path, name, cfg, results=[final, early]))
    page = write_report(runs, tmp_path / "r", lookup=LOOKUP, contrasts=[("mlm", "xlm")])
    text = page.markdown.read_text()
    assert "### bli (final model)" in text and "### bli (model checkpoints/step-00000002)" in text
    assert "of 2 ranked measures" in text and "over the report's 2 tests" in text
    assert "checkpoints/step" not in text.split("## Contrasts", 1)[1].split("##", 1)[0]
    assert "![bli against the training step](figures/checkpoints-bli-1.png)" in text
