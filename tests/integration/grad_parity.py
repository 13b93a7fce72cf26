"""One optimizer step's gradients on a fixed global batch, split into micro-batches and
processes: the same model, objectives (MLM + TLM) and masked batch every time.

Run under ``torch.distributed.run`` it is the 2-process side of the parity test:
``python -m torch.distributed.run --nproc_per_node 2 grad_parity.py OUT MIX GRAD_ACCUM``
writes the number of processes and rank 0's gradients (DDP-averaged) to OUT.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from accelerate import Accelerator
from transformers import BertConfig, BertForMaskedLM

from crossalign.objectives import RawBatch, TokenContext
from crossalign.objectives.mlm import MaskedLM, add_masked_index
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.objectives.tlm import TranslationLM
from crossalign.training.step import accumulate_gradients

WEIGHTS = {"mlm": 1.0, "tlm": 0.5}
ROWS = 8


def build() -> tuple[ObjectiveSet, dict[str, dict[str, torch.Tensor]]]:
    """A tiny BERT (no dropout) with MLM and TLM, and one collated global batch per objective
    whose rows have very different numbers of masked tokens."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=40, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=["en", "es"], position_offset=0, max_length=32,
    )  # fmt: skip
    objectives = {"mlm": MaskedLM(ctx, mask_prob=0.3), "tlm": TranslationLM(ctx, mask_prob=0.3)}
    module = ObjectiveSet(BertForMaskedLM(config), objectives)
    rng = np.random.default_rng(0)
    blocks = np.full((ROWS, 16), 1)
    for r, length in enumerate([16, 2, 3, 16, 5, 16, 2, 9]):  # padding: few tokens in some rows
        blocks[r, :length] = rng.integers(5, 50, size=length)
    pairs = [
        (rng.integers(5, 50, size=int(a)), rng.integers(5, 50, size=int(b)))
        for a, b in [(12, 11), (1, 2), (2, 1), (13, 12), (3, 4), (1, 1), (10, 14), (2, 2)]
    ]
    gen = torch.Generator().manual_seed(1)
    full = {
        "mlm": objectives["mlm"].collate(RawBatch("en", blocks=blocks), gen),
        "tlm": objectives["tlm"].collate(RawBatch("en-es", pairs=pairs), gen),
    }
    return module, full


def split(full: dict[str, dict[str, torch.Tensor]], parts: int) -> list[dict]:
    """The global batch as ``parts`` micro-batches of consecutive rows (the same masks)."""
    size = ROWS // parts
    out = []
    for p in range(parts):
        micro = {}
        for name, batch in full.items():
            rows = {k: v[p * size : (p + 1) * size] for k, v in batch.items() if v.dim() == 2}
            micro[name] = add_masked_index(rows)
        out.append(micro)
    return out


def gradients(
    accelerator: Accelerator, module, micro: list[dict], mix: str
) -> dict[str, torch.Tensor]:
    """Parameter gradients after ``accumulate_gradients`` on ``micro``."""
    module.zero_grad(set_to_none=True)
    inner = accelerator.unwrap_model(module)
    accumulate_gradients(accelerator, module, micro, dict(inner.objectives), WEIGHTS, mix)
    return {n: p.grad.detach().clone() for n, p in inner.named_parameters() if p.grad is not None}


def main(out: str, mix: str, grad_accum: int) -> None:
    accelerator = Accelerator(cpu=True)
    module, full = build()
    module = accelerator.prepare(module)
    world, rank = accelerator.num_processes, accelerator.process_index
    parts = split(full, world * grad_accum)
    grads = gradients(accelerator, module, parts[rank * grad_accum : (rank + 1) * grad_accum], mix)
    if accelerator.is_main_process:
        torch.save({"processes": world, "grads": grads}, out)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
