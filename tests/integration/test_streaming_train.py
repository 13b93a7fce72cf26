"""Training on a streamed dataset: the stream position is saved in checkpoints and a resumed
run continues the same loss curve."""

from __future__ import annotations

import json
import shutil

import pytest

from crossalign.cli import main

from .conftest import FIXTURES
from .test_train import losses


@pytest.fixture
def streamed(tiny, tmp_path):
    path = tmp_path / "en.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for line in (FIXTURES / "en.txt").read_text(encoding="utf-8").splitlines():
            f.write(json.dumps({"text": line}) + "\n")
    assert main(["train", *tiny("tok", **{"train.steps": 1})]) == 0
    spec = f"{{dataset: {path}, streaming: true, size: 24}}"

    def args(name: str, **extra: object) -> list[str]:
        items = {
            "data.mono": f"{{en: {spec}, es: {FIXTURES / 'es.txt'}}}",
            "tokenizer.path": str(tmp_path / "tok" / "tokenizer"),
            "data.num_workers": 1,
            **extra,
        }
        return tiny(name, **items)

    return args


def test_stream_resume_continues_the_same_curve(streamed, tmp_path):
    assert main(["train", *streamed("s", **{"train.steps": 20, "train.save_every": 10})]) == 0
    full = losses(tmp_path / "s")
    state = json.loads((tmp_path / "s/checkpoints/step-00000010/trainer_state.json").read_text())
    assert any("en#stream" in position for position in state["data"].values())
    shutil.rmtree(tmp_path / "s" / "checkpoints" / "step-00000020")
    more = streamed("s", **{"train.steps": 20, "train.save_every": 10})
    assert main(["train", *more, "--resume"]) == 0
    resumed = losses(tmp_path / "s")
    for step in range(11, 21):
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=1e-6), step


def test_stream_cannot_train_the_tokenizer(tiny, tmp_path, capsys):
    spec = f"{{dataset: {tmp_path / 'x.jsonl'}, streaming: true, size: 3}}"
    assert main(["train", *tiny("t", **{"data.mono": f"{{en: {spec}}}"})]) == 2
    assert "cannot train the tokenizer" in capsys.readouterr().err
