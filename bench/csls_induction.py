"""Time of CSLS dictionary induction (K = 10, top-1) between two 50k-token vocabularies, and
the chunked implementation against a naive full-matrix one on a smaller size, side by side.

The vectors are rows of a model's input embedding table (two disjoint id ranges), so the
numbers match induction from the imported backbone. The naive version materialises the full
n × m cosine matrix (10 GB of float32 at 50k × 50k, which is why it runs on a smaller size).

    .venv/bin/python bench/csls_induction.py --model runs/backbone-e5-small --size 50000 \
        --naive-size 8000
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import torch

from crossalign.lexicon.csls import csls_topk, unit
from crossalign.lexicon.embed import load_masked_lm


def naive_csls_top1(src: torch.Tensor, tgt: torch.Tensor, k: int) -> torch.Tensor:
    """Full-matrix CSLS: the whole [n, m] matrix, its row and column top-k, then argmax."""
    cos = unit(src) @ unit(tgt).T
    r_src = cos.topk(k, dim=1).values.mean(dim=1)
    r_tgt = cos.topk(k, dim=0).values.mean(dim=0)
    return (2 * cos - r_src[:, None] - r_tgt[None, :]).argmax(dim=1)


def timed(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/backbone-e5-small")
    parser.add_argument("--size", type=int, default=50_000, help="tokens per vocabulary")
    parser.add_argument("--naive-size", type=int, default=8000, help="size of the ratio run")
    parser.add_argument("--chunk", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=2, help="best of N")
    args = parser.parse_args()
    model, _ = load_masked_lm(args.model)
    table = model.get_input_embeddings().weight.detach()
    start = 1000  # skip specials and the most frequent pieces
    src = table[start : start + args.size]
    tgt = table[start + args.size : start + 2 * args.size]
    threads = torch.get_num_threads()
    print(f"{args.size} x {args.size} tokens, dim {table.shape[1]}, {threads} threads")
    backends = ["torch"] + (["faiss"] if importlib.util.find_spec("faiss") else [])
    for backend in backends:
        seconds, _ = timed(
            lambda b=backend: csls_topk(src, tgt, 10, 1, chunk=args.chunk, backend=b),
            args.repeats,
        )
        print(f"chunked CSLS induction, {backend:<5} backend: {seconds:.2f} s at {args.size}")
    n = args.naive_size
    s, t = src[:n], tgt[:n]
    naive_s, naive_idx = timed(lambda: naive_csls_top1(s, t, 10), args.repeats)
    chunk_s, (_, idx) = timed(lambda: csls_topk(s, t, 10, 1, chunk=args.chunk), args.repeats)
    agree = float((idx[:, 0] == naive_idx).float().mean())
    print(
        f"at {n} x {n}: naive full matrix {naive_s:.2f} s ({n * n * 4 / 2**20:.0f} MiB matrix), "
        f"chunked {chunk_s:.2f} s, naive / chunked = {naive_s / chunk_s:.2f}, same translation "
        f"for {100 * agree:.2f}% of tokens"
    )
    full_gib = args.size**2 * 4 / 2**30
    block_mib = args.chunk * args.size * 4 / 2**20
    print(f"full matrix at {args.size}: {full_gib:.1f} GiB; chunked: {block_mib:.0f} MiB per block")


if __name__ == "__main__":
    main()
