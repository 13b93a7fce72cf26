"""Code-switched MASS (tcs_mass, scs_mass): which encoder positions switch, the two passes
against hand-built ones, the loss, and SCS-MASS's distribution for a model started from a
masked LM."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from crossalign.config import ModelConfig
from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.store.prepare import TrainingData
from crossalign.lexicon.induce import induce, layer_vectors
from crossalign.models.seq2seq import build_seq2seq
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.code_switch import soft_translations
from crossalign.objectives.seq2seq import decoder_logits, encoder_states

from .fake_device import FakeAccelerator, on_accelerator
from .test_bli_rsim import make_tokenizer
from .test_code_switch import semantic_switch
from .test_retrieval import tiny_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
SPECIALS = [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def setup():
    texts = {lang: (FIXTURES / f"{lang}.txt").read_text().splitlines() for lang in ("en", "es")}
    words = sorted({w for lines in texts.values() for line in lines for w in line.split()})
    tok = make_tokenizer(words)
    torch.manual_seed(0)
    cfg = ModelConfig(arch="bert", preset="tiny")
    model = build_seq2seq(cfg, len(tok), (0, 2, 1), ["en", "es"], 32).eval()
    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=SPECIALS, vocab_size=len(tok),
        languages=["en", "es"], position_offset=0, max_length=32, tokenizer=tok,
    )  # fmt: skip
    return texts, tok, model, ctx


def make(name: str, setup, **options):
    texts, tok, model, ctx = setup
    objective = OBJECTIVES.get(name)(ctx, threshold=0, other_max=0, switch_prob=0.5, **options)
    objective.start(model, TrainingData.from_texts(tok, texts, ctx.max_length))
    return objective


def en_batch(setup, objective, seed: int = 0) -> dict[str, torch.Tensor]:
    """``objective``'s batch of the first six English fixture sentences."""
    texts, tok, _, _ = setup
    ids = [np.array(tok(x, add_special_tokens=False)["input_ids"]) for x in texts["en"][:6]]
    return objective.collate(RawBatch("en", sentences=ids), torch.Generator().manual_seed(seed))


def test_registered_with_mass_and_switchings_options(setup):
    assert {"tcs_mass", "scs_mass"} <= set(OBJECTIVES.names())
    tcs = make("tcs_mass", setup, span_ratio=0.4, layer=1)
    assert tcs.span_ratio == 0.4 and tcs.layer == 1 and tcs.seq2seq and tcs.data == "sentences"
    scs = make("scs_mass", setup, top_k=3)
    assert scs.top_k == 3 and scs.switch_prob == 0.5
    # the same defaults as scs_mlm: r_S against the batch, counts over the whole text
    assert scs.csls_neighbourhood == "batch" and scs.max_sentences is None
    assert tcs.max_sentences is None


@pytest.mark.parametrize("name", ["tcs_mass", "scs_mass"])
def test_only_context_outside_the_span_switches(setup, name):
    objective = make(name, setup)
    switched = 0
    for seed in range(5):
        batch = en_batch(setup, objective, seed)
        switch = batch["switch"]
        in_span = batch["encoder_labels"] != IGNORE_INDEX
        special = torch.isin(batch["input_ids"], torch.tensor(SPECIALS))
        assert not (switch & (in_span | special | ~batch["attention_mask"].bool())).any()
        assert batch["pair"].tolist() == [0, 1]
        es = objective.ctx.language_id("es")
        assert (batch["cs_token_type_ids"][switch] == es).all()
        assert torch.equal(batch["cs_token_type_ids"][~switch], batch["token_type_ids"][~switch])
        context = ~in_span & ~special & batch["attention_mask"].bool()
        assert float(batch["switch_frac"]) == pytest.approx(float(switch.sum() / context.sum()))
        switched += int(switch.sum())
    assert switched > 0


def test_tcs_mass_switches_into_the_induced_translations(setup):
    tcs = make("tcs_mass", setup)
    batch = en_batch(setup, tcs)
    switch, ids = batch["switch"], batch["input_ids"]
    assert torch.equal(batch["cs_input_ids"][switch], tcs.translations[0, 1][ids[switch]])
    assert torch.equal(batch["cs_input_ids"][~switch], ids[~switch])
    assert tcs.specific[1, 0][batch["cs_input_ids"][switch]].all()  # Spanish-specific tokens


def test_tcs_mass_is_mass_on_both_inputs(setup):
    _, _, model, _ = setup
    tcs = make("tcs_mass", setup).eval()
    batch = en_batch(setup, tcs)
    logits = tcs(model, batch)
    n = batch["masked_labels"].numel()
    assert logits.shape == (2 * n, model.config.decoder.vocab_size)
    switched = {
        **batch,
        "input_ids": batch["cs_input_ids"],
        "token_type_ids": batch["cs_token_type_ids"],
    }
    with torch.no_grad():
        assert torch.allclose(logits[:n], decoder_logits(model, batch), atol=1e-5)
        assert torch.allclose(logits[n:], decoder_logits(model, switched), atol=1e-5)
    loss, ntok, metrics = tcs.loss(batch, logits)
    plain, _, _ = OBJECTIVES.get("mass")(tcs.ctx).loss(batch, logits[:n])
    assert int(ntok) == n and float(metrics["mass_loss"]) == pytest.approx(plain.item(), abs=1e-6)
    assert loss.item() == pytest.approx(float(metrics["mass_loss"] + metrics["cs_loss"]), abs=1e-5)
    assert metrics["cs_loss"] != metrics["mass_loss"]


