"""Back-translation with sharded parameters: two CPU processes (gloo) hold an FSDP-wrapped
encoder-decoder and translate batches whose length limits differ, so one process would stop
decoding first and leave the other waiting on a gather. Every process decodes until all are
done, and each gets the translation the unsharded model gives."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
import torch

from crossalign.config import ModelConfig
from crossalign.models.seq2seq import build_seq2seq, is_sharded
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext

dist = pytest.importorskip("torch.distributed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(rank: int):
    """The model, the objective and this rank's batch (rank 1's sentences are longer)."""
    ctx = TokenContext(
        pad_id=1, mask_id=4, cls_id=0, sep_id=2, special_ids=[0, 1, 2, 3, 4], vocab_size=50,
        languages=["en", "es"], position_offset=0, max_length=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = build_seq2seq(ModelConfig(arch="bert", preset="tiny"), 50, (0, 2, 1), ctx.languages, 32)
    bt = OBJECTIVES.get("bt")(ctx)
    sentences = [np.arange(5, 8 + 6 * rank), np.arange(9, 12)]
    batch = bt.collate(RawBatch("en", sentences=sentences), torch.Generator().manual_seed(0))
    return model.eval(), bt, batch


def translate_sharded(rank: int, port: int, results) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers.models.bert.modeling_bert import BertLayer

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        model, bt, batch = setup(rank)
        wrapped = FSDP(
            model,
            auto_wrap_policy=ModuleWrapPolicy({BertLayer}),
            use_orig_params=True,
            device_id=torch.device("cpu"),
        )
        assert is_sharded(wrapped.module)
        # as inside the training step's forward: the root unit's own parameters are gathered,
        # each transformer layer gathers its shards when it runs
        with FSDP.summon_full_params(wrapped, recurse=False):
            out = bt.translated_inputs(wrapped.module, batch)
        results[rank] = out["input_ids"].tolist()
    finally:
        dist.destroy_process_group()


def test_back_translation_under_fsdp_matches_the_unsharded_model():
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("needs torch.distributed with gloo")
    import torch.multiprocessing as mp

    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    context = mp.spawn(translate_sharded, args=(free_port(), results), nprocs=2, join=False)
    for _ in range(240):  # a deadlock fails the test instead of hanging the suite
        if context.join(timeout=1):
            break
    else:
        for process in context.processes:
            process.kill()
        pytest.fail("back-translation under FSDP did not finish in 240 s")
    for rank in (0, 1):
        model, bt, batch = setup(rank)
        assert not is_sharded(model)
        expected = bt.translated_inputs(model, batch)["input_ids"].tolist()
        assert results[rank] == expected
    assert len(results[0][0]) != len(results[1][0])  # the two processes decoded different lengths
