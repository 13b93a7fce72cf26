"""TCS-MLM and SCS-MLM: switching positions, replacements, shapes, masking, finite losses, and
the SCS replacement against a per-position loop."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.store.prepare import Sources, TrainingData, cached_store, training_data
from crossalign.data.store.reading import open_store
from crossalign.errors import CrossalignError
from crossalign.evals.layers import layer_scores
from crossalign.lexicon.embed import contextual_token_vectors
from crossalign.lexicon.induce import induce_from_model
from crossalign.lexicon.options import InductionOptions
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.code_switch import soft_translations, switch_positions
from crossalign.objectives.mlm import masked_lm_loss

from .fake_device import DeviceMismatch, FakeAccelerator, on_accelerator
from .test_bli_rsim import make_tokenizer
from .test_retrieval import tiny_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"


@pytest.fixture(scope="module")
def setup():
    texts = {lang: (FIXTURES / f"{lang}.txt").read_text().splitlines() for lang in ("en", "es")}
    words = sorted({w for lines in texts.values() for line in lines for w in line.split()})
    tok = make_tokenizer(words)
    model = tiny_model(len(tok))
    ctx = TokenContext(
        pad_id=1,
        mask_id=4,
        cls_id=0,
        sep_id=2,
        special_ids=[0, 1, 2, 3, 4],
        vocab_size=len(tok),
        languages=[],
        position_offset=0,
        max_length=16,
        tokenizer=tok,
    )
    return texts, tok, model, ctx


def blocks(tok, lines: list[str], rows: int = 4, length: int = 16) -> RawBatch:
    flat = [t for line in lines for t in tok(line, add_special_tokens=False)["input_ids"]]
    return np.array(flat[: rows * length], dtype=np.int32).reshape(rows, length)


def make(name: str, setup, data: TrainingData | None = None, **options):
    """Objective ``name`` started on ``data`` (default: the fixture text in memory)."""
    texts, tok, model, ctx = setup
    objective = OBJECTIVES.get(name)(ctx, threshold=0, other_max=0, switch_prob=0.5, **options)
    objective.start(model, data or TrainingData.from_texts(tok, texts, ctx.max_length))
    return objective


def test_text_in_memory_starts_as_a_store_of_it(setup, tmp_path):
    texts, tok, model, ctx = setup
    # padded and blank lines: a store strips the one and drops the other
    lines = {lang: [f"  {text[0]} ", "", *text[1:]] for lang, text in texts.items()}
    files = {}
    for lang, text in lines.items():
        files[lang] = tmp_path / f"{lang}.txt"
        files[lang].write_text("\n".join(text) + "\n", encoding="utf-8")
    store = open_store(cached_store(Sources(mono=files), tok, tmp_path / "cache", progress=False))
    on_disk = training_data(store, tok, ctx.max_length, 0)
    in_memory = TrainingData.from_texts(tok, lines, ctx.max_length)
    assert in_memory.languages() == on_disk.languages() == ["en", "es"]
    for lang in lines:
        n = len(on_disk.mono[lang])
        assert n > 1 and len(in_memory.mono[lang]) == n
        assert np.array_equal(in_memory.mono[lang][np.arange(n)], on_disk.mono[lang][np.arange(n)])
    options = {"layer": 1, "max_sentences": 20, "context_sentences": 7}
    a, b = (make("tcs_mlm", setup, data, **options) for data in (in_memory, on_disk))
    for lang in lines:
        assert np.array_equal(a.counts[lang], b.counts[lang])
        first, second = a.sentences[lang](slice(7)), b.sentences[lang](slice(7))
        assert all(np.array_equal(x, y) for x, y in zip(first, second, strict=True))
    assert a.counts["en"].sum() > 0
    assert torch.equal(a.specific, b.specific) and a.specific.any()
    assert torch.equal(a.translations, b.translations) and (a.translations >= 0).any()


def test_code_switching_needs_the_training_data(setup):
    texts, tok, model, ctx = setup
    with pytest.raises(CrossalignError, match=r"call start\(model, data\)"):
        OBJECTIVES.get("tcs_mlm")(ctx, threshold=0, other_max=0).start(model)


def test_registered():
    assert {"tcs_mlm", "scs_mlm"} <= set(OBJECTIVES.names())


@pytest.mark.parametrize("name", ["tcs_mlm", "scs_mlm"])
def test_vocabulary_defaults_are_the_papers(setup, name):
    texts, tok, model, ctx = setup
    objective = OBJECTIVES.get(name)(ctx)
    assert (objective.threshold, objective.other_max) == (100, 100)  # > 100 here, <= 100 there
    with pytest.raises(CrossalignError, match="other_max=100 is above threshold=20"):
        OBJECTIVES.get(name)(ctx, threshold=20)


def test_csls_neighbourhood_defaults_to_the_batch(setup):
    texts, tok, model, ctx = setup
    scs = OBJECTIVES.get("scs_mlm")(ctx)
    assert scs.csls_neighbourhood == "batch" and "r_terms" not in dict(scs.named_buffers())
    cached = OBJECTIVES.get("scs_mlm")(ctx, csls_neighbourhood="vocabulary")
    assert "r_terms" in dict(cached.named_buffers())
    with pytest.raises(CrossalignError, match=r"scs_mlm: csls_neighbourhood 'vocab' is unknown"):
        OBJECTIVES.get("scs_mlm")(ctx, csls_neighbourhood="vocab")
    with pytest.raises(CrossalignError, match=r"refresh_every=5: with csls_neighbourhood: batch"):
        OBJECTIVES.get("scs_mlm")(ctx, refresh_every=5)
    OBJECTIVES.get("scs_mlm")(ctx, refresh_every=5, csls_neighbourhood="vocabulary")


def naive_counts(tok, lines: list[str]) -> np.ndarray:
    """Token counts of ``lines``, one token at a time."""
    counts = np.zeros(len(tok), dtype=np.int64)
    for line in lines:
        for t in tok(line, add_special_tokens=False)["input_ids"]:
            counts[t] += 1
    return counts


@pytest.mark.parametrize("name", ["tcs_mlm", "scs_mlm"])
def test_vocabularies_are_counted_over_the_whole_text(setup, name):
    """By default every sentence counts; ``max_sentences: N`` counts the first N only."""
    texts, tok, model, ctx = setup
    data = TrainingData.from_texts(tok, texts, ctx.max_length)
    cap = 5
    options = {"threshold": 1, "other_max": 0}
    whole = OBJECTIVES.get(name)(ctx, **options)
    capped = OBJECTIVES.get(name)(ctx, max_sentences=cap, **options)
    assert whole.max_sentences is None
    for objective in (whole, capped):
        objective.start(model, data)
        lines = {lang: text[: objective.max_sentences] for lang, text in texts.items()}
        want = {lang: naive_counts(tok, text) for lang, text in lines.items()}
        for lang in texts:
            np.testing.assert_array_equal(objective.counts[lang], want[lang])
        for a, b, la, lb in ((0, 1, "en", "es"), (1, 0, "es", "en")):
            specific = [
                t not in ctx.special_ids and want[la][t] > 1 and want[lb][t] <= 0
                for t in range(len(tok))
            ]
            assert objective.specific[a, b].tolist() == specific
    assert all(len(text) > cap for text in texts.values())
    assert not np.array_equal(whole.counts["en"], capped.counts["en"])
    assert not torch.equal(whole.specific, capped.specific)


def test_switch_positions_rate_and_subset():
    g = torch.Generator().manual_seed(0)
    context = torch.rand(64, 64, generator=g) < 0.8
    eligible = context & (torch.rand(64, 64, generator=g) < 0.5)
    switch = switch_positions(eligible, context, 0.15, torch.Generator().manual_seed(1))
    assert not (switch & ~eligible).any()
    assert abs(switch.sum() / context.sum() - 0.15) < 0.02
    everything = switch_positions(eligible, context, 1.0, torch.Generator())
    assert torch.equal(everything, eligible)  # capped at probability 1
    none = torch.zeros_like(eligible)
    assert not switch_positions(none, context, 0.15, torch.Generator()).any()


def test_tcs_collate_replaces_only_context_tokens(setup):
    texts, tok, model, ctx = setup
    tcs = make("tcs_mlm", setup)
    assert tcs.languages == ["en", "es"]
    raw = RawBatch("en", blocks=blocks(tok, texts["en"]))
    batch = tcs.collate(raw, torch.Generator().manual_seed(0))
    ids = torch.from_numpy(raw.blocks.astype("int64"))
    switch, selected = batch["switch"], batch["labels"] != IGNORE_INDEX
    assert switch.any() and not (switch & selected).any()
    table = tcs.translations[0, 1]
    assert torch.equal(batch["cs_input_ids"][switch], table[ids[switch]])
    assert torch.equal(batch["cs_input_ids"][~switch], batch["input_ids"][~switch])
    assert tcs.specific[0, 1][ids[switch]].all()  # only English-specific tokens switch
    es_vocab = tcs.specific[1, 0]
    assert es_vocab[batch["cs_input_ids"][switch]].all()  # into Spanish-specific tokens
    assert float(batch["switch_frac"]) == pytest.approx(
        float(switch.sum() / ((~selected) & (ids > 4)).sum())
    )


def test_tcs_loss_is_mlm_plus_code_switched_mlm(setup):
    texts, tok, model, ctx = setup
    tcs = make("tcs_mlm", setup).eval()
    batch = tcs.collate(RawBatch("es", blocks=blocks(tok, texts["es"])), torch.Generator())
    logits = tcs(model, batch)
    labels = batch["labels"][batch["labels"] != IGNORE_INDEX]
    assert logits.shape == (2 * labels.numel(), len(tok))
    loss, n, metrics = tcs.loss(batch, logits)
    plain = OBJECTIVES.get("mlm")(ctx)
    expected, _ = masked_lm_loss(plain(model, batch), labels)  # the original pass alone
    assert torch.isfinite(loss) and int(n) == labels.numel()
    assert float(metrics["lm_loss"]) == pytest.approx(expected.item(), abs=1e-5)
    assert loss.item() == pytest.approx(float(metrics["lm_loss"] + metrics["cs_loss"]), abs=1e-5)


def naive_semantic_switch(logits, emb, cands, r_c, top_k, csls_k, temperature):
    """One position at a time, with plain Python where possible. ``r_c`` None: each
    candidate's r_S is the mean cosine with its ``csls_k`` nearest x̂ of the batch (all rows)."""
    xs = []
    for row in logits:
        p = row.softmax(-1)
        top = p.argsort(descending=True)[:top_k]
        xs.append(sum(p[t] / p[top].sum() * emb[t] for t in top))
    if r_c is None:
        r_c = []
        for c in cands:
            sims = sorted(float(torch.cosine_similarity(x, emb[c], dim=0)) for x in xs)
            near = sims[::-1][:csls_k]
            r_c.append(sum(near) / len(near))
        r_c = torch.tensor(r_c)
    out = []
    for x in xs:
        cos = torch.stack([torch.cosine_similarity(x, emb[c], dim=0) for c in cands])
        r_x = cos.sort(descending=True).values[:csls_k].mean()
        csls = 2 * cos - r_x - r_c
        best = csls.argsort(descending=True)[:top_k]
        w = (csls[best] / temperature).softmax(-1)
        out.append(sum(w[j] * emb[cands[best[j]]] for j in range(len(best))))
    return torch.stack(out)


