"""``crossalign cooc build``, ``crossalign eval cooc-compare`` and training with ``mlm_gc``,
in-process on the fixture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from crossalign.cli import main
from crossalign.cooc.matrix import CoocMatrix

from .conftest import FIXTURES

EN, ES = FIXTURES / "en.txt", FIXTURES / "es.txt"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A word-level tokenizer of the fixture: every word is one token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    words = sorted(
        {w for lang in ("en", "es") for w in (FIXTURES / f"{lang}.txt").read_text().split()}
    )
    vocab = {w: i for i, w in enumerate(specials + words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", cls_token="<s>", eos_token="</s>",
        sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
    )  # fmt: skip
    out = tmp_path_factory.mktemp("tok")
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def matrix_dir(tokenizer_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cooc") / "m"
    args = ["cooc", "build", "--tokenizer", str(tokenizer_dir), "--text", f"en={EN}"]
    assert main([*args, "--text", f"es={ES}", "--out", str(out), "--quiet"]) == 0
    return out


def test_build_writes_a_matrix_of_the_tokenizer(matrix_dir, tokenizer_dir, capsys):
    from transformers import AutoTokenizer

    meta = json.loads((matrix_dir / "meta.json").read_text())
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    lines = EN.read_text().splitlines()
    ids = tok(lines, add_special_tokens=False)["input_ids"]
    assert meta["languages"]["en"]["tokens"] == sum(map(len, ids))
    assert meta["languages"]["en"]["lines"] == len(lines)
    assert meta["reference"] == "en" and meta["languages"]["en"]["scale"] == 1.0
    c_es = meta["languages"]["es"]["scale"]
    assert c_es == pytest.approx(
        meta["languages"]["en"]["tokens"] / meta["languages"]["es"]["tokens"]
    )
    assert meta["window"] == 2 and meta["vocab_size"] == len(tok)
    assert "crossalign cooc build --out" in meta["command"]
    m = CoocMatrix(matrix_dir)
    # "the cat sleeps on the warm bed": the-cat at distance 1 (1/2); the-sleeps at distance 2,
    # twice (positions 0-2 and 2-4: 2/3); no other line has these pairs within 2 tokens
    the, cat, sleeps = (
        tok(w, add_special_tokens=False)["input_ids"] for w in ("the", "cat", "sleeps")
    )
    got = m.lookup(torch.tensor([the, cat, the]), torch.tensor([cat, the, sleeps])).flatten()
    assert got.tolist() == pytest.approx([1 / 2, 1 / 2, 2 / 3])
    # "el gato" in Spanish, scaled by c_es
    el, gato = (tok(w, add_special_tokens=False)["input_ids"] for w in ("el", "gato"))
    assert m.lookup(torch.tensor(el), torch.tensor(gato)).item() == pytest.approx(c_es / 2)


def test_build_from_a_corpus_directory_with_two_processes(tokenizer_dir, matrix_dir, tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "en-es").mkdir(parents=True)
    for split in ("train", "valid"):
        (corpus / "en-es" / f"{split}.en").write_text(EN.read_text())
        (corpus / "en-es" / f"{split}.es").write_text(ES.read_text())
    card = {"format": "parallel", "pairs": {"en-es": {"src": "en", "tgt": "es"}}}
    (corpus / "card.json").write_text(json.dumps(card))
    out = tmp_path / "m2"
    args = ["cooc", "build", "--model", str(tokenizer_dir), "--corpus", str(corpus)]
    assert main([*args, "--out", str(out), "--num-proc", "2", "--quiet"]) == 0
    a, b = CoocMatrix(matrix_dir), CoocMatrix(out)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_allclose(a.data, b.data, rtol=1e-6)


def test_build_errors(tokenizer_dir, tmp_path, capsys):
    out = str(tmp_path / "x")
    assert main(["cooc", "build", "--text", f"en={EN}", "--out", out]) == 2
    assert "--tokenizer DIR or --model DIR" in capsys.readouterr().err
    assert (
        main(["cooc", "build", "--tokenizer", str(tokenizer_dir), "--text", str(EN), "--out", out])
        == 2
    )
    assert "must look like LANG=FILE" in capsys.readouterr().err
    assert (
        main(
            [
                "cooc",
                "build",
                "--tokenizer",
                str(tokenizer_dir),
                "--text",
                f"eng={EN}",
                "--out",
                out,
            ]
        )
        == 2
    )
    assert "did you mean 'en'" in capsys.readouterr().err
    assert not Path(out).exists()


def test_train_with_mlm_gc(matrix_dir, tokenizer_dir, tiny, tmp_path):
    objectives = f"[{{name: mlm_gc, cooc: {matrix_dir}, gc_weight: 0.5}}]"
    args = tiny("gc", **{
        "tokenizer.path": str(tokenizer_dir), "objectives": objectives, "data.parallel": "{}",
        "train.steps": 4, "train.save_every": 0,
    })  # fmt: skip
    assert main(["train", *args]) == 0
    records = [json.loads(x) for x in (tmp_path / "gc" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert len(steps) == 4
    for r in steps:
        assert r["mlm_gc/gc_loss"] > 0 and r["mlm_gc/gc_pairs"] > 0
        assert r["loss/mlm_gc"] == pytest.approx(r["mlm_gc/lm_loss"] + 0.5 * r["mlm_gc/gc_loss"])
        assert r["train/ppl"] == pytest.approx(np.exp(r["mlm_gc/lm_loss"]), rel=1e-5)


def test_train_with_mass_gc(matrix_dir, tokenizer_dir, tiny, tmp_path):
    objectives = f"[{{name: mass_gc, cooc: {matrix_dir}, gc_weight: 0.5, masked_neighbours: true}}]"
    args = tiny("mgc", **{
        "tokenizer.path": str(tokenizer_dir), "objectives": objectives, "data.parallel": "{}",
        "train.steps": 2, "train.save_every": 0,
    })  # fmt: skip
    assert main(["train", *args]) == 0
    records = [json.loads(x) for x in (tmp_path / "mgc" / "metrics.jsonl").read_text().splitlines()]
    for r in [r for r in records if "loss" in r]:
        assert r["mass_gc/gc_loss"] > 0 and r["mass_gc/gc_pairs"] > 0
        assert r["loss/mass_gc"] == pytest.approx(
            r["mass_gc/mass_loss"] + 0.5 * r["mass_gc/gc_loss"], rel=1e-5
        )


def test_train_refuses_gc_without_warmup(matrix_dir, tokenizer_dir, tiny, capsys):
    objectives = f"[{{name: mlm_gc, cooc: {matrix_dir}}}]"
    args = tiny("nowarm", **{
        "tokenizer.path": str(tokenizer_dir), "objectives": objectives, "data.parallel": "{}",
        "train.warmup_steps": 0,
    })  # fmt: skip
    assert main(["train", *args]) == 2
    assert "warmup_steps=0" in capsys.readouterr().err


def test_train_refuses_a_matrix_of_another_tokenizer(matrix_dir, tiny, capsys):
    objectives = f"[{{name: mlm_gc, cooc: {matrix_dir}}}]"
    args = tiny("othertok", **{"objectives": objectives, "data.parallel": "{}"})
    assert main(["train", *args]) == 2
    assert "built with another tokenizer" in capsys.readouterr().err


def test_compare_translated_phrases(matrix_dir, tmp_path, capsys):
    dictionary = tmp_path / "en-es.txt"
    words = "the el the la cat gato green verde park parque red roja ball pelota long largo "
    words += "book libro white blancas clouds nubes big grande door puerta"
    pairs = words.split()
    dictionary.write_text("".join(f"{a} {b}\n" for a, b in zip(pairs[::2], pairs[1::2])))
    out = tmp_path / "cmp"
    args = ["eval", "cooc-compare", "--matrix", str(matrix_dir), "--pair", "en-es"]
    args += ["--dict", str(dictionary), "--text-a", str(EN), "--text-b", str(ES), "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "translated |Δ log X|" in printed and "random" in printed
    result = json.loads((out / "compare.json").read_text())
    found = {(e["a"], e["b"]) for e in result["examples"]}
    assert ("green park", "parque verde") in found and ("the cat", "el gato") in found
    assert result["phrases"] == sum(b["n"] for b in result["bins"])
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
