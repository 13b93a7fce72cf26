import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, RobertaConfig, RobertaForMaskedLM

from crossalign.data.masking import IGNORE_INDEX
from crossalign.data.pair_layout import truncate_pair
from crossalign.models.load import position_offset
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.mlm import add_masked_index


def context(offset=0, languages=("en", "es")):
    return TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=list(languages), position_offset=offset, max_length=16,
    )  # fmt: skip


def test_registry_lists_mlm_and_tlm():
    assert {"mlm", "tlm"} <= set(OBJECTIVES.names())


def test_truncate_pair_trims_longer_side():
    assert truncate_pair(10, 3, 8) == (5, 3)
    assert truncate_pair(4, 4, 6) == (3, 3)
    assert truncate_pair(2, 3, 10) == (2, 3)


def test_tlm_collate_layout():
    tlm = OBJECTIVES.get("tlm")(context(), mask_prob=0.0)
    raw = RawBatch(
        "en-es",
        pairs=[(np.array([10, 11, 12]), np.array([20, 21])), (np.array([13]), np.array([22]))],
    )
    b = tlm.collate(raw, torch.Generator().manual_seed(0))
    assert b["input_ids"][0].tolist() == [0, 10, 11, 12, 2, 0, 20, 21, 2]
    assert b["input_ids"][1].tolist() == [0, 13, 2, 0, 22, 2, 1, 1, 1]
    assert b["position_ids"][0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]
    assert b["segment_ids"][1].tolist() == [0, 0, 0, 1, 1, 1, -1, -1, -1]
    assert b["attention_mask"][1].tolist() == [1] * 6 + [0] * 3
    assert b["token_type_ids"][0].tolist() == [0] * 5 + [1] * 4
    assert (b["labels"] == IGNORE_INDEX).all()


def test_tlm_collate_truncates_to_max_length():
    tlm = OBJECTIVES.get("tlm")(context())
    raw = RawBatch("en-es", pairs=[(np.arange(5, 30), np.arange(5, 9))])
    b = tlm.collate(raw, torch.Generator().manual_seed(0))
    assert b["input_ids"].shape == (1, 16)


def test_tlm_never_masks_specials_or_padding():
    tlm = OBJECTIVES.get("tlm")(context(), mask_prob=1.0)
    raw = RawBatch(
        "en-es", pairs=[(np.array([10, 11]), np.array([20])), (np.array([13]), np.array([22]))]
    )
    b = tlm.collate(raw, torch.Generator().manual_seed(0))
    selected = b["labels"] != IGNORE_INDEX
    original = torch.where(selected, b["labels"], b["input_ids"])
    assert torch.equal(selected, ~torch.isin(original, torch.tensor([0, 1, 2, 3, 4])))
    assert selected.sum() == 5


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_mlm_loss_equals_hf_loss(arch):
    torch.manual_seed(0)
    if arch == "bert":
        model = BertForMaskedLM(
            BertConfig(
                vocab_size=50,
                hidden_size=16,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=32,
                pad_token_id=1,
            )
        )
    else:
        model = RobertaForMaskedLM(
            RobertaConfig(
                vocab_size=50,
                hidden_size=16,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=32,
                pad_token_id=1,
                max_position_embeddings=40,
            )
        )
    model.eval()
    mlm = OBJECTIVES.get("mlm")(context(position_offset(model), languages=()))
    blocks = np.array([[0, 10, 11, 12, 13, 2], [0, 14, 15, 2, 1, 1]], dtype=np.int32)
    batch = mlm.collate(RawBatch("en", blocks=blocks), torch.Generator().manual_seed(5))
    batch["labels"][0, 2] = 11  # at least one prediction
    add_masked_index(batch)  # collate derives the predicted positions from the labels
    loss, n, _ = mlm.loss(batch, mlm(model, batch))
    # Oracle: the model's own full-vocabulary loss with default position ids.
    ref = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
    ).loss
    assert n == (batch["labels"] != IGNORE_INDEX).sum()
    assert torch.allclose(loss, ref, atol=1e-6)