def semantic_switch(logits, emb, cands, r_c, top_k, csls_k, temperature):
    """ŷ from ``soft_translations``: the weighted mixture of the chosen candidates."""
    weights, chosen = soft_translations(logits, emb, cands, r_c, top_k, csls_k, temperature)
    return torch.einsum("nk,nkh->nh", weights, emb[chosen])


def test_soft_translations_equal_loop():
    g = torch.Generator().manual_seed(5)
    emb = torch.randn(50, 8, generator=g)
    logits = torch.randn(7, 50, generator=g)
    cands = torch.arange(20, 40)
    r_c = torch.rand(20, generator=g)
    weights, chosen = soft_translations(logits, emb, cands, r_c, top_k=4, csls_k=3)
    assert weights.shape == chosen.shape == (7, 4)
    assert ((chosen >= 20) & (chosen < 40)).all()
    assert torch.allclose(weights.sum(dim=1), torch.ones(7))
    y = semantic_switch(logits, emb, cands, r_c, 4, 3, 0.5)
    assert torch.allclose(y, naive_semantic_switch(logits, emb, cands, r_c, 4, 3, 0.5), atol=1e-5)
    rows = torch.cat(
        [semantic_switch(logits[i : i + 1], emb, cands, r_c, 4, 3, 0.5) for i in range(7)]
    )
    assert torch.allclose(y, rows, atol=1e-6)  # batched == per position


