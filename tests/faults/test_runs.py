"""Fault injection on training runs: concurrent runs, finished runs, divergence, changed
settings, branches, corrupt checkpoints, half-written logs and a full disk.

Every test first breaks something the way a user or the machine would, then checks that
nothing was lost and the message names the problem and the fix.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crossalign.checkpoint import (
    checkpoint_problem,
    find_resume_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    remove_checkpoints,
)
from crossalign.cli import main
from crossalign.run_dir import RunLock, read_metrics, setting_changes, truncate_metrics
from tests.integration.conftest import tiny_overrides

STEPS = {"train.steps": 4, "train.save_every": 2, "train.keep_checkpoints": 5}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 4-step tiny run with checkpoints after steps 2 and 4."""
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", *tiny_overrides(run, **STEPS)]) == 0
    return run


@pytest.fixture
def run(finished, tmp_path) -> tuple[Path, callable]:
    """A private copy of the finished run, and its overrides with changes."""
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy, lambda **extra: tiny_overrides(copy, **{**STEPS, **extra})


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def train_records(path: Path) -> dict[int, dict]:
    """metrics.jsonl training lines by step (timing left out); asserts each step is logged once."""
    out = {}
    for r in records(path):
        if "loss" in r:
            assert r["step"] not in out, f"step {r['step']} logged twice"
            out[r["step"]] = {
                k: v for k, v in r.items() if k not in ("tokens_per_s", "train_seconds")
            }
    return out


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("crossalign: error: ")]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


# ---- 1. one run at a time ------------------------------------------------------------


HOLD = (
    "import sys, time, pathlib; from crossalign.run_dir import RunLock; "
    "lock = RunLock(pathlib.Path(sys.argv[1])); lock.acquire(); print('locked', flush=True); "
    "time.sleep(600)"
)


def test_a_run_dir_in_use_is_refused_and_a_dead_holder_blocks_nothing(tmp_path, capsys):
    run_dir = tmp_path / "busy"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["train", *tiny_overrides(run_dir)]) == 2
        line = error_line(capsys)
        assert f"{run_dir} is in use by another run (pid {holder.pid} on " in line
        assert [p.name for p in run_dir.iterdir()] == [".lock"]  # nothing written
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = RunLock(run_dir)
    lock.acquire()  # the kernel dropped the dead holder's lock
    lock.release()


