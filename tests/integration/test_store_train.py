"""Training from a token store: ``crossalign data tokenize`` then ``train data.store=...``
trains exactly like the raw sources; DataLoader workers change nothing (also on resume); the
automatic store cache is reused; a store with other sources is refused; two processes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from crossalign.cli import main
from crossalign.config import TokenizerConfig
from crossalign.data.tokenizer import train_tokenizer

from .conftest import FIXTURES, tiny_overrides, train_two_processes

STEPS = 4
NO_SOURCES = {"data.mono": "{}", "data.parallel": "{}", "data.valid_mono": "{}"}


def records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def losses(run_dir: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(run_dir) if "loss" in r}


def held_out(run_dir: Path) -> dict[str, float]:
    return {k: v for r in records(run_dir) for k, v in r.items() if k.startswith("valid/")}


def assert_same_curve(a: dict[int, float], b: dict[int, float]) -> None:
    assert sorted(a) == sorted(b)
    for step in a:
        assert a[step] == pytest.approx(b[step], rel=1e-6, abs=1e-6), step


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    lines = {lang: (FIXTURES / f"{lang}.txt").read_text().splitlines() for lang in ("en", "es")}
    out = tmp_path_factory.mktemp("tok") / "tokenizer"
    train_tokenizer(lines, TokenizerConfig(vocab_size=200)).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory, tok_dir) -> Path:
    """The tiny run's sources tokenized by ``crossalign data tokenize``."""
    out = tmp_path_factory.mktemp("store") / "store"
    data = [x for x in tiny_overrides(out.parent / "unused") if x.startswith("data.")]
    assert main(["data", "tokenize", "--out", str(out), "--tokenizer", str(tok_dir), *data]) == 0
    return out


def from_store(tiny, name: str, store: Path, **extra: object) -> list[str]:
    """A tiny run reading only ``store``."""
    return tiny(name, **NO_SOURCES, **{"data.store": str(store)}, **extra)


def short(**extra: object) -> dict[str, object]:
    return {"train.steps": STEPS, "train.save_every": 0, **extra}


def test_store_trains_like_the_raw_sources(tiny, tmp_path, store, tok_dir):
    manifest = json.loads((store / "store.json").read_text())
    assert set(manifest["sources"]) == {"mono/en", "mono/es", "parallel/en-es", "valid_mono/en"}
    assert main(["train", *tiny("raw", **short(**{"tokenizer.path": str(tok_dir)}))]) == 0
    assert main(["train", *from_store(tiny, "store", store, **short())]) == 0
    raw, stored = losses(tmp_path / "raw"), losses(tmp_path / "store")
    assert sorted(raw) == list(range(1, STEPS + 1))
    assert_same_curve(raw, stored)
    assert held_out(tmp_path / "raw")
    assert held_out(tmp_path / "raw") == pytest.approx(held_out(tmp_path / "store"), rel=1e-6)
    # the run on raw sources cached a store under the key 'data tokenize' gave its store
    cache = Path(os.environ["CROSSALIGN_CACHE"]) / "stores" / manifest["key"]
    assert (cache / "store.json").is_file()


def test_workers_do_not_change_the_curve(tiny, tmp_path, store):
    for workers in (0, 2):
        args = from_store(tiny, f"w{workers}", store, **short(**{"data.num_workers": workers}))
        assert main(["train", *args]) == 0
    assert_same_curve(losses(tmp_path / "w0"), losses(tmp_path / "w2"))
    assert held_out(tmp_path / "w0") == pytest.approx(held_out(tmp_path / "w2"), rel=1e-6)


def test_resume_with_workers_continues_the_same_curve(tiny, tmp_path, store, capsys):
    args = from_store(tiny, "a", store, **{"data.num_workers": 2, "train.save_every": 6})
    assert main(["train", *args]) == 0
    full = losses(tmp_path / "a")
    assert sorted(full) == list(range(1, 13))
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "step-00000012")
    assert main(["train", *args, "--resume"]) == 0
    assert "resumed from" in capsys.readouterr().out
    resumed = losses(tmp_path / "a")
    assert sorted(resumed) == sorted(full)
    for step in range(7, 13):
        assert resumed[step] == pytest.approx(full[step], rel=1e-6, abs=1e-6), step


def test_second_run_reuses_the_cached_store(tiny, tmp_path, tok_dir, monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CROSSALIGN_CACHE", str(cache))
    extra = {"tokenizer.path": str(tok_dir), "train.steps": 2, "train.save_every": 0}
    assert main(["train", *tiny("first", **extra)]) == 0
    (built,) = (cache / "stores").glob("*/store.json")
    built = built.parent
    assert f"tokenize {built.name}" in capsys.readouterr().err
    before = {p: p.stat().st_mtime_ns for p in built.rglob("*")}
    assert any(p.name == "ids.npy" for p in before)
    assert main(["train", *tiny("second", **extra)]) == 0
    assert "tokenize " not in capsys.readouterr().err
    assert [p.parent for p in (cache / "stores").glob("*/store.json")] == [built]
    assert {p: p.stat().st_mtime_ns for p in built.rglob("*")} == before
    assert_same_curve(losses(tmp_path / "first"), losses(tmp_path / "second"))


def test_store_with_other_sources_is_refused(tiny, store, capsys):
    assert main(["train", *tiny("both", **{"data.store": str(store)})]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("crossalign: error: ") and "data.store" in err[-1]
    assert "data.mono" in err[-1]


def test_two_processes_from_a_store(tiny, tmp_path, store):
    args = from_store(tiny, "ddp", store, **short(**{"train.steps": 2, "data.num_workers": 1}))
    train_two_processes(args, 29541)
    logged = records(tmp_path / "ddp")
    assert [r["step"] for r in logged if "loss" in r] == [1, 2]
    assert all(r["processes"] == 2 for r in logged if "loss" in r)
    assert logged[-1]["valid/mlm_ppl"] > 1
    assert (tmp_path / "ddp" / "model" / "config.json").is_file()


def test_data_tokenizer_writes_the_tokenizer_a_run_trains(tiny, tmp_path, capsys):
    """``crossalign data tokenizer`` with a run's overrides saves the tokenizer that
    ``crossalign train`` trains for them (same sample, same settings, same seed)."""
    args = tiny("run", **short(**{"train.seed": 3, "tokenizer.vocab_size": 150}))
    assert main(["train", *args]) == 0
    out = tmp_path / "tok"
    assert main(["data", "tokenizer", "--out", str(out), *args]) == 0
    assert f"wrote {out}: unigram tokenizer" in capsys.readouterr().out
    saved = json.loads((tmp_path / "run" / "tokenizer" / "tokenizer.json").read_text())
    assert json.loads((out / "tokenizer.json").read_text()) == saved
    assert main(["data", "tokenizer", "--out", str(out), *args, "tokenizer.vocab_size=140"]) == 0
    assert json.loads((out / "tokenizer.json").read_text()) != saved