@pytest.mark.parametrize("csls_k", [1, 3, 7, 10])  # 7 = the batch, 10 above it (capped)
def test_batch_csls_equals_loop(csls_k):
    g = torch.Generator().manual_seed(6)
    emb = torch.randn(50, 8, generator=g)
    logits = torch.randn(7, 50, generator=g)
    cands = torch.arange(20, 40)
    y = semantic_switch(logits, emb, cands, None, 4, csls_k, 0.5)
    naive = naive_semantic_switch(logits, emb, cands, None, 4, csls_k, 0.5)
    assert torch.allclose(y, naive, atol=1e-5)
    # r_S is the batch's: a position's candidates change with the rest of its batch
    alone = semantic_switch(logits[:1], emb, cands, None, 4, csls_k, 0.5)
    assert not torch.allclose(y[:1], alone, atol=1e-3)


def test_batch_csls_by_hand():
    """2-d embeddings: tokens 0, 1 at (1, 0), tokens 2, 3 at (0.6, 0.8); candidates 4 at
    (1, 0) and 5 at (0, 1). Two positions predict tokens {0, 1} (x̂ = (1, 0)), one {2, 3}
    (x̂ = (0.6, 0.8)); K = 1, top_k = 2."""
    emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8], [0.6, 0.8], [1.0, 0.0], [0.0, 1.0]])
    logits = torch.tensor([[5.0, 5, 0, 0, -9, -9], [5.0, 5, 0, 0, -9, -9], [0, 0, 5.0, 5, -9, -9]])
    cands = torch.tensor([4, 5])
    # cos rows (1, 0), (1, 0), (0.6, 0.8); r_T = 1, 1, 0.8; batch r_S = max per column = 1, 0.8
    # CSLS of the third position: candidate 4: 1.2 - 0.8 - 1 = -0.6; candidate 5: 1.6 - 1.6 = 0
    weights, chosen = soft_translations(logits, emb, cands, None, top_k=2, csls_k=1)
    assert chosen[2].tolist() == [5, 4]
    e = math.exp(-0.6)
    assert torch.allclose(weights[2], torch.tensor([1 / (1 + e), e / (1 + e)]))
    # first positions: candidate 4: 2 - 1 - 1 = 0; candidate 5: 0 - 1 - 0.8 = -1.8
    e = math.exp(-1.8)
    assert chosen[0].tolist() == [4, 5]
    assert torch.allclose(weights[0], torch.tensor([1 / (1 + e), e / (1 + e)]))
    # the third position alone: r_S = 0.6, 0.8, so candidate 4 scores 1.2 - 0.8 - 0.6 = -0.2
    weights, chosen = soft_translations(logits[2:], emb, cands, None, top_k=2, csls_k=1)
    e = math.exp(-0.2)
    assert chosen[0].tolist() == [5, 4]
    assert torch.allclose(weights[0], torch.tensor([1 / (1 + e), e / (1 + e)]))


