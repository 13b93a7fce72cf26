"""models/load.py: one loader, one language → token-type id rule, one input-length rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from crossalign.config import ModelConfig
from crossalign.errors import CrossalignError
from crossalign.models.build import build_model
from crossalign.models.load import (
    input_limit,
    language_index,
    language_type_id,
    load_model,
    model_dir,
    model_source,
    position_offset,
)


def _tiny(arch: str = "bert", languages: list[str] | None = None, max_length: int = 32):
    cfg = ModelConfig(arch=arch, preset="tiny", language_embeddings=languages is not None)
    return build_model(cfg, 200, 1, languages or [], max_length)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model") / "tiny"
    _tiny(languages=["en", "de"]).save_pretrained(out)
    return out


def test_missing_directory_is_one_line_naming_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(CrossalignError, match=f"^--teacher {missing} does not exist$"):
        load_model(missing, key="--teacher")


def test_directory_without_config_is_one_line_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(CrossalignError, match=f"^model.path {tmp_path} is not a save_pretrained"):
        load_model(tmp_path, key="model.path")


def test_corrupt_weights_are_one_line_naming_the_key(saved: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_bytes((saved / "config.json").read_bytes())
    weights = (saved / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(weights[:1000])
    with pytest.raises(CrossalignError, match=f"^--model {broken}: cannot load") as err:
        load_model(broken)
    assert "\n" not in str(err.value)


def test_load_model_eval_mode_default_device_and_keep_layers(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    model = load_model(saved, head="encoder", keep_layers=1)
    assert not model.training
    assert next(model.parameters()).device.type == "cpu"
    assert len(model.encoder.layer) == 1 and model.config.num_hidden_layers == 1
    with pytest.raises(CrossalignError, match=f"^layer 3 does not exist: --model {saved} has"):
        load_model(saved, head="encoder", keep_layers=3)


def test_one_resolver_for_model_dirs_run_dirs_and_hub_ids(saved: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (run / "model" / name).write_bytes((saved / name).read_bytes())
    (run / "config.yaml").write_text("run_dir: run\n")
    assert model_dir(run) == run / "model"  # a run directory means its model/
    assert model_dir(run / "model") == run / "model"
    assert model_dir(saved) == saved
    assert model_dir("org/name") == Path("org/name")  # a hub id is itself
    assert model_dir(tmp_path / "nope") == tmp_path / "nope"
    assert model_source(run, "--model") == str(run / "model")
    assert model_source("org/name", "--model") == "org/name"
    from_run, direct = (load_model(m, device="cpu").state_dict() for m in (run, saved))
    assert all(torch.equal(from_run[k], direct[k]) for k in direct)
    (run / "config.json").write_bytes((saved / "config.json").read_bytes())
    assert model_dir(run) == run  # a save_pretrained directory that also holds a config.yaml
    bare = tmp_path / "bare"
    (bare / "model").mkdir(parents=True)
    with pytest.raises(CrossalignError, match=f"^--model {bare} is not a save_pretrained"):
        model_source(bare, "--model")  # no config.yaml: not a run directory


def test_language_type_id() -> None:
    model = _tiny(languages=["en", "de"])
    assert language_type_id(model, "de") == 1
    assert language_type_id(model.config, "en") == 0
    assert language_type_id(model, None) == 0
    with pytest.raises(CrossalignError, match=r"no language embedding for 'fr'; it has en, de$"):
        language_type_id(model, "fr")
    assert language_type_id(_tiny(), "fr") == 0  # no language embeddings: every language is 0
    assert language_index([], "fr") == 0  # a run with language embeddings off
    with pytest.raises(CrossalignError, match=r"^the model has no language embedding for 'fr'"):
        language_index(["en", "es"], "fr")


def test_loaded_model_names_its_directory_for_an_unknown_language(saved: Path) -> None:
    with pytest.raises(CrossalignError, match=f"^model {saved} has no language embedding for"):
        language_type_id(load_model(saved, device="cpu"), "fr")


@pytest.mark.parametrize(("arch", "offset"), [("bert", 0), ("roberta", 2), ("camembert", 2)])
def test_input_limit_bert_and_roberta_style(arch: str, offset: int) -> None:
    model = _tiny(arch, max_length=32)
    assert model.config.max_position_embeddings == 32 + offset
    for source in (model, model.config):  # a config is read through a meta-device model
        assert position_offset(source) == offset
        assert input_limit(source) == 32
        assert input_limit(source, 20) == 20
        assert input_limit(source, 100, specials=2) == 30
