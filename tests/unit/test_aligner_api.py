"""``crossalign.Aligner`` on a tiny random BERT: the API's shapes and contracts, and that it
gives what the batched aligner underneath gives (the CLI's path, tests/integration/
test_align_io.py). Whether the scores mean anything is tested on constructed states in
test_softmax_extraction.py (a random model's alignments carry no meaning)."""

from __future__ import annotations

from pathlib import Path

import pytest

import crossalign
from crossalign import Aligner, Link
from crossalign.align.aligner import AlignConfig, load_aligner
from crossalign.errors import CrossalignError
from tests.tiny_models import save_tiny_bert

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
METHODS = ["ot", "itermax", "argmax", "softmax"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer BERT with random weights and a unigram tokenizer of the en/es fixture."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-api"))


@pytest.fixture(scope="module")
def sentences() -> tuple[list[str], list[str]]:
    en = (FIXTURES / "en.txt").read_text().splitlines()[:6]
    es = (FIXTURES / "es.txt").read_text().splitlines()[:6]
    return en, es


def test_exported_from_the_package():
    assert crossalign.Aligner is Aligner and Link._fields == ("src", "tgt", "score")
    with pytest.raises(AttributeError):
        crossalign.NoSuchThing  # noqa: B018


@pytest.mark.parametrize("method", METHODS)
def test_align_returns_sorted_scored_links(tiny_model, sentences, method):
    aligner = Aligner.from_pretrained(tiny_model, layer=1, method=method, device="cpu")
    src, tgt = sentences[0][0], sentences[1][0]
    links = aligner.align(src, tgt)
    assert links and all(isinstance(x, Link) for x in links)
    assert [(x.src, x.tgt) for x in links] == sorted({(x.src, x.tgt) for x in links})
    n, m = len(src.split()), len(tgt.split())
    assert all(0 <= x.src < n and 0 <= x.tgt < m for x in links)
    assert all(0.0 <= x.score <= 1.0 for x in links)
    # strings are split on whitespace; token lists are taken as they are
    assert aligner.align(src.split(), tgt.split()) == links
    assert 0.0 < aligner.score(src, tgt) <= 1.0


@pytest.mark.parametrize("method", METHODS)
def test_batch_equals_one_pair_at_a_time_and_the_word_aligner(tiny_model, sentences, method):
    srcs, tgts = sentences
    aligner = Aligner.from_pretrained(tiny_model, 1, method, batch_size=4, device="cpu")
    batch = aligner.align_batch(srcs, tgts)
    for s, t, links in zip(srcs, tgts, batch):
        one = aligner.align(s, t)
        assert [(x.src, x.tgt) for x in one] == [(x.src, x.tgt) for x in links]
        assert [x.score for x in one] == pytest.approx([x.score for x in links], abs=1e-5)
    scores = aligner.score_batch(srcs, tgts)
    assert scores == pytest.approx([aligner.score(s, t) for s, t in zip(srcs, tgts)], abs=1e-5)
    # the links are those of the lower-level aligner (the eval aer path)
    low = load_aligner(tiny_model, AlignConfig(method=method), [1], device="cpu")
    pairs = [(s.split(), t.split()) for s, t in zip(srcs, tgts)]
    assert low.align(pairs, [1])[1] == [[(x.src, x.tgt) for x in links] for links in batch]


def test_ot_scores_are_plan_entries(tiny_model, sentences):
    """The plan of a pair sums to 1, so the links' plan entries sum to at most 1."""
    aligner = Aligner.from_pretrained(tiny_model, layer=1, method="ot", device="cpu")
    for s, t in zip(*sentences):
        links = aligner.align(s, t)
        assert 0.0 < sum(x.score for x in links) <= 1.0 + 1e-6


def test_options_and_errors(tiny_model, sentences):
    aligner = Aligner.from_pretrained(
        tiny_model, layer=0, method="softmax", softmax_threshold=0.5, encoding="tlm", device="cpu"
    )
    cfg = aligner.word_aligner.cfg
    assert cfg.softmax_threshold == 0.5 and cfg.encoding == "tlm"
    assert aligner.align("", "a b") == [] and aligner.score("", "a b") == 0.0
    with pytest.raises(CrossalignError, match="did you mean 'softmax_threshold'"):
        Aligner.from_pretrained(tiny_model, softmax_treshold=0.1)
    with pytest.raises(CrossalignError, match="unknown alignment method 'fast'"):
        Aligner.from_pretrained(tiny_model, method="fast")
    with pytest.raises(CrossalignError, match="layer 5 does not exist"):
        Aligner.from_pretrained(tiny_model, layer=5)
    with pytest.raises(CrossalignError, match="2 source and 1 target"):
        aligner.align_batch(["a", "b"], ["c"])