@pytest.mark.parametrize("neighbourhood", ["batch", "vocabulary"])
def test_scs_forward_shapes_masking_and_replacement(setup, neighbourhood):
    texts, tok, model, ctx = setup
    scs = make("scs_mlm", setup, top_k=3, csls_neighbourhood=neighbourhood).eval()
    batch = scs.collate(RawBatch("en", blocks=blocks(tok, texts["en"])), torch.Generator())
    switch, selected = batch["switch"], batch["labels"] != IGNORE_INDEX
    assert switch.any() and not (switch & selected).any()
    assert batch["pair"].tolist() == [0, 1]
    logits = scs(model, batch)
    n = int(selected.sum())
    assert logits.shape == (2 * n, len(tok))
    loss, _, metrics = scs.loss(batch, logits)
    assert torch.isfinite(loss) and metrics["cs_loss"] != metrics["lm_loss"]
    model.zero_grad()
    loss.backward()
    assert model.get_input_embeddings().weight.grad.abs().sum() > 0
    model.zero_grad()
    # the second pass equals the model run on hand-built input embeddings
    with torch.no_grad():
        hidden = model.base_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
        cands = scs.specific[1, 0].nonzero().squeeze(1)
        y = semantic_switch(
            model.cls(hidden[switch]),
            model.get_input_embeddings().weight,
            cands,
            scs.r_terms[0, 1, cands] if neighbourhood == "vocabulary" else None,
            3,
            10,
            1.0,
        )
        embeds = model.get_input_embeddings()(batch["input_ids"])
        embeds[switch] = y
        out = model.base_model(inputs_embeds=embeds, attention_mask=batch["attention_mask"])
        expected = model.cls(out.last_hidden_state[selected])
    assert torch.allclose(logits[n:], expected, atol=1e-4)