def test_scs_mass_second_pass_equals_hand_built_embeddings(setup):
    _, _, model, _ = setup
    scs = make("scs_mass", setup, top_k=3).eval()
    batch = en_batch(setup, scs)
    switch = batch["switch"]
    assert switch.any()
    logits = scs(model, batch)
    n = batch["masked_labels"].numel()
    # the code-switched loss alone reaches the chosen candidates' rows (not in the input) only
    # through ŷ: the encoder's embeddings are its own, untied from any output layer
    _, cs_loss = (OBJECTIVES.get("mass")(scs.ctx).loss(batch, part)[0] for part in logits.split(n))
    model.zero_grad()
    cs_loss.backward()
    grad = model.get_encoder().get_input_embeddings().weight.grad
    with torch.no_grad():
        states = encoder_states(model, batch)
        cands = scs.specific[1, 0].nonzero().squeeze(1)
        _, chosen = soft_translations(
            model.get_decoder().cls(states[switch]),
            model.get_encoder().get_input_embeddings().weight,
            cands,
            None,  # the default: r_S against this batch
            3,
        )
    outside = chosen[~torch.isin(chosen, batch["input_ids"])].unique()
    assert len(outside) > 0 and (grad[outside].abs().sum(1) > 0).all()
    model.zero_grad()
    with torch.no_grad():
        states = encoder_states(model, batch)
        emb = model.get_encoder().get_input_embeddings()
        cands = scs.specific[1, 0].nonzero().squeeze(1)
        y = semantic_switch(
            model.get_decoder().cls(states[switch]),
            emb.weight,
            cands,
            None,
            3,
            10,
            1.0,
        )
        embeds = emb(batch["input_ids"])
        embeds[switch] = y
        switched = model.get_encoder()(
            inputs_embeds=embeds,
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            token_type_ids=batch["cs_token_type_ids"],
        ).last_hidden_state
        assert torch.allclose(logits[:n], decoder_logits(model, batch), atol=1e-5)
        assert torch.allclose(logits[n:], decoder_logits(model, batch, switched), atol=1e-4)


def test_scs_mass_distribution_is_the_masked_lms_for_a_model_started_from_one(setup, tmp_path):
    """A model built from a masked LM: at the start, the decoder's output layer on the
    encoder's states is the masked LM's own output on the same input (the formulation's
    justification; scs_mass applies it to MASS's masked encoder input)."""
    _, tok, _, _ = setup
    mlm = tiny_model(len(tok))
    mlm.save_pretrained(tmp_path / "mlm")
    cfg = ModelConfig(path=str(tmp_path / "mlm"), language_embeddings=False)
    model = build_seq2seq(cfg, len(tok), (0, 2, 1), [], 32).eval()
    ids = torch.tensor([tok("the cat is on the mat")["input_ids"]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        states = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        expected = mlm(input_ids=ids, attention_mask=mask).logits
        assert torch.allclose(model.get_decoder().cls(states), expected, atol=1e-5)


def test_refresh_reads_the_encoder(setup):
    """TCS-MASS induces from the encoder's layer; SCS-MASS's CSLS terms follow its embeddings."""
    _, _, model, _ = setup
    texts, tok, _, _ = setup
    tcs = make("tcs_mass", setup, layer=1, context_sentences=5)
    specific = tcs.specific
    vectors = []
    for a, lang in enumerate(["en", "es"]):
        lines = [np.array(tok(x, add_special_tokens=False)["input_ids"]) for x in texts[lang][:5]]
        wanted = specific[a].any(0).nonzero().squeeze(1)
        vectors.append(layer_vectors(model.get_encoder(), tok, 1, lines, wanted, lang))
    src, tgt = specific[0, 1].nonzero().squeeze(1), specific[1, 0].nonzero().squeeze(1)
    expected = induce(vectors[0], vectors[1], src, tgt, 10).table(len(tok))
    assert (expected >= 0).any() and torch.equal(tcs.translations[0, 1], expected)
    scs = make("scs_mass", setup, csls_neighbourhood="vocabulary")
    before = scs.r_terms.clone()
    emb = model.get_encoder().get_input_embeddings().weight
    saved = emb.detach().clone()
    with torch.no_grad():
        emb.mul_(torch.linspace(0.5, 2.0, emb.shape[1]))
    try:
        scs.refresh(model)
        assert not torch.allclose(before, scs.r_terms)
    finally:
        with torch.no_grad():
            emb.copy_(saved)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("tcs_mass", {"layer": 1, "refresh_every": 1}),
        ("scs_mass", {}),
        ("scs_mass", {"csls_neighbourhood": "vocabulary", "refresh_every": 1}),
    ],
)
def test_refresh_forward_and_loss_stay_on_the_model_device(setup, name, options):
    """Buffers and model on the accelerator, collation on the host (as in training)."""
    _, _, model, _ = setup
    objective = make(name, setup, **options)
    with FakeAccelerator(model, objective):
        objective.step_begins(model, 1)
        batch = en_batch(setup, objective)
        device = model.get_encoder().get_input_embeddings().weight.device
        moved = {k: v.to(device) for k, v in batch.items()}
        loss, _, _ = objective.loss(moved, objective(model, moved))
        assert on_accelerator(loss)
