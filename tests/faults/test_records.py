"""Result records, reports and output files under faults: a complete record is never cut, a
report never deletes files it did not write, a finished evaluation is shown even when its
record cannot be written, a copied run is not a second seed, a line separator inside a
record does not split it, and an output that cannot be written is refused before the model
loads."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.errors import CrossalignError
from crossalign.evals import results as results_module
from crossalign.evals.results import read_results
from crossalign.fileio import append_jsonl, read_jsonl_lines
from crossalign.report import write_report
from crossalign.run_dir import read_metrics
from tests.integration.test_align_cli import tiny_model  # noqa: F401
from tests.unit.test_report import LOOKUP, config, make_run, record, tiny_figures  # noqa: F401


def error_line(err: str) -> str:
    """The one ``crossalign: error:`` line of ``err``; no traceback."""
    assert "Traceback" not in err, err[-2000:]
    lines = [x for x in err.splitlines() if x.startswith("crossalign: error: ")]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


# ---- 1. a complete last record without its newline is kept ---------------------------


def test_a_valid_last_line_without_a_newline_is_kept_by_the_next_append(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    first = record("a", "bli", {"hit@1": 0.5})
    path.write_text(json.dumps(first))  # as `printf '%s' "$(cat f)"` leaves it
    assert [r.metrics for r in read_results(path)] == [{"hit@1": 0.5}]
    append_jsonl(path, record("a", "bli", {"hit@1": 0.6}))
    assert [r.metrics for r in read_results(path)] == [{"hit@1": 0.5}, {"hit@1": 0.6}]
    assert path.read_text().endswith("}\n") and path.read_text().count("\n") == 2
    assert capsys.readouterr().err == ""


def test_a_half_written_last_line_is_cut_by_the_next_append_with_a_note(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    append_jsonl(path, record("a", "bli", {"hit@1": 0.5}))
    with open(path, "a") as f:
        f.write('{"eval": "bli", "met')
    append_jsonl(path, record("a", "bli", {"hit@1": 0.6}))
    assert [r.metrics for r in read_results(path)] == [{"hit@1": 0.5}, {"hit@1": 0.6}]
    err = capsys.readouterr().err
    assert f"{path}:2: cutting a half-written last line (not valid JSON)" in err


# ---- 2. a report replaces only the files it wrote -------------------------------------


@pytest.fixture
def report_run(tmp_path) -> Path:
    return make_run(
        tmp_path,
        "a",
        config("mlm", 0),
        metrics=[{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}],
        results=[record("a", "bli", {"hit@1": 0.5})],
    )


def test_a_report_never_deletes_files_it_did_not_write(tmp_path, report_run, capsys):
    out = tmp_path / "paper"
    write_report([report_run], out, lookup=LOOKUP)
    figures = out / "figures"
    assert any(figures.iterdir())
    (figures / "fig1-final.png").write_bytes(b"\x89PNG mine")
    (figures / "notes.txt").write_text("mine\n")
    rc = main(["report", str(report_run), "--out", str(out)])
    line = error_line(capsys.readouterr().err)
    assert rc == 2
    assert "figures/fig1-final.png, figures/notes.txt" in line and str(out) in line
    assert (figures / "fig1-final.png").read_bytes() == b"\x89PNG mine"
    assert (figures / "notes.txt").read_text() == "mine\n"
    # a directory of the user's beside the report is refused too
    (figures / "notes.txt").unlink()
    (figures / "fig1-final.png").unlink()
    (out / "drafts").mkdir()
    with pytest.raises(CrossalignError, match=r"not a report \(drafts\)"):
        write_report([report_run], out, lookup=LOOKUP)
    (out / "drafts").rmdir()
    # what the report wrote itself is replaced, also a figure the new report no longer has
    paths = write_report([report_run], out, title="again", lookup=LOOKUP)
    assert paths.markdown.read_text().startswith("# again\n")


def test_a_report_without_figures_is_replaced(tmp_path):
    """A report of records alone (a study's ``model`` runs: no training curves) leaves an
    empty ``figures/``; writing it again replaces it instead of refusing the folder."""
    as_is = {"model": {"path": "m"}, "train": {"steps": 0, "seed": 0}}
    run = make_run(tmp_path, "as-is", as_is, results=[record("as-is", "bli", {"hit@1": 0.5})])
    out = tmp_path / "report"
    write_report([run], out, lookup=LOOKUP)
    assert (out / "figures").is_dir() and not any((out / "figures").iterdir())
    assert write_report([run], out, title="again", lookup=LOOKUP).markdown.is_file()
    (out / "figures" / "mine.png").write_bytes(b"x")  # no longer empty: the user's
    with pytest.raises(CrossalignError, match=r"not a report \(figures\)"):
        write_report([run], out, lookup=LOOKUP)


def test_a_report_replaces_one_written_before_its_manifest(tmp_path, report_run):
    out = tmp_path / "report"
    write_report([report_run], out, lookup=LOOKUP)
    (out / "manifest.json").unlink()  # as reports were written before the manifest
    assert write_report([report_run], out, title="new", lookup=LOOKUP).markdown.is_file()
    (out / "manifest.json").unlink()
    (out / "figures" / "mine.png").write_bytes(b"x")
    with pytest.raises(CrossalignError, match=r"not a report \(figures/mine\.png\)"):
        write_report([report_run], out, lookup=LOOKUP)


# ---- 3. a finished evaluation is shown when its record cannot be written --------------


@pytest.fixture
def predictions(tmp_path) -> tuple[Path, Path]:
    """A prediction directory with ``pred.txt`` and a Pharaoh gold file for it."""
    (tmp_path / "preds").mkdir()
    pred, gold = tmp_path / "preds" / "pred.txt", tmp_path / "gold.txt"
    pred.write_text("0-0 1-1\n0-0\n")
    gold.write_text("0-0 1-1\n0-1\n")
    return pred, gold


def test_an_evaluation_whose_record_cannot_be_written_is_shown_first(predictions, capsys):
    pred, gold = predictions
    (pred.parent / "results.jsonl").mkdir()  # the default record path cannot be appended to
    rc = main(["eval", "aer", "--pred", str(pred), "--gold", str(gold)])
    out, err = capsys.readouterr()
    assert "33.33" in out  # the table was printed
    line = error_line(err)
    assert rc == 2
    assert f"aer finished, but its record was not written: cannot append to {pred.parent}" in line
    assert "point --results FILE at a writable directory" in line


def test_a_read_only_run_directory_still_shows_the_result(predictions, capsys, monkeypatch):
    pred, gold = predictions

    def read_only(path, record):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(results_module, "append_jsonl", read_only)
    rc = main(["eval", "aer", "--pred", str(pred), "--gold", str(gold)])
    out, err = capsys.readouterr()
    assert rc == 2 and "33.33" in out
    line = error_line(err)
    assert f"cannot append to {pred.parent / 'results.jsonl'} (Read-only file system)" in line


# ---- 4. a copied run directory is not a second seed -----------------------------------


def test_identical_records_of_two_runs_are_warned_about(tmp_path, capsys):
    r1 = make_run(
        tmp_path,
        "r1",
        config("mlm", 0),
        metrics=[{"step": 1, "loss": 1.0}],
        results=[record("r1", "bli", {"hit@1": 0.5})],
    )
    shutil.copytree(r1, tmp_path / "r1dup")
    seed_1 = record("r2", "bli", {"hit@1": 0.5})  # the same score from another seed's config
    seed_1["model"]["config_sha256"] = "1"
    other = make_run(
        tmp_path,
        "r2",
        config("mlm", 1),
        metrics=[{"step": 1, "loss": 1.0}],
        results=[seed_1],
    )
    paths = write_report([r1, tmp_path / "r1dup", other], tmp_path / "report", lookup=LOOKUP)
    err = capsys.readouterr().err
    warning = "warning: r1 and r1dup hold identical result records (bli)"
    assert warning in err and err.count("warning:") == 1
    assert "count as 2 seeds in group r1, r1dup, r2; give one of them" in err
    assert warning.removeprefix("warning: ") in paths.markdown.read_text()
    assert any("r1dup" in w for w in json.loads(paths.json.read_text())["warnings"])


# ---- 5. a line separator inside a record does not split it ----------------------------


def test_a_line_separator_in_a_path_stays_inside_its_record(tmp_path):
    path = tmp_path / "results.jsonl"
    odd = record("a", "bli", {"hit@1": 0.5})
    odd["model"]["path"] = "/runs/a\u2028b\u2029c\x85d/model"
    append_jsonl(path, odd)
    append_jsonl(path, record("a", "bli", {"hit@1": 0.6}))
    raw = path.read_bytes().decode("utf-8")
    assert "\u2028" not in raw and "\u2029" not in raw and "\x85" not in raw
    assert [r.model["path"] for r in read_results(path)][0] == odd["model"]["path"]
    # a file written before (the separator unescaped) reads as its two records too
    path.write_text(json.dumps(odd, ensure_ascii=False) + "\n" + json.dumps(odd) + "\n")
    assert len(read_jsonl_lines(path)) == 2
    assert read_results(path)[0].model["path"] == odd["model"]["path"]


def test_metrics_lines_are_split_on_newlines_only(tmp_path):
    lines = [{"step": 1, "note": "a\u2028b"}, {"step": 2, "loss": 1.0}]
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    )
    assert read_metrics(tmp_path) == lines


# ---- 6. an output that cannot be written is refused before the model loads ------------


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading a model fails the test: the check must come first."""
    from crossalign.align.sentences import Aligner

    def loaded(*args, **kwargs):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(Aligner, "from_config", loaded)
    monkeypatch.setattr(results_module, "evaluate", loaded)


def _unwritable(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """An output path that cannot be written, and the words the refusal gives."""
    if kind == "directory":
        (tmp_path / "taken").mkdir()
        return tmp_path / "taken", "is a directory"
    (tmp_path / "plain").write_text("x\n")
    return tmp_path / "plain" / "out.txt", "not a directory"


@pytest.mark.parametrize("kind", ["directory", "under-a-file"])
@pytest.mark.parametrize("flag", ["--out", "--output-prob", "--output-words"])
def test_align_refuses_an_unwritable_output_before_loading(
    tiny_model,  # noqa: F811
    tmp_path,
    capsys,
    no_model_load,
    flag,
    kind,
):
    src = tmp_path / "src.txt"
    src.write_text("hello world\n")
    bad, words = _unwritable(tmp_path, kind)
    args = ["align", "--model", str(tiny_model), str(src), str(src), flag, str(bad)]
    if flag != "--out":
        args += ["--out", str(tmp_path / "links.txt")]
    assert main(args) == 2
    line = error_line(capsys.readouterr().err)
    assert f"{flag} {bad}" in line and words in line


@pytest.mark.parametrize("kind", ["directory", "under-a-file"])
def test_symmetrize_refuses_an_unwritable_output(tmp_path, capsys, kind):
    links = tmp_path / "links.txt"
    links.write_text("0-0\n")
    bad, words = _unwritable(tmp_path, kind)
    args = ["symmetrize", "--forward", str(links), "--backward", str(links), "--out", str(bad)]
    assert main(args) == 2
    line = error_line(capsys.readouterr().err)
    assert f"--out {bad}" in line and words in line


@pytest.mark.parametrize("kind", ["directory", "under-a-file"])
@pytest.mark.parametrize("flag", ["--results", "--json"])
def test_eval_refuses_an_unwritable_record_before_evaluating(
    predictions, tmp_path, capsys, no_model_load, flag, kind
):
    pred, gold = predictions
    bad, words = _unwritable(tmp_path, kind)
    assert main(["eval", "aer", "--pred", str(pred), "--gold", str(gold), flag, str(bad)]) == 2
    line = error_line(capsys.readouterr().err)
    assert f"{flag} {bad}" in line and words in line
