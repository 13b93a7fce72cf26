"""The study's transfer metrics and correlations on hand-made inputs: macro-F1 beside accuracy,
the fine-tuning defaults, Spearman's ρ with its p-value over objective × transform points, and
which objectives train with language embeddings."""

from __future__ import annotations

import math

import pytest
import torch

from crossalign.errors import CrossalignError
from crossalign.evals.finetune_config import FinetuneConfig
from crossalign.evals.transfer import tagging_scores
from crossalign.stats import spearman
from crossalign.study.derived import correlations, transform_dirs
from tests.oracles.derived_study import study_config


def test_tagging_scores_by_hand():
    # gold    A A A B B C ; predicted A A B B C C  (labels A=0, B=1, C=2, D=3 unused)
    gold = torch.tensor([0, 0, 0, 1, 1, 2])
    pred = torch.tensor([0, 0, 1, 1, 2, 2])
    # A: TP 2, FP 0, FN 1 -> 4/5; B: TP 1, FP 1, FN 1 -> 2/4; C: TP 1, FP 1, FN 0 -> 2/3
    scores = tagging_scores(gold, pred, num_labels=4)
    assert scores["accuracy"] == pytest.approx(100 * 4 / 6)
    assert scores["f1"] == pytest.approx(100 * (4 / 5 + 2 / 4 + 2 / 3) / 3)


def test_tagging_scores_match_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    g = torch.Generator().manual_seed(0)
    gold = torch.randint(0, 6, (300,), generator=g)
    pred = torch.where(torch.rand(300, generator=g) < 0.6, gold, torch.randint(0, 7, (300,)))
    scores = tagging_scores(gold, pred, num_labels=7)
    assert scores["f1"] == pytest.approx(100 * metrics.f1_score(gold, pred, average="macro"))
    assert scores["accuracy"] == pytest.approx(100 * metrics.accuracy_score(gold, pred))


def test_finetuning_defaults_are_the_papers():
    cfg = FinetuneConfig()
    assert (cfg.lr, cfg.epochs, cfg.batch_size) == (2e-5, 10, 32)


def test_spearman_by_hand():
    stats = pytest.importorskip("scipy.stats")
    x = [0.9, 0.1, 0.5, 0.3, 0.7]
    y = [2.0, 30.0, 12.0, 10.0, 5.0]
    # ranks x: 5 1 3 2 4; ranks y: 1 5 4 3 2; Σd² = 16 + 16 + 1 + 1 + 4 = 38
    rho = 1 - 6 * 38 / (5 * (25 - 1))
    t = rho * math.sqrt((5 - 2) / (1 - rho**2))
    p = 2 * stats.t.sf(abs(t), 5 - 2)
    got = spearman(x, y)
    assert got[0] == pytest.approx(rho) and got[1] == pytest.approx(p)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10])[0] == pytest.approx(-1.0)
    assert all(math.isnan(v) for v in spearman([1, 2], [2, 1]))  # too few points
    assert all(math.isnan(v) for v in spearman([1, 1, 1], [1, 2, 3]))  # constant side


def _row(transform, objective, alignment, delta):
    return {
        "transform": transform, "objective": objective, "alignment": alignment,
        "delta": delta, "delta_f1": 2 * delta, "alignment_nn": alignment,
        "alignment_csls": alignment, "alignment_train_nn": alignment,
    }  # fmt: skip


def test_correlation_runs_over_every_objective_and_transform():
    stats = pytest.importorskip("scipy.stats")
    rows = [
        _row("trans", "mlm", 0.1, 20.0),
        _row("trans", "xlm", 0.6, 8.0),
        _row("trans", "dict_mlm", 0.5, 9.0),
        _row("trans", "align_mlm", 0.9, 1.0),
        _row("trans+inv", "mlm", 0.0, 30.0),
        _row("trans+inv", "xlm", 0.4, 25.0),
        _row("trans+inv", "dict_mlm", 0.3, 12.0),
        _row("trans+inv", "align_mlm", 0.8, 3.0),
    ]
    out = correlations(rows)
    first = out[0]
    assert (first["alignment"], first["delta"], first["over"], first["n"]) == (
        "alignment", "delta", "all", 8
    )  # fmt: skip
    want = stats.spearmanr([r["alignment"] for r in rows], [r["delta"] for r in rows])
    assert first["rho"] == pytest.approx(want.statistic)
    assert first["p"] == pytest.approx(want.pvalue)
    by_transform = [c for c in out if c["alignment"] == "alignment" and c["delta"] == "delta"]
    assert [(c["over"], c["n"]) for c in by_transform] == [
        ("all", 8), ("trans", 4), ("trans+inv", 4)
    ]  # fmt: skip
    assert by_transform[1]["rho"] == pytest.approx(-1.0)  # trans: perfectly anti-ordered
    # one transform: only the pooled correlations
    assert {c["over"] for c in correlations(rows[:4])} == {"all"}


