"""``csr_lookup`` (a batched binary search inside each CSR row) against ``torch.searchsorted``
over one sorted key per nonzero (``row · n_cols + col``), measured side by side.

A synthetic co-occurrence-like CSR matrix (default 50k × 50k, about 4M nonzeros; rows and
columns drawn from a Zipf-like law, so a few rows are long and most are short) and a batch of
lookups (default 4096 × 64 pairs, half of them stored entries, half random pairs, mostly
absent). Both implementations must give the same values and found flags; then each is timed
``--repeats`` times, alternating which goes first, and the median times and their ratio are
printed. ``searchsorted`` needs the key array (8 bytes per nonzero) kept beside the CSR
arrays; its build time is printed apart.

    .venv/bin/python bench/csr_lookup.py [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from crossalign.cooc.matrix import csr_lookup


def zipf_ids(rng: np.random.Generator, n: int, size: int, a: float) -> np.ndarray:
    """``size`` ids in [0, n) with P(k) ∝ (k + 1)^-a."""
    p = 1.0 / np.arange(1, n + 1) ** a
    return rng.choice(n, size=size, p=p / p.sum())


def random_csr(
    rng: np.random.Generator, n: int, nnz: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices, data) of an n × n matrix with about ``nnz`` distinct entries,
    columns sorted within each row."""
    keys = np.unique(zipf_ids(rng, n, nnz, 0.6) * n + zipf_ids(rng, n, nnz, 0.6))
    rows, cols = keys // n, keys % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, cols, rng.random(len(cols)).astype(np.float32)


def searchsorted_lookup(
    keys: torch.Tensor, data: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, n_cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same result as ``csr_lookup`` from ``keys`` (``row · n_cols + col`` per nonzero,
    ascending): one ``torch.searchsorted`` over all nonzeros."""
    query = rows * n_cols + cols
    at = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
    found = keys[at] == query
    return torch.where(found, data[at], torch.zeros((), dtype=data.dtype)), found


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=50_000, help="rows (= columns) of the matrix")
    p.add_argument("--nnz", type=int, default=5_000_000, help="pairs drawn (duplicates merge)")
    p.add_argument("--batch", default="4096x64", help="lookup batch shape")
    p.add_argument("--repeats", type=int, default=21)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    device = torch.device(args.device)
    indptr_np, indices_np, data_np = random_csr(rng, args.rows, args.nnz)
    indptr, indices, data = (
        torch.from_numpy(a).to(device) for a in (indptr_np, indices_np, data_np)
    )
    steps = int(np.diff(indptr_np).max()).bit_length()
    shape = tuple(int(s) for s in args.batch.split("x"))
    total = int(np.prod(shape))
    stored = rng.integers(0, len(indices_np), total // 2)
    stored_rows = np.searchsorted(indptr_np, stored, side="right") - 1
    rows_np = np.concatenate([stored_rows, zipf_ids(rng, args.rows, total - total // 2, 0.6)])
    cols_np = np.concatenate([indices_np[stored], rng.integers(0, args.rows, total - total // 2)])
    order = rng.permutation(total)
    rows = torch.from_numpy(rows_np[order].reshape(shape)).to(device)
    cols = torch.from_numpy(cols_np[order].reshape(shape)).to(device)

    start = time.perf_counter()
    row_of = torch.repeat_interleave(torch.arange(args.rows, device=device), indptr.diff())
    keys = row_of * args.rows + indices
    sync(device)
    key_seconds = time.perf_counter() - start

    want = csr_lookup(indptr, indices, data, rows, cols, steps)
    got = searchsorted_lookup(keys, data, rows, cols, args.rows)
    assert torch.equal(want[1], got[1]) and torch.equal(want[0], got[0]), "results differ"

    runs = {
        "csr_lookup": lambda: csr_lookup(indptr, indices, data, rows, cols, steps),
        "searchsorted": lambda: searchsorted_lookup(keys, data, rows, cols, args.rows),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.repeats + 1):
        for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            sync(device)
            start = time.perf_counter()
            runs[name]()
            sync(device)
            if r:  # the first round warms up
                times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(
        f"device {device} ({torch.get_num_threads()} threads), {args.rows} rows, "
        f"{len(indices_np)} nonzeros (longest row {int(np.diff(indptr_np).max())}, "
        f"{steps} binary-search steps), {total} lookups {shape}, "
        f"{float(want[1].float().mean()):.1%} found; results equal"
    )
    for name, t in med.items():
        print(f"  {name:13s} median {1000 * t:8.2f} ms  ({total / t / 1e6:.1f} M lookups/s)")
    print(f"  searchsorted / csr_lookup time ratio: {med['searchsorted'] / med['csr_lookup']:.2f}")
    print(f"  key array for searchsorted: {keys.numel() * 8 / 2**20:.0f} MiB, built in "
          f"{1000 * key_seconds:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
