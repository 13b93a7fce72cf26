"""Encoder-decoder runs end to end on the tiny fixture: MASS + denoising + back-translation,
resume, UNMT started from a masked-LM, and the settings a seq2seq run refuses."""

import json
import shutil

import pytest
import torch
from transformers import AutoModelForMaskedLM, EncoderDecoderModel

from crossalign.cli import main
from crossalign.errors import CrossalignError
from crossalign.models.load import load_model

SEQ2SEQ = "[{name: mass}, {name: dae}, {name: bt, weight: 0.5}]"


def losses(run_dir):
    records = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return {r["step"]: r for r in records if "loss" in r}


def test_seq2seq_run_logs_each_loss_and_resumes_identically(tiny, tmp_path, capsys):
    args = tiny("s", objectives=SEQ2SEQ, **{"train.steps": 4, "train.save_every": 2})
    assert main(["train", *args]) == 0
    out = capsys.readouterr().out
    assert "EncoderDecoderModel.from_pretrained" in out and "held-out MASS perplexity" in out
    full = losses(tmp_path / "s")
    for key in ("loss/mass", "loss/dae", "loss/bt", "mass/nll", "bt/nll"):
        assert key in full[4]
    assert "train/ppl" not in full[4]  # label-smoothed seq2seq losses are not an MLM perplexity
    records = (tmp_path / "s" / "metrics.jsonl").read_text()
    assert "valid/mass_ppl" in records
    model = EncoderDecoderModel.from_pretrained(tmp_path / "s" / "model")
    assert model.config.crossalign_languages == ["en", "es"]
    card = (tmp_path / "s" / "model" / "README.md").read_text()
    assert "pipeline_tag: translation" in card and "EncoderDecoderModel.from_pretrained" in card
    assert "fill-mask" not in card
    shutil.rmtree(tmp_path / "s" / "checkpoints" / "step-00000004")
    assert main(["train", *args, "--resume"]) == 0
    resumed = losses(tmp_path / "s")
    for step in (3, 4):
        for key in ("loss/mass", "loss/dae", "loss/bt"):
            assert resumed[step][key] == pytest.approx(full[step][key], abs=1e-6), (step, key)


@pytest.mark.parametrize(
    ("objectives", "keys"),
    [
        ("[{name: mass, packing: P}, {name: dae, packing: P}]", ("loss/mass", "loss/dae")),
        ("[{name: mlm, line_by_line: true, packing: P}]", ("loss/mlm",)),
    ],
    ids=["mass+dae", "mlm-line-by-line"],
)
def test_packed_objectives_train_as_the_padded_ones(tiny, tmp_path, objectives, keys):
    """The training loop with ``packing: true``: the same loss curves as padded rows without
    dropout (to 1e-5: at a high lr, a decoder that sees the next tokens of its own span
    drifts by about 5e-4 within 4 steps)."""
    curves = {}
    # line-by-line MLM also runs on blocks once: its rows must really be other rows
    variants = ("false", "true", "blocks") if "line_by_line" in objectives else ("false", "true")
    for packing in variants:
        spec = "[{name: mlm}]" if packing == "blocks" else objectives.replace("P", packing)
        args = tiny(
            f"p-{packing}",
            objectives=spec,
            **{"model.dropout": 0.0, "train.steps": 4, "train.save_every": 0,
               "train.log_every": 1, "data.max_length": 96, "train.lr": 0.02,
               "train.warmup_steps": 0},
        )  # fmt: skip
        assert main(["train", *args]) == 0
        curves[packing] = losses(tmp_path / f"p-{packing}")
        config = (tmp_path / f"p-{packing}" / "config.yaml").read_text()
        assert packing == "blocks" or config.count(f"packing: {packing}") == len(keys)
    assert sorted(curves["true"]) == [1, 2, 3, 4]
    if "blocks" in curves:
        assert curves["blocks"][1]["loss/mlm"] != pytest.approx(curves["false"][1]["loss/mlm"])
    for step, padded in curves["false"].items():
        for key in keys:
            assert curves["true"][step][key] == pytest.approx(padded[key], rel=1e-5), (step, key)


def test_unmt_starts_both_sides_from_a_masked_lm(tiny, tmp_path):
    assert main(["train", *tiny("mlm", **{"train.steps": 2})]) == 0
    mlm = AutoModelForMaskedLM.from_pretrained(tmp_path / "mlm" / "model")
    args = tiny(
        "unmt",
        objectives="[{name: dae}, {name: bt}]",
        **{"model.path": str(tmp_path / "mlm" / "model"), "train.steps": 1, "train.lr": 1e-9},
    )
    assert main(["train", *args]) == 0
    model = EncoderDecoderModel.from_pretrained(tmp_path / "unmt" / "model")
    enc, dec, base = model.encoder.state_dict(), model.decoder.state_dict(), mlm.bert.state_dict()
    name = "encoder.layer.0.attention.self.query.weight"
    assert torch.allclose(enc[name], base[name], atol=1e-5)
    assert torch.allclose(dec[f"bert.{name}"], base[name], atol=1e-5)
    assert torch.allclose(
        dec["bert.embeddings.token_type_embeddings.weight"],
        base["embeddings.token_type_embeddings.weight"],
        atol=1e-5,
    )
    assert any("crossattention" in k for k in dec)
    assert "crossattention" not in " ".join(base)


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"objectives": "[{name: mlm}, {name: mass}]"}, "one kind of model"),
        (
            {"objectives": "[{name: bt}]", "model.language_embeddings": False},
            "language_embeddings",
        ),
    ],
)
def test_seq2seq_settings_refused(tiny, capsys, extra, message):
    assert main(["train", *tiny("bad", **extra)]) != 0
    assert message in capsys.readouterr().err


def test_inverse_sqrt_schedule(tiny, tmp_path):
    args = tiny("sq", **{"train.schedule": "inverse_sqrt", "train.steps": 5, "train.lr": 0.004})
    assert main(["train", *args]) == 0
    lr = {s: r["lr"] for s, r in losses(tmp_path / "sq").items()}
    # warm-up 2 steps, then 0.004 * sqrt(2 / step)
    assert lr[1] == pytest.approx(0.002) and lr[2] == pytest.approx(0.004)
    assert lr[5] == pytest.approx(0.004 * (2 / 5) ** 0.5)


def test_the_aligner_reads_an_encoder_decoders_encoder(tiny, tmp_path):
    args = tiny("s", objectives="[{name: dae}]", **{"train.steps": 1})
    assert main(["train", *args]) == 0
    model = tmp_path / "s" / "model"
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("the cat ||| el gato\n", encoding="utf-8")
    out = tmp_path / "links.txt"
    assert (
        main(
            ["align", "--model", str(model), "--layer", "1", "--input", str(pairs), "-o", str(out)]
        )
        == 0
    )
    assert out.read_text().strip()
    with pytest.raises(CrossalignError, match="is an encoder-decoder, not a masked-lm model"):
        load_model(model, head="masked_lm", device="cpu")