def test_scs_code_switched_loss_reaches_the_chosen_candidates(setup):
    """With untied output embeddings, the code-switched loss reaches the rows of candidates
    absent from the input only through ŷ."""
    texts, tok, model, ctx = setup
    config = copy.deepcopy(model.config)
    config.tie_word_embeddings = False
    untied = type(model)(config).eval()
    scs = OBJECTIVES.get("scs_mlm")(ctx, threshold=0, other_max=0, switch_prob=0.5, top_k=3)
    scs.start(untied, TrainingData.from_texts(tok, texts, ctx.max_length))
    batch = scs.collate(RawBatch("en", blocks=blocks(tok, texts["en"])), torch.Generator())
    logits = scs(untied, batch)
    labels = batch["labels"][batch["labels"] != IGNORE_INDEX]
    cs_loss, _ = masked_lm_loss(logits[labels.numel() :], labels)
    cs_loss.backward()
    weight = untied.get_input_embeddings().weight
    with torch.no_grad():
        hidden = untied.base_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).last_hidden_state
        cands = scs.specific[1, 0].nonzero().squeeze(1)
        _, chosen = soft_translations(untied.cls(hidden[batch["switch"]]), weight, cands, None, 3)
    outside = chosen[~torch.isin(chosen, batch["input_ids"])].unique()
    assert len(outside) > 0 and (weight.grad[outside].abs().sum(1) > 0).all()


def test_scs_without_switches_repeats_the_original(setup):
    texts, tok, model, ctx = setup
    scs = make("scs_mlm", setup).eval()
    batch = scs.collate(RawBatch("es", blocks=blocks(tok, texts["es"])), torch.Generator())
    batch["switch"] = torch.zeros_like(batch["switch"])
    logits = scs(model, batch)
    n = logits.shape[0] // 2
    assert torch.allclose(logits[:n], logits[n:], atol=1e-5)


