"""The MLM-GC objective: Eq. 3 / Eq. 6 against a naive double loop, the warm-up guard."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from crossalign.config import RunConfig
from crossalign.cooc.matrix import CoocMatrix, write_matrix
from crossalign.data.masking import IGNORE_INDEX
from crossalign.errors import CrossalignError
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.cooc_gc import gc_loss, gc_terms
from crossalign.objectives.mlm import encode

SPECIAL = [0, 1, 2, 3, 4]  # cls pad sep unk mask
CLS, PAD, SEP, MASK = 0, 1, 2, 4


def save_matrix(path, x: dict, vocab_size: int, window: int = 3) -> CoocMatrix:
    upper = sorted((a, b, v) for (a, b), v in x.items() if a <= b)
    indptr = np.zeros(vocab_size + 1, dtype=np.int64)
    np.cumsum(np.bincount([a for a, _, _ in upper], minlength=vocab_size), out=indptr[1:])
    indices = np.array([b for _, b, _ in upper], dtype=np.int32)
    data = np.array([v for _, _, v in upper])
    write_matrix(path, indptr, indices, data, {"window": window, "languages": {}})
    return CoocMatrix(path)


def random_matrix(
    path, seed: int, pairs: int = 80, window: int = 2
) -> tuple[dict, np.random.Generator]:
    """A symmetric matrix of ``pairs`` random counts over ids 5..19 saved at ``path``: (the
    counts, the generator, for the test's own draws)."""
    x = {}
    rng = np.random.default_rng(seed)
    for a, b in rng.integers(5, 20, (pairs, 2)).tolist():
        x[a, b] = x[b, a] = float(rng.integers(1, 300))
    save_matrix(path, x, 20, window=window)
    return x, rng


def naive_gc(hidden, input_ids, labels, mask, x, window, x_max, alpha, masked_neighbours, emb):
    """Eq. 3 (Eq. 6 with ``emb``) by loops over sequences, masked positions and neighbours."""
    batch, length, d = hidden.shape
    total, centres = 0.0, 0
    for b in range(batch):
        orig = [int(labels[b, i]) if labels[b, i] != IGNORE_INDEX else int(input_ids[b, i])
                for i in range(length)]  # fmt: skip
        for t in range(length):
            if labels[b, t] == IGNORE_INDEX:
                continue
            centres += 1
            for k in range(length):
                if not 1 <= abs(t - k) <= window:
                    continue
                span = range(min(t, k), max(t, k) + 1)
                if any(orig[i] in SPECIAL or mask[b, i] == 0 for i in span):
                    continue  # a special token or padding between t and k, or at k
                if not masked_neighbours and input_ids[b, k] == MASK:
                    continue
                value = x.get((orig[t], orig[k]), 0.0)
                if value == 0:
                    continue
                g = hidden[b, k] if emb is None else emb[orig[k]]
                score = float(hidden[b, t] @ g) / math.sqrt(d)
                f = min(1.0, (value / x_max) ** alpha)
                total += f * (score - math.log(value)) ** 2 / (2 * window)
    return total / max(centres, 1)


def random_case(seed: int, vocab: int = 20):
    """A batch with specials, two segments per row, padding and masked positions."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, (3, 12))
    ids[:, 0] = CLS
    ids[:, 6] = SEP  # segment boundary
    ids[:, 11] = SEP
    ids[2, 9:] = PAD
    ids[2, 8] = SEP
    labels = np.full_like(ids, IGNORE_INDEX)
    chosen = (rng.random(ids.shape) < 0.5) & (ids >= 5)
    labels[chosen] = ids[chosen]
    inputs = ids.copy()
    inputs[chosen & (rng.random(ids.shape) < 0.7)] = MASK
    x = {}
    for a, b in rng.integers(5, vocab, (60, 2)).tolist():
        x[a, b] = x[b, a] = float(rng.choice([0.5, 3.0, 40.0, 250.0]))
    mask = (ids != PAD).astype(int)
    hidden = torch.from_numpy(rng.normal(size=(3, 12, 8)))
    return torch.from_numpy(inputs), torch.from_numpy(labels), torch.from_numpy(mask), x, hidden


@pytest.mark.parametrize("masked_neighbours", [False, True])
@pytest.mark.parametrize("window", [1, 3])
@pytest.mark.parametrize("eq6", [False, True])
def test_batched_loss_equals_double_loop(tmp_path, masked_neighbours, window, eq6):
    inputs, labels, mask, x, hidden = random_case(window + 2 * masked_neighbours)
    m = save_matrix(tmp_path / "m", x, 20)
    emb = torch.from_numpy(np.random.default_rng(9).normal(size=(20, 8))) if eq6 else None
    original = torch.where(labels != IGNORE_INDEX, labels, inputs)
    special = torch.isin(original, torch.tensor(SPECIAL)) | (mask == 0)
    terms = gc_terms(
        hidden, inputs, labels, special, m, mask_id=MASK, window=window, x_max=100.0,
        alpha=0.75, masked_neighbours=masked_neighbours, output_embeddings=emb,
    )  # fmt: skip
    got = gc_loss(terms, window).item()
    expected = naive_gc(
        hidden, inputs, labels, mask, x, window, 100.0, 0.75, masked_neighbours, emb
    )
    assert expected > 0
    assert got == pytest.approx(expected, rel=1e-5)
    assert terms.centres == int((labels != IGNORE_INDEX).sum())


def test_hand_computed_single_pair(tmp_path):
    # <s> [mask: 5] 6 </s>: one masked token, one neighbour, X[5, 6] = 200 so f = 1
    m = save_matrix(tmp_path / "m", {(5, 6): 200.0, (6, 5): 200.0}, 10, window=1)
    inputs = torch.tensor([[CLS, MASK, 6, SEP]])
    labels = torch.tensor([[IGNORE_INDEX, 5, IGNORE_INDEX, IGNORE_INDEX]])
    hidden = torch.zeros(1, 4, 4)
    hidden[0, 1] = torch.tensor([1.0, 2.0, 0.0, 0.0])
    hidden[0, 2] = torch.tensor([3.0, 1.0, 0.0, 0.0])
    special = torch.isin(torch.tensor([[CLS, 5, 6, SEP]]), torch.tensor(SPECIAL))
    terms = gc_terms(hidden, inputs, labels, special, m, mask_id=MASK, window=1)
    # score = (1*3 + 2*1) / sqrt(4) = 2.5; loss = (2.5 - log 200)^2 / (2 * 1) / 1
    assert gc_loss(terms, 1).item() == pytest.approx((2.5 - math.log(200.0)) ** 2 / 2, rel=1e-6)
    # X = 25 < x_max: f = (25/100)^0.75 and pairs with X = 0 are skipped
    m2 = save_matrix(tmp_path / "m2", {(5, 6): 25.0, (6, 5): 25.0}, 10, window=1)
    terms = gc_terms(hidden, inputs, labels, special, m2, mask_id=MASK, window=1)
    expected = 0.25**0.75 * (2.5 - math.log(25.0)) ** 2 / 2
    assert gc_loss(terms, 1).item() == pytest.approx(expected, rel=1e-6)
    m3 = save_matrix(tmp_path / "m3", {(7, 8): 5.0, (8, 7): 5.0}, 10, window=1)
    terms = gc_terms(hidden, inputs, labels, special, m3, mask_id=MASK, window=1)
    assert gc_loss(terms, 1).item() == 0.0


def context(tokenizer=None) -> TokenContext:
    return TokenContext(
        pad_id=PAD, mask_id=MASK, cls_id=CLS, sep_id=SEP, special_ids=SPECIAL, vocab_size=20,
        languages=["en"], position_offset=0, max_length=12, tokenizer=tokenizer,
    )  # fmt: skip


def test_objective_step_matches_naive_loss(tmp_path):
    x, rng = random_matrix(tmp_path / "m", 4)
    objective = OBJECTIVES.get("mlm_gc")(context(), cooc=str(tmp_path / "m"), gc_weight=0.5)
    assert objective.window == 2
    model = BertForMaskedLM(
        BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=32, max_position_embeddings=16, type_vocab_size=1)
    )  # fmt: skip
    model.eval()  # no dropout: the naive loss reads the same hidden states
    objective.start(model)
    blocks = rng.integers(5, 20, (4, 12)).astype(np.int32)
    blocks[:, 0], blocks[:, 5], blocks[:, -1] = CLS, SEP, SEP
    batch = objective.collate(RawBatch("en", blocks=blocks), torch.Generator().manual_seed(0))
    loss, n, metrics = objective.loss(batch, objective(model, batch))
    with torch.no_grad():
        hidden = encode(model, batch).double()
    expected = naive_gc(hidden, batch["input_ids"], batch["labels"], batch["attention_mask"], x,
                        2, 100.0, 0.75, False, None)  # fmt: skip
    assert metrics["gc_loss"].item() == pytest.approx(expected, rel=1e-4)
    assert loss.item() == pytest.approx(metrics["lm_loss"].item() + 0.5 * expected, rel=1e-4)
    assert n.item() == int((batch["labels"] != IGNORE_INDEX).sum())
    loss.backward()
    assert model.bert.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0


def test_warmup_guard_and_options(tmp_path):
    save_matrix(tmp_path / "m", {(5, 6): 2.0, (6, 5): 2.0}, 20, window=2)
    make = OBJECTIVES.get("mlm_gc")
    cfg = RunConfig()
    cfg.train.warmup_steps = 0
    with pytest.raises(CrossalignError, match="warmup_steps=0"):
        make(context(), cooc=str(tmp_path / "m")).check_config(cfg)
    make(context(), cooc=str(tmp_path / "m"), force_no_warmup=True).check_config(cfg)
    cfg.train.warmup_steps = 10
    make(context(), cooc=str(tmp_path / "m")).check_config(cfg)
    with pytest.raises(CrossalignError, match="needs cooc"):
        make(context())
    with pytest.raises(CrossalignError, match="window 3 must be between 1 and"):
        make(context(), cooc=str(tmp_path / "m"), window=3)
    with pytest.raises(CrossalignError, match="neighbour 'hidden'"):
        make(context(), cooc=str(tmp_path / "m"), neighbour="hidden")


def test_matrix_of_another_tokenizer_is_refused(tmp_path):
    from crossalign.config import TokenizerConfig
    from crossalign.data.tokenizer import train_tokenizer

    save_matrix(tmp_path / "m", {(5, 6): 2.0, (6, 5): 2.0}, 20, window=2)
    tok = train_tokenizer({"en": ["a b c d e f g", "b c d"]}, TokenizerConfig(vocab_size=20))
    with pytest.raises(CrossalignError, match="built with another tokenizer"):
        OBJECTIVES.get("mlm_gc")(context(tok), cooc=str(tmp_path / "m"))


def test_mass_gc_adds_the_naive_gc_of_the_encoder_states(tmp_path):
    from crossalign.config import ModelConfig
    from crossalign.models.seq2seq import build_seq2seq
    from crossalign.objectives.seq2seq import encoder_states

    x, rng = random_matrix(tmp_path / "m", 5)
    make = OBJECTIVES.get("mass_gc")
    objective = make(context(), cooc=str(tmp_path / "m"), gc_weight=0.5, masked_neighbours=True)
    torch.manual_seed(0)
    model = build_seq2seq(ModelConfig(arch="bert", preset="tiny"), 20, (CLS, SEP, PAD), ["en"], 12)
    model.eval()  # no dropout: the naive loss reads the same states
    objective.start(model)
    raw = RawBatch("en", sentences=[rng.integers(5, 20, n).astype(np.int32) for n in (8, 5, 9, 3)])
    batch = objective.collate(raw, torch.Generator().manual_seed(0))
    span = batch["encoder_labels"] != IGNORE_INDEX
    assert span.sum() == (batch["labels"] != IGNORE_INDEX).sum()  # the span, seen from both sides
    loss, n, metrics = objective.loss(batch, objective(model, batch))
    with torch.no_grad():
        states = encoder_states(model, batch).double()
    expected = naive_gc(states, batch["input_ids"], batch["encoder_labels"],
                        batch["attention_mask"], x, 2, 100.0, 0.75, True, None)  # fmt: skip
    assert expected > 0
    assert metrics["gc_loss"].item() == pytest.approx(expected, rel=1e-4)
    assert loss.item() == pytest.approx(metrics["mass_loss"].item() + 0.5 * expected, rel=1e-4)
    mass = OBJECTIVES.get("mass")(context())
    plain = mass.collate(raw, torch.Generator().manual_seed(0))
    assert torch.equal(plain["labels"], batch["labels"])
    mass_loss, _, _ = mass.loss(plain, mass(model, plain))
    assert mass_loss.item() == pytest.approx(metrics["mass_loss"].item(), rel=1e-5)
    cfg = RunConfig()
    cfg.train.warmup_steps = 0
    with pytest.raises(CrossalignError, match="objective mass_gc with train.warmup_steps=0"):
        objective.check_config(cfg)


def _mass_gc_pairs(objective, hidden, inputs, encoder_labels, attention_mask):
    """{(row, centre, neighbour): log X} of the slots ``mass_gc`` counts in a batch."""
    terms = objective.gc_terms_of(None, hidden, inputs, encoder_labels, attention_mask)
    b, t = (encoder_labels != IGNORE_INDEX).nonzero(as_tuple=True)
    w = objective.window
    offsets = [*range(-w, 0), *range(1, w + 1)]
    return {
        (int(b[i]), int(t[i]), int(t[i]) + offsets[j]): float(terms.log_x[i, j])
        for i, j in zip(*(terms.weight > 0).nonzero(as_tuple=True))
    }, terms


@pytest.mark.parametrize("masked_neighbours", [True, False])
def test_mass_gc_pairs_of_a_hand_built_span(tmp_path, masked_neighbours):
    # X[a, b] = 2^a + 2^b for every pair of ids 5..13: its value names the pair of ids looked up
    x = {(a, b): float(2**a + 2**b) for a in range(5, 14) for b in range(5, 14)}
    save_matrix(tmp_path / "m", x, 20, window=2)
    objective = OBJECTIVES.get("mass_gc")(
        context(), cooc=str(tmp_path / "m"), window=2, masked_neighbours=masked_neighbours
    )
    # row 0: <s> 5 6 7 8 9 </s>, span 6 7 8 at 2..4 read as <mask>, 11 (random), <mask>
    # row 1: <s> 10 12 13 </s> <pad> <pad>, span 13 </s> at 3..4, both <mask>
    inputs = torch.tensor([[CLS, 5, MASK, 11, MASK, 9, SEP], [CLS, 10, 12, MASK, MASK, PAD, PAD]])
    no = IGNORE_INDEX
    encoder_labels = torch.tensor([[no, no, 6, 7, 8, no, no], [no, no, no, 13, SEP, no, no]])
    attention_mask = (inputs != PAD).long()
    hidden = torch.randn(2, 7, 8, generator=torch.Generator().manual_seed(0))
    pairs, terms = _mass_gc_pairs(objective, hidden, inputs, encoder_labels, attention_mask)
    # (row, centre, neighbour, original id at centre, original id at neighbour), by hand
    always = [
        (0, 2, 1, 6, 5), (0, 2, 3, 6, 7),  # 3 reads 11 but is 7
        (0, 3, 1, 7, 5), (0, 3, 5, 7, 9),
        (0, 4, 3, 8, 7), (0, 4, 5, 8, 9),
        (1, 3, 1, 13, 10), (1, 3, 2, 13, 12),
    ]  # fmt: skip
    masked = [(0, 2, 4, 6, 8), (0, 3, 2, 7, 6), (0, 3, 4, 7, 8), (0, 4, 2, 8, 6)]
    expected = always + masked if masked_neighbours else always
    assert pairs == pytest.approx({(b, t, k): math.log(2**u + 2**v) for b, t, k, u, v in expected})
    assert terms.centres == 5  # the span's </s> is a centre without neighbours
    if masked_neighbours:  # a masked neighbour's g_k is its own encoder state
        i, j = 0, 3  # centre (0, 2), offset +2: neighbour 4
        assert terms.score[i, j].item() == pytest.approx(
            float(hidden[0, 2] @ hidden[0, 4]) / math.sqrt(8), rel=1e-6
        )


def test_mass_gc_counts_masked_neighbours_by_default_mlm_gc_does_not(tmp_path):
    save_matrix(tmp_path / "m", {(5, 6): 2.0, (6, 5): 2.0}, 20, window=2)
    cooc = str(tmp_path / "m")
    assert OBJECTIVES.get("mass_gc")(context(), cooc=cooc).masked_neighbours is True
    assert OBJECTIVES.get("mlm_gc")(context(), cooc=cooc).masked_neighbours is False
    off = OBJECTIVES.get("mass_gc")(context(), cooc=cooc, masked_neighbours=False)
    assert off.masked_neighbours is False


@pytest.mark.parametrize("window", [2, 3])
def test_mlm_gc_one_sentence_per_row_matches_naive_loss_and_packs_as_padded(tmp_path, window):
    """``line_by_line`` (and ``packing``) as ``mlm`` has them: on one sentence per row the GC
    term is the double loop's over the padded rows (no pair crosses a sentence or reaches a
    pad), and packed rows give the padded rows' loss, metrics and gradients. Window 3 reaches
    past the ``[sep] [cls]`` between packed sentences, so a pair across them would show."""
    from .test_packing import assert_packs_as_padded, tiny_bert

    x, rng = random_matrix(tmp_path / "m", 5, 400, window)  # nearly every pair counts
    make = OBJECTIVES.get("mlm_gc")
    cooc = str(tmp_path / "m")
    # half the tokens predicted, masked neighbours paired: pairs at every sentence's edge
    opts = {"cooc": cooc, "gc_weight": 0.5, "mask_prob": 0.5, "masked_neighbours": True}
    padded = make(context(), line_by_line=True, **opts)
    packed = make(context(), line_by_line=True, packing=True, **opts)
    assert padded.data == packed.data == "sentences" and make(context(), cooc=cooc).data == "mono"
    raw = RawBatch("en", sentences=[rng.integers(5, 20, n) for n in (3, 7, 2, 9, 4, 5)])
    batch = padded.collate(raw, torch.Generator().manual_seed(1))
    assert (batch["input_ids"][:, 0] == CLS).all() and (batch["input_ids"] == PAD).any()
    model = tiny_bert(20)
    loss, _, metrics = padded.loss(batch, padded(model, batch))
    with torch.no_grad():
        hidden = encode(model, batch).double()
    expected = naive_gc(hidden, batch["input_ids"], batch["labels"], batch["attention_mask"], x,
                        window, 100.0, 0.75, True, None)  # fmt: skip
    assert expected > 0 and metrics["gc_loss"].item() == pytest.approx(expected, rel=1e-4)
    assert_packs_as_padded(padded, packed, raw, vocab=20)
    with pytest.raises(CrossalignError, match="mlm_gc: packing: true .* needs line_by_line"):
        make(context(), cooc=cooc, packing=True)
