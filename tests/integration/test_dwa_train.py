"""DWA trains from a checkpoint, logs its parts, and refuses a cold start."""

from __future__ import annotations

import json

from crossalign.cli import main


def test_dwa_continues_from_a_checkpoint(tiny, tmp_path):
    assert main(["train", *tiny("base", **{"train.steps": 3, "train.save_every": 0})]) == 0
    model = tmp_path / "base" / "model"
    args = tiny(
        "dwa",
        **{
            "model.path": str(model),
            "objectives": "[{name: mlm}, {name: dwa, weight: 1.0, layer: 2}]",
            "train.steps": 4,
            "train.save_every": 2,
            "train.log_every": 1,
        },
    )
    assert main(["train", *args]) == 0
    records = [json.loads(x) for x in (tmp_path / "dwa" / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in records if "loss/dwa" in r][-1]
    assert last["dwa/dwa_loss"] > 0 and 0 < last["dwa/labelled"] <= 1
    # pooled: one mean over TLM tokens and DWA queries, between the two parts' own means
    parts = sorted((last["dwa/lm_loss"], last["dwa/dwa_loss"]))
    assert parts[0] < last["loss/dwa"] < parts[1]
    # the pointer network is checkpointed and resumes
    assert main(["train", *args, "train.steps=6", "--resume"]) == 0


def test_dwa_refuses_cold_start(tiny, capsys):
    args = tiny("cold", **{"objectives": "[{name: dwa}]"})
    assert main(["train", *args]) == 2
    assert "allow_cold_start" in capsys.readouterr().err


def test_packed_dwa_trains_as_the_padded_one(tiny, tmp_path):
    """The training loop with ``packing: true``: the same loss curve as padded rows (no
    dropout), in fewer rows."""
    base = {"train.steps": 3, "train.save_every": 0, "data.max_length": 128}
    assert main(["train", *tiny("base", **base)]) == 0
    curves = {}
    for packing in ("false", "true"):
        args = tiny(
            f"dwa-{packing}",
            **{
                "model.path": str(tmp_path / "base" / "model"),
                "model.dropout": 0.0,
                "objectives": f"[{{name: dwa, layer: 2, packing: {packing}}}]",
                "data.max_length": 128,  # room for several pairs per packed row
                "train.steps": 4,
                "train.save_every": 0,
                "train.log_every": 1,
            },
        )
        assert main(["train", *args]) == 0
        lines = (tmp_path / f"dwa-{packing}" / "metrics.jsonl").read_text().splitlines()
        curves[packing] = [r["loss"] for r in map(json.loads, lines) if "loss" in r]
    assert len(curves["true"]) == 4
    for padded, packed in zip(curves["false"], curves["true"]):
        assert abs(packed - padded) <= 1e-4 * abs(padded), curves
