import math

import numpy as np
import pytest
import torch

from crossalign.data.masking import IGNORE_INDEX
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.dwa import links_to_pointers, pointer_loss, self_label_links


def self_label_pointers(states, src, tgt, **options):
    """Pointer labels of ``self_label_links`` with ``options``, as ``DenoisingWordAlignment``
    makes them (last link in row-major order)."""
    links, plan = self_label_links(states, src, tgt, **options)
    return links_to_pointers(links, plan, src, tgt)


def naive_pointer_loss(query, key, labels, segments, pointable, reduction="sum"):
    """Eq. 15 by loops: per pair, the sum over its labelled positions; ``pooled`` sums them
    over the pairs, ``sum`` averages those sums over the pairs, ``mean`` averages over all
    labelled positions."""
    losses = []
    for b in range(query.shape[0]):
        for i in range(query.shape[1]):
            if labels[b, i] == IGNORE_INDEX:
                continue
            allowed = [
                j for j in range(query.shape[1])
                if segments[b, j] == 1 - segments[b, i] and pointable[b, j]
            ]  # fmt: skip
            logits = [float(query[b, i] @ key[b, j]) / math.sqrt(query.shape[2]) for j in allowed]
            top = max(logits)
            log_z = top + math.log(sum(math.exp(x - top) for x in logits))
            losses.append(log_z - logits[allowed.index(int(labels[b, i]))])
    if reduction == "pooled":
        return sum(losses)
    return sum(losses) / (query.shape[0] if reduction == "sum" else len(losses))


def example():
    torch.manual_seed(0)
    # two pairs: <s> a b </s> <s> c d e </s> and <s> f </s> <s> g </s> <pad>...
    segments = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, -1, -1, -1]])
    special = torch.tensor([[1, 0, 0, 1, 1, 0, 0, 0, 1], [1, 0, 1, 1, 0, 1, 1, 1, 1]]).bool()
    pointable = ~special & (segments >= 0)
    labels = torch.full((2, 9), IGNORE_INDEX)
    labels[0, 1], labels[0, 6], labels[1, 1], labels[1, 4] = 5, 2, 4, 1
    return torch.randn(2, 9, 8), torch.randn(2, 9, 8), labels, segments, pointable


@pytest.mark.parametrize("reduction", ["pooled", "sum", "mean"])
def test_pointer_loss_equals_naive_loop(reduction):
    q, k, labels, seg, pointable = example()
    loss, n = pointer_loss(q, k, labels, seg, pointable, reduction)
    assert n == 4
    expected = naive_pointer_loss(q, k, labels, seg, pointable, reduction)
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_dwa_rejects_unknown_options_and_a_layer_beyond_the_model():
    from transformers import BertConfig, BertForMaskedLM

    from crossalign.errors import CrossalignError

    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=[], position_offset=0, max_length=16,
    )  # fmt: skip
    with pytest.raises(CrossalignError, match="ot_filter 'intersect' is unknown"):
        OBJECTIVES.get("dwa")(ctx, ot_filter="intersect")
    with pytest.raises(CrossalignError, match="'iterative' is now called 'eq9-literal'"):
        OBJECTIVES.get("dwa")(ctx, ot_filter="iterative")
    for key in ("pointer_label", "layout", "reduction"):
        with pytest.raises(CrossalignError, match=f"{key} 'x' is unknown"):
            OBJECTIVES.get("dwa")(ctx, **{key: "x"})
    model = BertForMaskedLM(
        BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=16)
    )  # fmt: skip
    with pytest.raises(CrossalignError, match="layer=10, but the model has layers 0-2"):
        OBJECTIVES.get("dwa")(ctx).start(model)
    OBJECTIVES.get("dwa")(ctx, layer=2).start(model)


