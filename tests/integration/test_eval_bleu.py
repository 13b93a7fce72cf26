"""``crossalign eval bleu`` in-process on a tiny random encoder-decoder: its figures are
sacreBLEU's (and tokenized BLEU's) of what ``translate`` gives, greedy and beam, one direction
and both; its translations file; and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu
import torch

from crossalign.cli import main
from crossalign.config import ModelConfig, TokenizerConfig
from crossalign.data.tokenizer import load_tokenizer, train_tokenizer
from crossalign.evals.bleu import tokenized_bleu
from crossalign.models.seq2seq import build_seq2seq, load_seq2seq, translate
from tests.tiny_models import FIXTURES, save_tiny_bert

EN = ["the cat sleeps.", "a dog runs in the park", "my mother reads, then sleeps"]
ES = ["el gato duerme.", "un perro corre en el parque", "mi madre lee, luego duerme"]
KEYS = ("bleu", "bleu_tok", "bp", "ratio", "sentences")


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide encoder-decoder with en and es language rows and a 100-piece
    tokenizer of the en/es fixture; its random weights are scaled up so that each sentence
    gets its own translation (a sentence scored against another's reference would show)."""
    texts = {x: (FIXTURES / f"{x}.txt").read_text().splitlines() for x in ("en", "es")}
    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=100))
    torch.manual_seed(0)
    ids = (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    model = build_seq2seq(ModelConfig(arch="bert", preset="tiny"), len(tok), ids, ["en", "es"], 32)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8)
    out = tmp_path_factory.mktemp("seq2seq") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def testset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("testsets") / "en-es"
    folder.mkdir()
    (folder / "test.en").write_text("\n".join(EN) + "\n", encoding="utf-8")
    (folder / "test.es").write_text("\n".join(ES) + "\n", encoding="utf-8")
    return folder


def _translations(model_dir: Path, sentences: list[str], src: str, tgt: str, beams: int):
    model = load_seq2seq(str(model_dir), device="cpu")
    tokenizer = load_tokenizer(model_dir, "--model", masked_lm=False)
    return translate(model, tokenizer, sentences, src, tgt, num_beams=beams)


def _metrics(results: Path) -> dict[str, float]:
    return json.loads(results.read_text().splitlines()[-1])["metrics"]


def test_greedy_bleu_is_sacrebleu_of_the_translations(seq2seq, testset, tmp_path, capsys):
    results, hyp = tmp_path / "results.jsonl", tmp_path / "hyp.txt"
    argv = ["eval", "bleu", "--model", str(seq2seq), "--testset", str(testset), "--device",
            "cpu", "--output", str(hyp), "--results", str(results)]  # fmt: skip
    assert main(argv) == 0
    notes = capsys.readouterr().out
    assert "decoding: greedy" in notes and "en-es: sacreBLEU nrefs:1|case:mixed" in notes
    metrics = _metrics(results)
    assert set(metrics) == {f"en-es/{k}" for k in KEYS}
    assert 0.0 <= metrics["en-es/bleu"] <= 100.0 and metrics["en-es/sentences"] == 3
    hyps = _translations(seq2seq, EN, "en", "es", 1)
    assert len(set(hyps)) == 3 and all(hyps)
    assert hyp.read_text(encoding="utf-8").splitlines() == hyps
    expected = sacrebleu.corpus_bleu(hyps, [ES])
    assert metrics["en-es/bleu"] == pytest.approx(expected.score, abs=1e-9)
    assert metrics["en-es/bp"] == pytest.approx(expected.bp)
    assert metrics["en-es/bleu_tok"] == pytest.approx(tokenized_bleu(hyps, ES, "es"), abs=1e-9)


def test_own_translations_as_references_score_100(seq2seq, testset, tmp_path):
    # translated as one batch, as the evaluation does: the batch's longest source caps the length
    refs = tmp_path / "refs.es"
    own = _translations(seq2seq, EN[:2], "en", "es", 1)
    refs.write_text("\n".join([*own, "not scored"]) + "\n", encoding="utf-8")
    results = tmp_path / "results.jsonl"
    argv = ["eval", "bleu", "--model", str(seq2seq), "--src", str(testset / "test.en"), "--ref",
            str(refs), "--src-lang", "en", "--tgt-lang", "es", "--device", "cpu", "--results",
            str(results), "--max-sentences", "2"]  # fmt: skip
    assert main(argv) == 0
    metrics = _metrics(results)
    assert metrics["en-es/bleu"] == pytest.approx(100.0)
    assert metrics["en-es/bleu_tok"] == pytest.approx(100.0)
    assert metrics["en-es/sentences"] == 2


def test_beam_search_both_directions(seq2seq, testset, tmp_path):
    results, hyp = tmp_path / "results.jsonl", tmp_path / "hyp.txt"
    argv = ["eval", "bleu", "--model", str(seq2seq), "--testset", str(testset), "--device",
            "cpu", "--num-beams", "2", "--both-directions", "--output", str(hyp), "--results",
            str(results)]  # fmt: skip
    assert main(argv) == 0
    metrics = _metrics(results)
    assert set(metrics) == {f"{d}/{k}" for d in ("en-es", "es-en") for k in KEYS}
    for d, sources, refs in (("en-es", EN, ES), ("es-en", ES, EN)):
        hyps = _translations(seq2seq, sources, *d.split("-"), 2)
        assert (tmp_path / f"hyp.{d}.txt").read_text(encoding="utf-8").splitlines() == hyps
        assert 0.0 <= metrics[f"{d}/bleu"] <= 100.0
        score = sacrebleu.corpus_bleu(hyps, [refs]).score
        assert metrics[f"{d}/bleu"] == pytest.approx(score, abs=1e-9)
    assert not hyp.exists()


def _error(argv: list[str], capsys) -> str:
    assert main(["eval", "bleu", "--no-results", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err.strip()
    return err.splitlines()[-1]


def test_errors_name_the_file_and_the_fix(seq2seq, testset, tmp_path, capsys):
    short = tmp_path / "short.es"
    short.write_text("el gato duerme.\n", encoding="utf-8")
    src = str(testset / "test.en")
    err = _error(["--model", str(seq2seq), "--src", src, "--ref", str(short), "--src-lang",
                  "en", "--tgt-lang", "es"], capsys)  # fmt: skip
    assert f"{src} (3 lines) and {short} (1 lines) differ in line count" in err
    err = _error(["--model", str(seq2seq), "--testset", str(testset), "--split", "valid"], capsys)
    assert f"--testset {testset} has no valid.en" in err
    err = _error(["--model", str(seq2seq), "--src", src, "--ref", src, "--src-lang", "en",
                  "--tgt-lang", "fr"], capsys)  # fmt: skip
    assert f"--model {seq2seq} has no language embedding for 'fr'; it has en, es" in err
    masked_lm = save_tiny_bert(tmp_path / "mlm", ["en", "es"])
    err = _error(["--model", str(masked_lm), "--testset", str(testset)], capsys)
    assert f"--model {masked_lm} is a bert model, not an encoder-decoder" in err


def test_translate_batches_by_length_and_keeps_the_order(seq2seq):
    model, tok = load_seq2seq(str(seq2seq), device="cpu"), load_tokenizer(seq2seq)
    sentences = ["a dog", EN[2], EN[0]]  # the longest goes first into a batch, then back here
    alone = [translate(model, tok, [s], "en", "es")[0] for s in sentences]
    assert translate(model, tok, sentences, "en", "es", batch_size=1) == alone
    assert len(set(alone)) == 3
