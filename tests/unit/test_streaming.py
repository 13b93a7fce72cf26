"""Streamed datasets: the blocks equal the store's packed blocks of the same text, and a reader
restarted from its saved state reads on exactly where it stopped (also across epochs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from crossalign.config import TokenizerConfig
from crossalign.data.inputs import TextInput
from crossalign.data.store.reading import PackedBlocks, open_store
from crossalign.data.store.streaming import StreamingText
from crossalign.data.store.token_store import Source, build_store
from crossalign.data.tokenizer import train_tokenizer
from crossalign.errors import CrossalignError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
LINES = (FIXTURES / "en.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer({"en": LINES}, TokenizerConfig(vocab_size=120), seed=0)


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "en.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for line in LINES:
            f.write(json.dumps({"text": line}) + "\n")
        f.write(json.dumps({"text": "   "}) + "\n")  # blank rows are skipped
    return path


def test_stream_blocks_equal_store_blocks(tok, jsonl, tmp_path):
    length = 12
    sources = [Source("mono", "en", [TextInput(path=str(FIXTURES / "en.txt"))])]
    build_store(sources, tok, tmp_path / "store", "k", progress=False)
    packed = PackedBlocks(open_store(tmp_path / "store").mono["en"], length, tok.cls_token_id,
                          tok.sep_token_id, tok.pad_token_id)  # fmt: skip
    full = packed.text.total // (length - 2)
    spec = {"dataset": str(jsonl), "streaming": True, "size": len(LINES)}
    stream = StreamingText(spec, "data.mono.en", tok, length)
    got = stream.reader().take(full)
    assert np.array_equal(got, packed[np.arange(full)])
    assert abs(len(stream) - len(packed)) <= 1  # size converted to blocks


def test_reader_resumes_from_its_state_across_epochs(tok, jsonl):
    spec = {"dataset": str(jsonl), "streaming": True, "size": len(LINES)}
    stream = StreamingText(spec, "data.mono.en", tok, 10)
    reader = stream.reader()
    one_epoch = stream.blocks
    reader.take(3)
    states, rest = [], []
    for _ in range(one_epoch):  # crosses the end of the dataset at least once
        states.append(reader.state)
        rest.append(reader.take(2))
    assert states[-1][0] >= 1  # a later epoch
    for state, blocks in zip(states, rest):
        assert np.array_equal(stream.reader(state).take(2), blocks)


def test_stream_needs_a_size(tok, jsonl):
    with pytest.raises(CrossalignError, match="give size: N"):
        StreamingText({"dataset": str(jsonl), "streaming": True}, "data.mono.en", tok, 10)
    with pytest.raises(CrossalignError, match="unknown: colum"):
        StreamingText({"dataset": str(jsonl), "streaming": True, "size": 3, "colum": "x"},
                      "data.mono.en", tok, 10)  # fmt: skip