def test_pointer_loss_ignores_padding_and_same_segment():
    q, k, labels, seg, pointable = example()
    before, _ = pointer_loss(q, k, labels, seg, pointable)
    k2 = k.clone()
    k2[0, 2] += 100.0  # a source token: same segment as row (0, 1), excluded for it...
    k2[1, 6:] = 1e4  # padding
    k2[0, 0] = 1e4  # <s>: not pointable
    q_rows_from_source = labels.clone()
    q_rows_from_source[0, 6] = IGNORE_INDEX  # ...but row (0, 6) may point at (0, 2)
    a, _ = pointer_loss(q, k, q_rows_from_source, seg, pointable)
    b, _ = pointer_loss(q, k2, q_rows_from_source, seg, pointable)
    assert a.item() == pytest.approx(b.item(), rel=1e-6)
    assert torch.isfinite(before)


def test_pointer_loss_without_labels_is_zero():
    q, k, labels, seg, pointable = example()
    loss, n = pointer_loss(q, k, torch.full_like(labels, IGNORE_INDEX), seg, pointable)
    assert n == 0 and loss.item() == 0.0


def test_self_labels_find_a_planted_permutation():
    # Source tokens 1..4 carry one-hot vectors; target tokens 6..9 carry the same vectors
    # in the order 3, 1, 4, 2: every source token must point at its twin and back.
    states = torch.zeros(1, 11, 8)
    perm = [3, 1, 4, 2]
    for i in range(4):
        states[0, 1 + i, i] = 5.0
        states[0, 6 + perm.index(i + 1), i] = 5.0
    states += 0.01
    src = torch.zeros(1, 11, dtype=torch.bool)
    tgt = torch.zeros(1, 11, dtype=torch.bool)
    src[0, 1:5] = True
    tgt[0, 6:10] = True
    labels = self_label_pointers(states, src, tgt)[0].tolist()
    for i in range(4):
        j = 6 + perm.index(i + 1)
        assert labels[1 + i] == j and labels[j] == 1 + i
    assert labels[0] == labels[5] == labels[10] == IGNORE_INDEX


def test_self_labels_batched_equal_per_pair():
    torch.manual_seed(1)
    states = torch.randn(3, 12, 16).abs()
    src = torch.zeros(3, 12, dtype=torch.bool)
    tgt = torch.zeros(3, 12, dtype=torch.bool)
    for b, (ns, nt) in enumerate([(4, 5), (2, 3), (5, 5)]):
        src[b, 1 : 1 + ns] = True
        tgt[b, 3 + ns : 3 + ns + nt] = True
    batched = self_label_pointers(states, src, tgt)
    for b in range(3):
        single = self_label_pointers(states[b : b + 1], src[b : b + 1], tgt[b : b + 1])
        assert torch.equal(batched[b : b + 1], single)


def test_dwa_collate_keeps_original_ids():
    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=["en", "es"], position_offset=0, max_length=16,
    )  # fmt: skip
    raw = RawBatch("en-es", pairs=[(np.array([10, 11, 12]), np.array([20, 21]))])
    # the authors' layout by default: <s> src </s> tgt </s>, continuous positions
    batch = OBJECTIVES.get("dwa")(ctx, mask_prob=0.5).collate(raw, torch.Generator())
    assert batch["original_ids"][0].tolist() == [0, 10, 11, 12, 2, 20, 21, 2]
    assert batch["position_ids"][0].tolist() == list(range(8))
    assert batch["segment_ids"][0].tolist() == [0] * 5 + [1] * 3
    assert batch["pointable"][0].tolist() == [0, 1, 1, 1, 0, 1, 1, 0]
    assert (batch["labels"] != IGNORE_INDEX).any()
    # TLM's layout: positions restart at the target
    dwa = OBJECTIVES.get("dwa")(ctx, mask_prob=0.5, layout="tlm")
    batch = dwa.collate(raw, torch.Generator().manual_seed(0))
    assert batch["original_ids"][0].tolist() == [0, 10, 11, 12, 2, 0, 20, 21, 2]
    assert batch["position_ids"][0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]


