"""The stored matrix: CSR lookup of many pairs against a dict, log/fp16 storage, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from crossalign.cooc.matrix import CoocMatrix, csr_lookup, write_matrix
from crossalign.errors import CrossalignError


def random_symmetric(vocab_size: int, n: int, seed: int = 0) -> dict[tuple[int, int], float]:
    rng = np.random.default_rng(seed)
    x = {}
    for a, b in rng.integers(0, vocab_size, (n, 2)).tolist():
        x[a, b] = x[b, a] = float(rng.integers(1, 1000)) / 7.0
    return x


def save(path, x: dict, vocab_size: int, log_fp16: bool = False) -> CoocMatrix:
    """Write the upper triangle of the symmetric dict ``x`` as a matrix directory."""
    upper = sorted((a, b, v) for (a, b), v in x.items() if a <= b)
    rows = np.array([a for a, _, _ in upper], dtype=np.int64)
    indptr = np.zeros(vocab_size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=vocab_size), out=indptr[1:])
    indices = np.array([b for _, b, _ in upper], dtype=np.int32)
    data = np.array([v for _, _, v in upper])
    write_matrix(path, indptr, indices, data, {"window": 2, "languages": {}}, log_fp16)
    return CoocMatrix(path)


def test_lookup_equals_dict(tmp_path):
    vocab = 300
    x = random_symmetric(vocab, 2000)
    m = save(tmp_path / "m", x, vocab)
    rng = np.random.default_rng(1)
    known = np.array(list(x))[rng.integers(0, len(x), 500)]
    pairs = np.concatenate([known, rng.integers(0, vocab, (500, 2))])  # hits and misses
    rows = torch.from_numpy(pairs[:, 0]).view(20, 50)
    cols = torch.from_numpy(pairs[:, 1]).view(20, 50)
    got = m.lookup(rows, cols)
    assert got.shape == (20, 50) and got.dtype == torch.float32
    expected = [x.get((a, b), 0.0) for a, b in pairs.tolist()]
    np.testing.assert_allclose(got.flatten().numpy(), expected, rtol=1e-6)
    log_x, found = m.log_lookup(rows, cols)
    assert found.flatten().tolist() == [(a, b) in x for a, b in pairs.tolist()]
    np.testing.assert_allclose(
        log_x[found].numpy(), np.log([x[a, b] for a, b in pairs.tolist() if (a, b) in x]), 1e-6
    )


def test_long_rows_and_row_edges(tmp_path):
    # row 0 co-occurs with every id (the longest row sets the number of search steps);
    # the last id's row and empty rows sit at the array edges
    vocab = 1030
    x = {}
    for j in range(vocab):
        x[0, j] = x[j, 0] = float(j + 1)
    x[vocab - 1, vocab - 1] = 5.0
    m = save(tmp_path / "m", x, vocab)
    assert m.steps == (vocab).bit_length()
    ids = torch.arange(vocab)
    np.testing.assert_allclose(m.lookup(torch.zeros_like(ids), ids).numpy(), np.arange(vocab) + 1.0)
    np.testing.assert_allclose(m.lookup(ids, torch.zeros_like(ids)).numpy(), np.arange(vocab) + 1.0)
    assert m.lookup(torch.tensor([vocab - 1]), torch.tensor([vocab - 1])).item() == 5.0
    assert m.lookup(torch.tensor([5, vocab - 1]), torch.tensor([6, 7])).tolist() == [0.0, 0.0]


def test_log_fp16_storage(tmp_path):
    vocab = 100
    x = random_symmetric(vocab, 300, seed=3)
    m = save(tmp_path / "m", x, vocab, log_fp16=True)
    assert m.logged and m.data.dtype == np.float16
    pairs = np.array(list(x))
    got = m.lookup(pairs[:, 0], pairs[:, 1]).numpy()
    np.testing.assert_allclose(got, [x[a, b] for a, b in pairs.tolist()], rtol=6e-3)
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["values"] == "log" and meta["dtype"] == "float16"


def test_empty_matrix_and_errors(tmp_path):
    m = save(tmp_path / "empty", {}, 10)
    assert m.lookup(torch.tensor([1, 2]), torch.tensor([3, 2])).tolist() == [0.0, 0.0]
    with pytest.raises(CrossalignError, match="out of range"):
        m.lookup(torch.tensor([10]), torch.tensor([0]))
    with pytest.raises(CrossalignError, match="not a co-occurrence matrix"):
        CoocMatrix(tmp_path / "nowhere")
    (tmp_path / "empty" / "indices.npy").unlink()
    with pytest.raises(CrossalignError, match="indices.npy is missing"):
        CoocMatrix(tmp_path / "empty")


def test_csr_lookup_plain_tensors():
    # rows: 0 -> {1: 1.0, 3: 2.0}, 1 -> {}, 2 -> {2: 3.0}
    indptr = torch.tensor([0, 2, 2, 3])
    indices = torch.tensor([1, 3, 2], dtype=torch.int32)
    data = torch.tensor([1.0, 2.0, 3.0])
    rows = torch.tensor([0, 0, 0, 1, 2, 2])
    cols = torch.tensor([1, 3, 2, 1, 2, 0])
    values, found = csr_lookup(indptr, indices, data, rows, cols, steps=2)
    assert values.tolist() == [1.0, 2.0, 0.0, 0.0, 3.0, 0.0]
    assert found.tolist() == [True, True, False, False, True, False]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_lookup_on_gpu_equals_cpu(tmp_path):
    vocab = 500
    x = random_symmetric(vocab, 5000, seed=5)
    m = save(tmp_path / "m", x, vocab)
    rng = np.random.default_rng(2)
    rows, cols = (torch.from_numpy(rng.integers(0, vocab, 4000)) for _ in range(2))
    cpu = m.log_lookup(rows, cols)
    gpu = m.log_lookup(rows.cuda(), cols.cuda())
    assert gpu[0].device.type == "cuda"
    torch.testing.assert_close(gpu[0].cpu(), cpu[0])
    assert torch.equal(gpu[1].cpu(), cpu[1])