def test_refresh_follows_the_model(setup):
    texts, tok, model, ctx = setup
    tcs = make("tcs_mlm", setup, refresh_every=2).train()
    src = tcs.specific[0, 1].nonzero().squeeze(1)
    tgt = tcs.specific[1, 0].nonzero().squeeze(1)
    before = tcs.translations.clone()
    weight = model.get_input_embeddings().weight
    saved = weight.detach().clone()
    try:
        m = min(len(src), len(tgt))
        with torch.no_grad():  # Spanish token i becomes a copy of English token i
            weight[tgt[:m]] = weight[src[:m]]
        batch = tcs.collate(RawBatch("en", blocks=blocks(tok, texts["en"])), torch.Generator())
        tcs(model, batch)  # forward changes no state
        assert torch.equal(tcs.translations, before) and int(tcs.calls) == 0
        tcs.step_begins(model, 1)
        assert torch.equal(tcs.translations, before) and int(tcs.calls) == 1
        tcs(model, batch)
        tcs.step_begins(model, 2)
        assert int(tcs.calls) == 2
        assert not torch.equal(tcs.translations, before)
        assert torch.equal(tcs.translations[0, 1][src[:m]], tgt[:m])
    finally:
        with torch.no_grad():
            weight.copy_(saved)


def test_fake_accelerator_catches_device_mixing():
    host = torch.arange(4.0)
    layer = torch.nn.Linear(2, 2)
    with FakeAccelerator(layer):
        index = torch.tensor([0, 2]).to(layer.weight.device)
        assert on_accelerator(index) and not on_accelerator(host)
        with pytest.raises(DeviceMismatch, match="mixes devices"):
            host[index]  # what CUDA refuses: a CPU tensor indexed by a GPU tensor
        with pytest.raises(DeviceMismatch, match="mixes devices"):
            torch.zeros(4).index_add_(0, index, torch.ones(2, device=layer.weight.device))
        moved = host.to(layer.weight.device)[index]
        assert on_accelerator(moved) and not on_accelerator(moved.cpu())
        assert on_accelerator(torch.zeros(3, device=index.device) + moved.sum())
        with pytest.raises(DeviceMismatch, match="numpy"):
            moved.numpy()


def test_tcs_refresh_from_a_layer_stays_on_the_model_device(setup):
    texts, tok, model, ctx = setup
    tcs = make("tcs_mlm", setup, layer=1, refresh_every=1)  # started on the host, as in train
    expected = tcs.translations.clone()
    with FakeAccelerator(model, tcs):  # then model and objective move to the accelerator
        tcs.refresh(model)
        assert on_accelerator(tcs.translations)
    assert torch.equal(tcs.translations, expected)


def test_contextual_vectors_and_induction_follow_the_model_device(setup):
    texts, tok, model, ctx = setup
    with FakeAccelerator(model):
        vectors = contextual_token_vectors(model, tok, texts["en"], [1, 2])
        assert all(on_accelerator(v.table) and on_accelerator(v.row_of) for v in vectors.values())
        opts = InductionOptions(layer=2, threshold=0, other_max=0)
        result = induce_from_model(model, tok, texts["en"], texts["es"], "en", "es", opts)
        for d in (result.forward, result.backward):
            assert all(on_accelerator(t) for t in (d.src_ids, d.tgt_ids, d.scores))
            assert on_accelerator(d.table(len(tok)))
        assert len(result.forward.lines(tok)) == len(result.forward.src_ids)
        pairs = [("cat", "gato"), ("dog", "perro"), ("book", "libro"), ("house", "casa")]
        rows = layer_scores(model, tok, pairs, [t for _, t in pairs], texts["en"], texts["es"])
        assert [r["words"] for r in rows] == [4, 4, 4]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tcs_refresh_from_a_layer_on_cuda(setup):
    texts, tok, model, ctx = setup
    tcs = make("tcs_mlm", setup, layer=1, refresh_every=1)
    src = tcs.specific[0, 1].nonzero().squeeze(1)
    expected = tcs.translations[0, 1, src].clone()
    tcs.cuda()
    tcs.refresh(copy.deepcopy(model).cuda())
    assert tcs.translations.device.type == "cuda"
    agree = (tcs.translations[0, 1, src].cpu() == expected).float().mean()
    assert agree > 0.9  # the same dictionary up to near-ties of CSLS scores
