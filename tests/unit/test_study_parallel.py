"""``compare --jobs N``: the child processes share the CPU cores instead of each taking all."""

from __future__ import annotations

import sys

import pytest

from crossalign.errors import CrossalignError
from crossalign.study import parallel
from crossalign.study.parallel import Unit, child_environment


@pytest.mark.parametrize(
    ("jobs", "cores", "threads"), [(2, 2, "1"), (5, 16, "3"), (1, 4, "4"), (8, 2, "1")]
)
def test_each_seed_process_gets_its_share_of_the_cores(jobs, cores, threads):
    env = child_environment(jobs, {"PATH": "/bin"}, cores=cores)
    assert env == {"PATH": "/bin", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def test_threads_the_environment_sets_are_kept():
    env = child_environment(2, {"OMP_NUM_THREADS": "4"}, cores=16)
    assert env["OMP_NUM_THREADS"] == "4"
    assert env["MKL_NUM_THREADS"] == "8"


def test_the_seed_processes_run_with_their_share(tmp_path, monkeypatch, capsys):
    """The environment reaches the child processes (torch takes its intra-op threads from
    ``OMP_NUM_THREADS``)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(parallel, "available_cores", lambda: 4)
    probe = "import os; print(os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])"
    monkeypatch.setattr(parallel, "child_command", lambda *a: [sys.executable, "-c", probe])
    work = [Unit(0, ("a",), False), Unit(0, ("b",), False), Unit(1, ("a", "b"), True)]
    parallel._run_children("study.yaml", [], work, 2, tmp_path)
    printed = capsys.readouterr().out
    assert "2 processes at a time, 2 CPU thread(s) each" in printed
    for name in ("seed 0 a", "seed 0 b", "seed 1"):
        assert f"== {name}: done" in printed
    for log in ("seed-0-a.log", "seed-0-b.log", "seed-1.log"):
        assert (tmp_path / log).read_text().split() == ["2", "2"]


def test_a_failed_seed_process_is_named_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "child_command", lambda *a: [sys.executable, "-c", "exit(3)"])
    with pytest.raises(CrossalignError, match="seed 0 run failed; see .*seed-0-run.log"):
        parallel._run_children("study.yaml", [], [Unit(0, ("run",), False)], 1, tmp_path)


def test_a_child_command_passes_records_and_pruning_on():
    command = parallel.child_command("s.yaml", ["vars.steps=5"], ("a", "b"), 3, None, True)
    assert command[1:] == ["-m", "crossalign", "compare", "s.yaml", "--seeds", "3", "--runs",
                           "a,b", "--no-report", "--prune-checkpoints", "vars.steps=5"]  # fmt: skip
    command = parallel.child_command("s.yaml", [], ("a",), 0, parallel.Path("rec"))
    assert command[-2:] == ["--records", "rec"] and "--prune-checkpoints" not in command


def test_names_dir_reads_a_path_however_it_is_written(tmp_path, monkeypatch):
    """``spec.names_dir``: relative or absolute, with ``//`` (``--out runs/x/``) or ``./`` in
    it, and not a longer name that starts the same."""
    from pathlib import Path

    from crossalign.study.spec import names_dir

    monkeypatch.chdir(tmp_path)
    run = Path("runs/x/runs/mlm/checkpoints")
    assert names_dir(["runs/x//runs/mlm/checkpoints/step-00000002"], run)
    assert names_dir([f"{tmp_path}/runs/x/runs/mlm/checkpoints/step-2"], run)
    assert names_dir(["model.path=runs/x/./runs/mlm/checkpoints"], run)
    assert names_dir([str(tmp_path / "runs/x/runs/mlm/checkpoints")], Path(tmp_path / run))
    assert not names_dir(["runs/x/runs/mlm/checkpoints_old/step-2"], run)
    assert not names_dir(["runs/x/runs/mlm/model"], run)