def test_self_labels_follow_the_filter_option():
    """Without filtering (the union of both argmax directions) every real token gets a label;
    the paper's filtering leaves some unlabelled on a random pair."""
    torch.manual_seed(2)
    states = torch.randn(1, 12, 16).abs()
    src = torch.zeros(1, 12, dtype=torch.bool)
    tgt = torch.zeros(1, 12, dtype=torch.bool)
    src[0, 1:6], tgt[0, 7:11] = True, True
    union = self_label_pointers(states, src, tgt, ot_filter="union")
    assert (union[src | tgt] != IGNORE_INDEX).all()
    mutual = self_label_pointers(states, src, tgt, filter_iters=1)
    assert (mutual[src | tgt] == IGNORE_INDEX).any()


def tiny_dwa(reduction: str = "pooled", **options):
    """A dwa objective on a 2-layer BERT with a TokenContext to match."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=40,
        languages=[], position_offset=0, max_length=32,
    )  # fmt: skip
    model = BertForMaskedLM(
        BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=32, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0)
    )  # fmt: skip
    dwa = OBJECTIVES.get("dwa")(ctx, layer=1, reduction=reduction, mask_prob=0.5, **options)
    dwa.start(model)
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(5, 40, 6), rng.integers(5, 40, 5)) for _ in range(3)]
    batch = dwa.collate(RawBatch("en-es", pairs=pairs), torch.Generator().manual_seed(3))
    return model, dwa, dwa.label(model, batch)


def test_pooled_loss_is_the_criterions_sample_size_normalisation():
    """``pooled``: (Σ CE of TLM + Σ CE of the pointer) / (TLM tokens + DWA queries), with that
    count, computed here by hand from the logits and the pointer scores."""
    model, dwa, batch = tiny_dwa("pooled")
    out = dwa(model, batch)
    loss, n, metrics = dwa.loss(batch, out)
    labels = batch["labels"][batch["labels"] != IGNORE_INDEX]
    tlm_sum = sum(
        float(torch.logsumexp(row.detach().double(), 0) - row[y].detach().double())
        for row, y in zip(out["logits"], labels)
    )
    q, k, ptr = out["query"], out["key"], batch["pointer_labels"]
    seg, pointable = batch["segment_ids"], batch["pointable"]
    dwa_sum = naive_pointer_loss(q.detach(), k.detach(), ptr, seg, pointable, "pooled")
    n_dwa = int((ptr != IGNORE_INDEX).sum())
    assert n_dwa > 0 and int(n) == len(labels) + n_dwa == dwa.token_count(batch)
    assert loss.item() == pytest.approx((tlm_sum + dwa_sum) / (len(labels) + n_dwa), rel=1e-5)
    assert metrics["lm_tokens"].item() == len(labels)
    # the other reductions count TLM's tokens only
    _, dwa_sum_reduction, batch_sum = tiny_dwa("sum")
    assert dwa_sum_reduction.token_count(batch_sum) == int(
        (batch_sum["labels"] != IGNORE_INDEX).sum()
    )


def test_pointer_labels_only_at_masked_positions_and_forward_labels_itself():
    model, dwa, batch = tiny_dwa()
    masked = batch["labels"] != IGNORE_INDEX
    assert ((batch["pointer_labels"] != IGNORE_INDEX) <= masked).all()
    unlabelled = {k: v for k, v in batch.items() if k != "pointer_labels"}
    a = dwa.loss(batch, dwa(model, batch))[0]
    b = dwa.loss(unlabelled, dwa(model, unlabelled))[0]
    assert a.item() == pytest.approx(b.item(), rel=1e-6)


def test_step_with_mlm_is_one_mean_over_all_tokens_and_queries():
    """``objective_mix: pooled`` with MLM: the step loss is (Σ CE_mlm + Σ CE_tlm + Σ CE_dwa) /
    (N_mlm + N_tlm + N_dwa), the criterion's single ``sample_size`` (sums by hand); the same
    step split into two micro-batches gives the same gradients (labels and counts of every
    micro-batch are known before the first backward)."""
    from accelerate import Accelerator

    from crossalign.objectives.mlm import MaskedLM, add_masked_index
    from crossalign.objectives.objective_set import ObjectiveSet
    from crossalign.training.step import accumulate_gradients

    model, dwa, _ = tiny_dwa()
    mlm = MaskedLM(dwa.ctx, mask_prob=0.3)
    module = ObjectiveSet(model, {"mlm": mlm, "dwa": dwa})
    rng = np.random.default_rng(1)
    blocks = rng.integers(5, 40, size=(4, 12))
    pairs = [(rng.integers(5, 40, 7), rng.integers(5, 40, int(n))) for n in (6, 2, 5, 3)]
    gen = torch.Generator().manual_seed(2)
    full = {
        "mlm": mlm.collate(RawBatch("en", blocks=blocks), gen),
        "dwa": dwa.collate(RawBatch("en-es", pairs=pairs), gen),
    }
    accelerator = Accelerator(cpu=True)
    weights = {"mlm": 1.0, "dwa": 1.0}

    def step(micro):
        module.zero_grad(set_to_none=True)
        loss, results = accumulate_gradients(
            accelerator, module, micro, dict(module.objectives), weights, "pooled"
        )
        grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
        return loss, results, grads

    loss, results, grads = step([full])
    # by hand: the masked-LM sums from the logits, the pointer sum by loops
    labelled = dwa.label(model, full["dwa"])
    with torch.no_grad():
        mlm_out = mlm(model, full["mlm"])
        dwa_out = dwa(model, labelled)
    mlm_labels = full["mlm"]["labels"][full["mlm"]["labels"] != IGNORE_INDEX]
    tlm_labels = labelled["labels"][labelled["labels"] != IGNORE_INDEX]
    ce = torch.nn.functional.cross_entropy
    mlm_sum = ce(mlm_out.double(), mlm_labels, reduction="sum").item()
    tlm_sum = ce(dwa_out["logits"].double(), tlm_labels, reduction="sum").item()
    ptr = labelled["pointer_labels"]
    dwa_sum = naive_pointer_loss(
        dwa_out["query"], dwa_out["key"], ptr, labelled["segment_ids"], labelled["pointable"],
        "pooled",
    )  # fmt: skip
    n_all = len(mlm_labels) + len(tlm_labels) + int((ptr != IGNORE_INDEX).sum())
    assert loss.item() == pytest.approx((mlm_sum + tlm_sum + dwa_sum) / n_all, rel=1e-4)
    # two micro-batches of two rows each
    halves = [
        {
            name: add_masked_index({k: v[h * 2 : h * 2 + 2] for k, v in b.items() if v.dim() == 2})
            for name, b in full.items()
        }
        for h in (0, 1)
    ]
    split_loss, _, split_grads = step(halves)
    assert split_loss.item() == pytest.approx(loss.item(), rel=1e-5)
    for name, g in grads.items():
        torch.testing.assert_close(split_grads[name], g, rtol=1e-4, atol=1e-6)


def test_the_pointer_network_fits_one_labelled_batch():
    """Gradient reaches the pointer network and the encoder: 60 AdamW steps on one labelled
    batch, as the training loop builds its optimizer over the model and the objective, cut
    the pointer loss by more than half (with query and key both detached it stays where it
    starts: tried), and the pointer network is among the parameters the optimizer gets."""
    from crossalign.objectives.objective_set import ObjectiveSet

    model, dwa, batch = tiny_dwa()
    module = ObjectiveSet(model, {"dwa": dwa})
    assert any(p is dwa.query.weight for p in module.parameters())
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        optimizer.zero_grad()
        loss, _, metrics = dwa.loss(batch, dwa(model, batch))
        loss.backward()
        optimizer.step()
        first = metrics["dwa_loss"].item() if first is None else first
    assert int((batch["pointer_labels"] != IGNORE_INDEX).sum()) > 0
    assert metrics["dwa_loss"].item() < 0.5 * first
