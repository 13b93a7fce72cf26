"""``compare --jobs N``: the seed processes share the CPU cores instead of each taking all."""

from __future__ import annotations

import sys

import pytest

from crossalign.errors import CrossalignError
from crossalign.study import parallel
from crossalign.study.parallel import child_environment


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
    parallel._run_children("study.yaml", [], ["run"], [0, 1], 2, tmp_path)
    assert "2 seed processes at a time, 2 CPU thread(s) each" in capsys.readouterr().out
    for seed in (0, 1):
        assert (tmp_path / f"seed-{seed}.log").read_text().split() == ["2", "2"]


def test_a_failed_seed_process_is_named_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "child_command", lambda *a: [sys.executable, "-c", "exit(3)"])
    with pytest.raises(CrossalignError, match="seed 0 failed; see .*seed-0.log"):
        parallel._run_children("study.yaml", [], ["run"], [0], 1, tmp_path)