@pytest.mark.parametrize(
    ("name", "language_embeddings"),
    [("mlm", False), ("align_mlm", False), ("xlm", True), ("dict_mlm", True), ("mlm_lang", True)],
)
def test_study_objectives_language_embeddings(name, language_embeddings):
    plain = study_config(name, "d", "r")
    assert plain["model"]["language_embeddings"] is language_embeddings
    if name == "mlm_lang":
        assert plain["objectives"] == study_config("mlm", "d", "r")["objectives"]


def test_study_transforms_are_checked():
    assert transform_dirs(["trans", " trans+inv"]) == ["trans", "trans+inv"]
    with pytest.raises(CrossalignError, match="add trans to 'inv'"):
        transform_dirs(["trans", "inv"])
    with pytest.raises(CrossalignError, match="the same one"):
        transform_dirs(["trans+inv", "inv+trans"])
    with pytest.raises(CrossalignError, match="unknown study objective 'mlm_langs'.*mlm_lang"):
        study_config("mlm_langs", "d", "r")


def test_span_f1_by_hand_and_bio_detection():
    from crossalign.evals.transfer import is_bio, span_f1

    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG"]]
    # PER found exactly; LOC missed; ORG cut short (a wrong span) -> TP 1, FP 1, FN 2
    pred = [["B-PER", "I-PER", "O", "O"], ["O", "B-ORG", "O"]]
    assert span_f1(gold, pred) == pytest.approx(100 * 2 * 1 / (2 * 1 + 1 + 2))
    assert span_f1(gold, gold) == pytest.approx(100.0)
    assert is_bio(("O", "B-PER", "I-PER")) and not is_bio(("NOUN", "VERB", "O"))


def test_token_batches_pad_like_the_sentences_and_tag_only_real_tokens(tmp_path):
    """``token_batches`` (transformers' DataCollatorForTokenClassification) against padding by
    hand: ids padded with the pad id, labels with IGNORE_INDEX, the mask and language ids on
    the real tokens only."""
    from transformers import AutoTokenizer

    from crossalign.data.masking import IGNORE_INDEX
    from crossalign.evals.transfer import token_batches
    from tests.tiny_models import save_tiny_bert

    tokenizer = AutoTokenizer.from_pretrained(save_tiny_bert(tmp_path / "m"))
    examples = [
        ([0, 7, 8, 2], [-100, 1, 3, -100]),
        ([0, 9, 2], [-100, 2, -100]),
        ([0, 5, 6, 7, 2], [-100, 0, 1, 1, -100]),
    ]
    batches = token_batches(examples, 2, tokenizer, lang_id=1)
    assert [b["input_ids"].shape for b in batches] == [(2, 4), (1, 5)]
    for batch, chunk in zip(batches, (examples[:2], examples[2:])):
        for row, (ids, labels) in enumerate(chunk):
            n, width = len(ids), batch["input_ids"].shape[1]
            pad = tokenizer.pad_token_id
            assert batch["input_ids"][row].tolist() == ids + [pad] * (width - n)
            assert batch["labels"][row].tolist() == labels + [IGNORE_INDEX] * (width - n)
            assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (width - n)
            assert batch["token_type_ids"][row, :n].tolist() == [1] * n


def test_evaluate_tagging_builds_no_graph_and_scores_spans_only_for_bio(tmp_path):
    """The test pass runs without gradients; a BIO label set gets span F1, POS does not."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from crossalign.evals.transfer import evaluate_tagging
    from tests.tiny_models import save_tiny_bert

    tokenizer = AutoTokenizer.from_pretrained(save_tiny_bert(tmp_path / "m"))
    grad_modes = []

    class Tagger(torch.nn.Module):
        device = torch.device("cpu")

        def forward(self, input_ids, **_):
            grad_modes.append(torch.is_grad_enabled())
            logits = torch.zeros(*input_ids.shape, 3)
            logits[..., 1] = 1.0  # always label 1
            return SimpleNamespace(logits=logits)

    test = [([0, 7, 8, 2], [-100, 1, 2, -100]), ([0, 9, 2], [-100, 1, -100])]
    pos = evaluate_tagging(Tagger(), test, 0, tokenizer, 2, ("NOUN", "VERB", "ADJ"))
    assert grad_modes == [False] and "span_f1" not in pos
    assert pos["accuracy"] == pytest.approx(100 * 2 / 3)
    ner = evaluate_tagging(Tagger(), test, 0, tokenizer, 2, ("O", "B-PER", "I-PER"))
    # gold spans: PER [1,2] and PER [1]; predicted B B -> PER [1], PER [2] and PER [1]: TP 1
    assert ner["span_f1"] == pytest.approx(100 * 2 * 1 / (2 * 1 + 2 + 1))
