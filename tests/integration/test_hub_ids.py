"""Models by Hugging Face hub id: a local cache laid out as the hub's (models--org--name/
snapshots/REV, refs/main) serves ``model.path``, ``--model`` and the tokenizer with
``HF_HUB_OFFLINE=1``; an id that is not cached is a one-line error with the fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crossalign.cli import main

from .conftest import FIXTURES, tiny_overrides

HUB_ID = "crossalign-test/tiny-mlm"
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    """A hub cache holding one tiny trained model under ``HUB_ID``."""
    root = tmp_path_factory.mktemp("hub")
    args = tiny_overrides(root / "run", **{"train.steps": 2, "train.save_every": 0})
    assert main(["train", *args]) == 0
    repo = root / "cache" / ("models--" + HUB_ID.replace("/", "--"))
    shutil.copytree(root / "run" / "model", repo / "snapshots" / REVISION)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return root / "cache"


def _run_offline(commands: list[list[str]], cache: Path, cwd: Path) -> list[str]:
    """Run ``crossalign`` commands in one fresh process whose hub cache is ``cache`` with
    ``HF_HUB_OFFLINE=1`` (read at import time, hence a process); each command's exit status
    and stderr, as one JSON line per command."""
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    code = (
        "import contextlib, io, json, sys\n"
        "from crossalign.cli import main\n"
        "for args in json.loads(sys.argv[1]):\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        status = main(args)\n"
        "    print(json.dumps([status, err.getvalue()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(commands)],
        env=env, cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def test_a_cached_hub_id_trains_and_evaluates_offline(hub_cache: Path, tmp_path: Path) -> None:
    en, es = str(FIXTURES / "en.txt"), str(FIXTURES / "es.txt")
    run = tmp_path / "cont"
    args = tiny_overrides(run, **{"train.steps": 2, "train.save_every": 0})
    args = [a for a in args if not a.startswith(("model.", "tokenizer."))]
    retrieval = ["eval", "retrieval", "--src-file", en, "--tgt-file", es, "--model"]
    (trained, status), evaluated, missing = _run_offline(
        [["train", *args, f"model.path={HUB_ID}"], [*retrieval, HUB_ID],
         [*retrieval, "no-such-org/no-model"]],
        hub_cache,
        tmp_path,
    )  # fmt: skip
    assert trained == 0, status[-2000:]
    assert (run / "model" / "config.json").is_file()
    assert evaluated[0] == 0, evaluated[1][-2000:]
    (record,) = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert record["model"]["path"] == HUB_ID and record["model"]["run"] is None
    assert record["model"]["config_sha256"] is not None
    assert not (tmp_path / "crossalign-test").exists()  # no directory named after the id
    # an id that is not in the cache: one line with the fix
    assert missing[0] == 2
    (line,) = [x for x in missing[1].strip().splitlines() if x.startswith("crossalign: error")]
    assert "no-such-org/no-model is not a local directory, and as a hub id it is not in" in line
    assert "(HF_HUB_OFFLINE=1)" in line and "huggingface-cli download" in line