@pytest.mark.slow
def test_two_real_runs_a_second_apart(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    long = {"train.steps": 300, "train.save_every": 100}
    args = [sys.executable, "-m", "crossalign", "train", *tiny_overrides(tmp_path / "r", **long)]
    log = open(tmp_path / "first.log", "w")  # noqa: SIM115
    first = subprocess.Popen(args, env=env, stdout=log, stderr=log)
    lock = tmp_path / "r" / ".lock"
    deadline = time.time() + 120
    while f"pid {first.pid} " not in (lock.read_text() if lock.exists() else ""):
        assert time.time() < deadline and first.poll() is None
        time.sleep(0.2)
    time.sleep(1)  # then the second starts while the first trains
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert first.wait(timeout=300) == 0, (tmp_path / "first.log").read_text()[-2000:]
    assert second.returncode == 2 and f"pid {first.pid}" in second.stderr
    assert sorted(train_records(tmp_path / "r" / "metrics.jsonl")) == list(range(1, 301))


# ---- 2, 3. nothing deleted or replaced -------------------------------------------------


def test_keep_checkpoints_zero_never_prunes_the_newest(run):
    run_dir, _ = run
    prune_checkpoints(run_dir, 0)
    assert [p.name for p in list_checkpoints(run_dir)] == ["step-00000004"]


def test_removing_a_finished_runs_checkpoints_keeps_what_is_there_for_inspection(run, monkeypatch):
    """``compare --prune-checkpoints``: every good checkpoint goes, the newest too; a bad one
    and a folder moved aside stay; a deletion interrupted after its rename leaves no half
    checkpoint that lists as one, and the next call finishes it."""
    run_dir, _ = run
    root = run_dir / "checkpoints"
    (root / "step-00000002" / "COMPLETE").unlink()  # bad: kept for inspection
    (root / "diverged" / "20260101T000000Z").mkdir(parents=True)

    def crash(path, ignore_errors=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", crash)
    with pytest.raises(KeyboardInterrupt):
        remove_checkpoints(run_dir)
    monkeypatch.undo()
    assert [p.name for p in list_checkpoints(run_dir)] == ["step-00000002"]
    assert (root / ".step-00000004.deleted").is_dir()
    assert remove_checkpoints(run_dir) == 0
    assert sorted(p.name for p in root.iterdir()) == ["diverged", "step-00000002"]
    assert (run_dir / "model" / "model.safetensors").is_file()


def test_removing_every_checkpoint_of_a_finished_run_removes_the_folder(run):
    run_dir, _ = run
    assert [p.name for p in list_checkpoints(run_dir)] == ["step-00000004", "step-00000002"]
    assert remove_checkpoints(run_dir) == 2
    assert not (run_dir / "checkpoints").exists()
    assert (run_dir / "model" / "model.safetensors").is_file()
    assert remove_checkpoints(run_dir) == 0


def test_a_finished_run_is_not_replaced_without_overwrite(run, capsys):
    run_dir, overrides = run
    shutil.rmtree(run_dir / "checkpoints")
    model = (run_dir / "model" / "model.safetensors").read_bytes()
    assert main(["train", *overrides()]) == 2
    line = error_line(capsys)
    assert f"{run_dir} already holds a run (config.yaml, metrics.jsonl, model" in line
    assert "--resume" in line and "--overwrite" in line
    assert (run_dir / "model" / "model.safetensors").read_bytes() == model
    assert main(["train", *overrides(**{"train.steps": 2}), "--overwrite"]) == 0
    assert sorted(train_records(run_dir / "metrics.jsonl")) == [1, 2]
    with pytest.raises(SystemExit):  # not both
        main(["train", *overrides(), "--overwrite", "--resume"])


# ---- 4. divergence -----------------------------------------------------------------


def test_divergence_is_caught_before_the_update_and_the_named_checkpoint_resumes(run, capsys):
    run_dir, overrides = run
    good = (run_dir / "checkpoints" / "step-00000004" / "model.safetensors").read_bytes()
    blow_up = overrides(**{"train.steps": 8, "train.save_every": 1, "train.lr": 1e8})
    assert main(["train", *blow_up, "--resume"]) == 2
    line = error_line(capsys)
    assert "loss became nan at step 6 (gradient norm nan); stopped before the update" in line
    assert "step-00000005 (its weights gave it) moved to" in line
    assert f"the last good checkpoint is {run_dir / 'checkpoints' / 'step-00000004'}" in line
    assert list((run_dir / "checkpoints" / "diverged").glob("*/step-00000005"))
    assert [p.name for p in list_checkpoints(run_dir)] == ["step-00000004", "step-00000002"]
    assert (run_dir / "checkpoints" / "step-00000004" / "model.safetensors").read_bytes() == good
    # the named checkpoint really resumes at a sane learning rate
    assert main(["train", *overrides(**{"train.steps": 8}), "--resume"]) == 0
    logged = train_records(run_dir / "metrics.jsonl")
    assert sorted(logged) == list(range(1, 9))
    assert all(v == v for r in logged.values() for v in r.values())  # no NaN


def test_a_divergence_between_boundaries_is_caught_at_the_next_one(run, capsys):
    run_dir, overrides = run
    # no boundary (log, evaluation, save) from step 5 to 12: the non-finite steps are skipped
    # on the device and found at the end, naming the first
    blow_up = overrides(**{"train.steps": 12, "train.save_every": 0, "train.log_every": 12,
                           "train.lr": 1e8})  # fmt: skip
    assert main(["train", *blow_up, "--resume"]) == 2
    line = error_line(capsys)
    assert (
        "loss became nan at step 6 (gradient norm nan); that update was skipped, and the "
        "run stopped at step 12" in line
    )
    assert f"the last good checkpoint is {run_dir / 'checkpoints' / 'step-00000004'}" in line
    assert [p.name for p in list_checkpoints(run_dir)] == ["step-00000004", "step-00000002"]
    logged = train_records(run_dir / "metrics.jsonl")
    assert sorted(logged) == [1, 2, 3, 4]  # no line of the diverged steps was written


# ---- 5. changed settings -------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "listed"),
    [
        ({"objectives": "[{name: tlm, weight: 0.5}, {name: mlm}]"}, "objectives.0.name mlm → tlm"),
        ({"objectives": "[{name: mlm}]"}, "objectives.1.name tlm → (absent)"),
        ({"objectives.0.mask_prob": 0.2}, "objectives.0.options"),
        ({"objectives.1.weight": 1.0}, "objectives.1.weight 0.5 → 1.0"),
        ({"tokenizer.path": "tests/fixtures/tiny"}, "tokenizer.path None → tests/fixtures/tiny"),
        ({"train.seed": 1}, "train.seed 0 → 1"),
        ({"train.batch_size": 4}, "train.batch_size 8 → 4"),
        ({"data.max_length": 64}, "data.max_length 32 → 64"),
        ({"model.preset": "small"}, "model.preset tiny → small"),
        ({"train.precision": "auto"}, "train.precision no → auto"),  # fp16 has a scaler state
    ],
)
def test_resume_refuses_settings_of_a_different_run(run, capsys, change, listed):
    run_dir, overrides = run
    assert main(["train", *overrides(**change), "--resume"]) == 2
    line = error_line(capsys)
    assert listed in line and "makes it a different run" in line
    assert sorted(train_records(run_dir / "metrics.jsonl")) == [1, 2, 3, 4]


def test_resume_refuses_fewer_steps_than_done(run, capsys):
    _, overrides = run
    assert main(["train", *overrides(**{"train.steps": 3}), "--resume"]) == 2
    assert "train.steps=3 is below the checkpoint's step 4" in error_line(capsys)


def test_resume_applies_a_new_learning_rate_and_more_steps(run, capsys):
    run_dir, overrides = run
    changes = {"train.lr": 0.001, "train.steps": 6, "train.betas": "[0.9, 0.95]"}
    assert main(["train", *overrides(**changes), "--resume"]) == 0
    out = capsys.readouterr().out
    assert (
        "changed settings applied from here: train.betas [0.9, 0.98] → [0.9, 0.95]; "
        "train.lr 0.003 → 0.001; train.steps 4 → 6"
    ) in out
    saved = (run_dir / "config.yaml").read_text()
    assert "lr: 0.001" in saved and "steps: 6" in saved
    logged = train_records(run_dir / "metrics.jsonl")
    # linear decay after 2 warm-up steps: lr(step) = 0.001 * (6 - step) / (6 - 2)
    assert logged[5]["lr"] == pytest.approx(0.001 * 1 / 4)
    assert logged[4]["lr"] == pytest.approx(0.003 * 0)


def test_setting_changes_ignores_fields_newer_than_the_saved_config():
    saved = {"train": {"lr": 1.0}, "objectives": [{"name": "mlm", "options": {}}]}
    new = {"train": {"lr": 2.0, "new_field": 3}, "objectives": [{"name": "mlm", "options": {}}]}
    assert setting_changes(saved, new) == ([], ["train.lr 1.0 → 2.0"])
    new["objectives"].append({"name": "tlm"})
    assert setting_changes(saved, new)[0] == ["objectives.1.name (absent) → tlm"]


# ---- 6. branches -------------------------------------------------------------------


def test_resume_from_an_older_checkpoint_starts_a_branch(run, capsys):
    run_dir, overrides = run
    original = train_records(run_dir / "metrics.jsonl")
    older = run_dir / "checkpoints" / "step-00000002"
    assert main(["train", *overrides(), "--resume", str(older)]) == 0
    moved = list((run_dir / "checkpoints" / "abandoned").glob("*/step-00000004"))
    assert len(moved) == 1
    abandoned = records(moved[0].parent / "metrics.jsonl")
    assert [r["step"] for r in abandoned] == [3, 4, 4]  # two training lines, final held-out
    assert train_records(run_dir / "metrics.jsonl") == original  # same seed, same curve
    # a plain --resume continues the new branch, not the abandoned one
    assert main(["train", *overrides(), "--resume"]) == 0
    assert f"resumed from {run_dir / 'checkpoints' / 'step-00000004'}" in capsys.readouterr().out
    assert len(list((run_dir / "checkpoints" / "abandoned").glob("*/step-*"))) == 1
    final = [r for r in records(run_dir / "metrics.jsonl") if "valid/mlm_loss" in r]
    assert [r["step"] for r in final] == [4]  # resuming a finished run adds no duplicate


# ---- 7. corrupt checkpoints ----------------------------------------------------------


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("name", "damage", "problem"),
    [
        ("trainer/model.safetensors", truncate, "trainer/model.safetensors has"),
        ("trainer/optimizer.bin", truncate, "trainer/optimizer.bin has"),
        ("trainer/custom_checkpoint_0.pkl", Path.unlink, "custom_checkpoint_0.pkl is missing"),
        ("trainer/random_states_0.pkl", Path.unlink, "random_states_0.pkl is missing"),
        ("tokenizer.json", truncate, "tokenizer.json has"),
        ("model.safetensors", flip_a_byte, "model.safetensors does not match its checksum"),
        ("trainer_state.json", Path.unlink, "trainer_state.json is missing"),
        ("MANIFEST.json", Path.unlink, "MANIFEST.json is unreadable"),
    ],
)
def test_a_damaged_checkpoint_is_skipped_naming_the_file(run, capsys, name, damage, problem):
    run_dir, _ = run
    newest = run_dir / "checkpoints" / "step-00000004"
    damage(newest / name)
    assert find_resume_checkpoint(run_dir, "last") == run_dir / "checkpoints" / "step-00000002"
    err = capsys.readouterr().err
    assert f"skipping checkpoint {newest}: " in err and problem in err
    with pytest.raises(Exception, match=f"cannot resume from {newest}: .*{problem}"):
        find_resume_checkpoint(run_dir, str(newest))


