"""BLEU scoring (crossalign.evals.bleu): sacreBLEU as its own corpus_bleu gives it, tokenized
BLEU against a naive transcription of Moses' multi-bleu.perl, and the test-set reading and
option errors of ``eval bleu``."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import sacrebleu
from sacremoses import MosesTokenizer

from crossalign.errors import CrossalignError
from crossalign.evals.bleu import (
    aligned_files,
    hypotheses_path,
    read_aligned,
    sacrebleu_corpus,
    tokenized_bleu,
)
from crossalign.evals.options import BLEUOptions

HYPS = [
    "The cat doesn't sleep on the warm bed, it sleeps on the mat.",
    'Dr. Smith said: "it\'s late" and went home.',
    "We can't open the file (read-only) today!",
    "A dog runs in the green park near the river.",
]
REFS = [
    "The cat does not sleep on the warm bed; it sleeps on the old mat.",
    'Dr. Smith said: "it\'s very late" and then went home.',
    "We can't open the read-only file today!",
    "A dog runs in the big green park by the river.",
]


def multi_bleu(hypotheses: list[str], references: list[str]) -> float:
    """multi-bleu.perl with one reference, transcribed: whitespace tokens, corpus sums of
    clipped n-gram matches and n-gram counts for n = 1..4, 0 when any precision is 0, brevity
    penalty exp(1 - r/c) when c < r."""
    correct, total = [0] * 4, [0] * 4
    c = r = 0
    for hyp, ref in zip(hypotheses, references):
        h, t = hyp.split(), ref.split()
        c, r = c + len(h), r + len(t)
        for n in range(1, 5):
            h_grams = Counter(tuple(h[i : i + n]) for i in range(len(h) - n + 1))
            r_grams = Counter(tuple(t[i : i + n]) for i in range(len(t) - n + 1))
            total[n - 1] += sum(h_grams.values())
            correct[n - 1] += sum(min(k, r_grams[g]) for g, k in h_grams.items())
    if any(k == 0 for k in correct):
        return 0.0
    bp = math.exp(1 - r / c) if c < r else 1.0
    return 100 * bp * math.exp(sum(math.log(k / n) for k, n in zip(correct, total)) / 4)


def moses(sentences: list[str], lang: str = "en") -> list[str]:
    tok = MosesTokenizer(lang=lang)
    return [tok.tokenize(s, escape=False, return_str=True) for s in sentences]


def test_sacrebleu_corpus_is_sacrebleus_corpus_bleu_with_its_signature():
    bleu, signature = sacrebleu_corpus(HYPS, REFS, "en")
    score = bleu.score
    assert score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score, abs=1e-9)
    assert 5 < score < 95
    assert signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert "tok:zh" in sacrebleu_corpus(["我们去公园。"], ["我们去公园了。"], "zh-CN")[1]


def test_tokenized_bleu_is_multi_bleu_on_moses_tokens():
    hyps, refs = moses(HYPS), moses(REFS)
    assert hyps[0].split()[2:4] == ["doesn", "'t"]  # Moses' tokens, not 13a's
    expected = multi_bleu(hyps, refs)
    assert sum(len(h.split()) for h in hyps) < sum(len(r.split()) for r in refs)  # BP < 1
    assert 5 < expected < 95
    assert tokenized_bleu(HYPS, REFS, "en") == pytest.approx(expected, abs=1e-9)
    # tokenization decides the n-grams: the detokenized sacreBLEU figure is another number
    assert abs(tokenized_bleu(HYPS, REFS, "en") - sacrebleu_corpus(HYPS, REFS, "en")[0].score) > 0.5


def test_tokenized_bleu_tokenizes_what_multi_bleu_would_not():
    hyps, refs = ["He said no, then left."], ["He said no , then left ."]
    assert tokenized_bleu(hyps, refs, "en") == pytest.approx(100.0)
    assert multi_bleu(hyps, refs) < 100  # multi-bleu.perl on the raw text: 'no,' is no 'no'


def test_tokenized_bleu_is_zero_when_a_precision_is_zero_unlike_smoothed_sacrebleu():
    hyps, refs = ["the cat sat on a mat"], ["the cat sat down on a mat"]
    assert multi_bleu(moses(hyps), moses(refs)) == 0.0  # no 4-gram matches
    assert tokenized_bleu(hyps, refs, "en") == 0.0
    assert sacrebleu_corpus(hyps, refs, "en")[0].score > 0  # exp smoothing


def test_tokenized_bleu_is_case_sensitive():
    assert tokenized_bleu(["The cat sat on the mat"], ["the cat sat on the mat"], "en") < 100


def _files(tmp_path, src: str, ref: str):
    (tmp_path / "a.en").write_text(src, encoding="utf-8")
    (tmp_path / "b.de").write_text(ref, encoding="utf-8")
    return tmp_path / "a.en", tmp_path / "b.de"


def test_read_aligned_keeps_blank_lines_and_cuts_to_max_sentences(tmp_path):
    src, ref = _files(tmp_path, " one \n\nthree\n", "eins\nzwei\ndrei\n")
    assert read_aligned(src, ref) == (["one", "", "three"], ["eins", "zwei", "drei"])
    assert read_aligned(src, ref, 2) == (["one", ""], ["eins", "zwei"])


def test_read_aligned_names_both_files_and_counts(tmp_path):
    src, ref = _files(tmp_path, "one\ntwo\nthree\n", "eins\nzwei\n")
    with pytest.raises(CrossalignError, match=r"a\.en \(3 lines\) and .*b\.de \(2 lines\) differ"):
        read_aligned(src, ref)
    src, ref = _files(tmp_path, "", "")
    with pytest.raises(CrossalignError, match=r"a\.en, .*b\.de is empty"):
        read_aligned(src, ref)


def test_testset_folder_gives_files_and_languages(tmp_path):
    folder = tmp_path / "en-de"
    folder.mkdir()
    for name in ("test.en", "test.de", "valid.en"):
        (folder / name).write_text("x\n")
    opts = BLEUOptions(testset=str(folder))
    assert opts.languages() == ("en", "de")
    assert aligned_files(opts) == (folder / "test.en", folder / "test.de")
    with pytest.raises(CrossalignError, match=r"en-de has no valid\.de; it needs valid\.en and"):
        aligned_files(BLEUOptions(testset=str(folder), split="valid"))
    with pytest.raises(CrossalignError, match=r"--testset .*nowhere is not a folder"):
        aligned_files(BLEUOptions(testset=str(tmp_path / "nowhere"), src_lang="en", tgt_lang="de"))
    with pytest.raises(CrossalignError, match=r"--ref .*b\.de: no such file"):
        aligned_files(BLEUOptions(src=str(folder / "test.en"), ref=str(tmp_path / "b.de"),
                                  src_lang="en", tgt_lang="de"))  # fmt: skip


def test_options_need_one_test_set_and_languages():
    with pytest.raises(CrossalignError, match="give the test set: --testset DIR"):
        aligned_files(BLEUOptions())
    with pytest.raises(CrossalignError, match="give --testset DIR or --src FILE .*not both"):
        BLEUOptions(testset="en-de", src="a", ref="b")
    with pytest.raises(CrossalignError, match="--src and --ref go together"):
        BLEUOptions(src="a", src_lang="en", tgt_lang="de")
    with pytest.raises(CrossalignError, match="give --src-lang and --tgt-lang"):
        BLEUOptions(src="a", ref="b")
    with pytest.raises(CrossalignError, match="folder name 'test' is not <src>-<tgt>"):
        BLEUOptions(testset="data/test")
    with pytest.raises(CrossalignError, match="num_beams=0 must be"):
        BLEUOptions(testset="en-de", num_beams=0)
    assert BLEUOptions(testset="x/en-de", tgt_lang="fr").languages() == ("en", "fr")


def test_hypotheses_path_puts_the_direction_before_the_suffix():
    assert hypotheses_path("out/hyp.txt", "en-de", False).name == "hyp.txt"
    assert hypotheses_path("out/hyp.txt", "de-en", True).as_posix() == "out/hyp.de-en.txt"