def test_resume_falls_back_past_a_lost_rng_state_onto_the_same_curve(run, capsys):
    run_dir, overrides = run
    original = train_records(run_dir / "metrics.jsonl")
    (run_dir / "checkpoints" / "step-00000004" / "trainer" / "random_states_0.pkl").unlink()
    assert main(["train", *overrides(), "--resume"]) == 0
    assert "random_states_0.pkl is missing" in capsys.readouterr().err
    assert train_records(run_dir / "metrics.jsonl") == original


def test_resume_from_a_directory_that_is_no_checkpoint(run, capsys):
    _, overrides = run
    assert main(["train", *overrides(), "--resume", "tests/fixtures"]) == 2
    assert "not a checkpoint (a checkpoint is a checkpoints/step-N directory" in error_line(capsys)


# ---- 8. the metrics log --------------------------------------------------------------


def test_a_half_written_last_metrics_line_is_dropped(run, capsys):
    run_dir, overrides = run
    with open(run_dir / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "lo')
    assert main(["train", *overrides(), "--resume"]) == 0
    assert "dropping a half-written last line" in capsys.readouterr().err
    assert sorted(train_records(run_dir / "metrics.jsonl")) == [1, 2, 3, 4]


def test_a_broken_metrics_line_before_the_last_is_an_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nxx\n{"step": 2}\n')
    with pytest.raises(Exception, match=r"metrics.jsonl:2: not a JSON record"):
        truncate_metrics(path, 1, finished=False)


def test_read_metrics_drops_a_half_written_last_line(tmp_path, capsys):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "lo')
    assert read_metrics(tmp_path) == [{"step": 1, "loss": 2.0}]
    assert "metrics.jsonl:2: dropping a half-written last line" in capsys.readouterr().err
    assert read_metrics(tmp_path / "absent") == []


def test_logged_means_survive_a_resume_between_log_lines(tmp_path):
    run_dir = tmp_path / "means"
    every = {"train.steps": 8, "train.log_every": 4, "train.save_every": 3}
    every["train.keep_checkpoints"] = 5
    assert main(["train", *tiny_overrides(run_dir, **every)]) == 0
    original = train_records(run_dir / "metrics.jsonl")
    assert sorted(original) == [4, 8]
    step3 = run_dir / "checkpoints" / "step-00000003"
    assert main(["train", *tiny_overrides(run_dir, **every), "--resume", str(step3)]) == 0
    assert train_records(run_dir / "metrics.jsonl") == original


def test_a_step_that_does_not_fit_in_memory_is_one_line(tmp_path, capsys):
    # about 80 GB of attention scores at the first step
    args = tiny_overrides(tmp_path / "oom", **{"data.max_length": 100000})
    assert main(["train", *args]) == 2
    line = error_line(capsys)
    assert "out of memory at step 1 with micro-batches of mlm 8, tlm 8 sequences" in line
    assert "lower data.max_length or train.batch_size, or raise train.grad_accum" in line


def test_a_log_that_cannot_be_written_is_one_line(run, capsys):
    run_dir, overrides = run
    (run_dir / "metrics.jsonl").unlink()
    (run_dir / "metrics.jsonl").mkdir()
    assert main(["train", *overrides(**{"train.steps": 6}), "--resume"]) == 2
    line = error_line(capsys)
    assert f"{run_dir / 'metrics.jsonl'}: Is a directory; the last good checkpoint is " in line


# ---- 9. disk full ----------------------------------------------------------------------


def _limit_file_size() -> None:
    """In the child: files may not grow beyond 50 kB (EFBIG instead of SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))


def test_a_full_disk_while_saving_names_the_file_and_keeps_the_last_checkpoint(run):
    run_dir, overrides = run
    cmd = [sys.executable, "-m", "crossalign", "train", *overrides(**{"train.steps": 6})]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [*cmd, "--resume"], env=env, capture_output=True, text=True, preexec_fn=_limit_file_size
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("crossalign: error: ")]
    assert f"could not write checkpoint {run_dir / 'checkpoints' / 'step-00000006'}" in line
    assert "writing trainer/ (weights, optimizer, scheduler and RNG states) failed (" in line
    assert "File too large" in line
    assert "the last good checkpoint step-00000004 is intact" in line
    assert not list((run_dir / "checkpoints").glob(".*tmp"))
    assert checkpoint_problem(run_dir / "checkpoints" / "step-00000004", verify=True) is None


@pytest.mark.slow
def test_a_full_disk_with_two_processes_stops_both_with_one_line(tmp_path):
    run_dir = tmp_path / "ddp"
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    launch += ["--master_port", "29761", "-m", "crossalign", "train"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = tiny_overrides(run_dir, **{"train.steps": 2, "train.save_every": 0})
    assert subprocess.run([*launch, *first], env=env, capture_output=True).returncode == 0
    more = tiny_overrides(run_dir, **{"train.steps": 4, "train.save_every": 0})
    out = subprocess.run(
        [*launch, *more, "--resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a process left waiting in a collective would hang here
        preexec_fn=_limit_file_size,
    )
    lines = [x for x in out.stderr.splitlines() if x.startswith("crossalign: error: ")]
    assert len(lines) == 2 and lines[0] == lines[1]  # both processes, the same line
    assert "the last good checkpoint step-00000002 is intact" in lines[0]
    assert [p.name for p in list_checkpoints(run_dir)] == ["step-00000002"]


def test_resume_refuses_training_text_changed_since_the_checkpoint(tmp_path, capsys):
    """An edit that keeps the file's size and modification time (``sed -i``, ``touch -d``)
    is still caught: the checkpoint records the data's fingerprint (inode and change time)."""
    from tests.integration.conftest import FIXTURES

    text = tmp_path / "en.txt"
    shutil.copy(FIXTURES / "en.txt", text)
    es = FIXTURES / "es.txt"
    data = {"data.mono": f"{{en: {text}, es: {es}}}", "data.parallel": f"{{en-es: [{text}, {es}]}}"}
    run_dir = tmp_path / "run"
    assert main(["train", *tiny_overrides(run_dir, **{**STEPS, **data})]) == 0
    before = text.stat()
    edited = text.read_text(encoding="utf-8").replace("the", "teh", 1)
    text.write_text(edited, encoding="utf-8")
    os.utime(text, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert text.stat().st_size == before.st_size and text.stat().st_mtime_ns == before.st_mtime_ns
    more = {**STEPS, **data, "train.steps": 6}
    capsys.readouterr()
    assert main(["train", *tiny_overrides(run_dir, **more), "--resume"]) == 2
    line = error_line(capsys)
    assert "the training data changed since this checkpoint was saved" in line
    assert "--allow-data-change" in line and "step-00000004" in line
    assert main(["train", *tiny_overrides(run_dir, **more), "--resume", "--allow-data-change"]) == 0
