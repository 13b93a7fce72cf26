"""The cost of online back-translation against a plain sequence-to-sequence step, measured side
by side on one encoder-decoder and one batch of real sentences.

Steps timed (forward, backward and an AdamW update each): ``dae`` (denoising auto-encoding:
one encoder and one teacher-forced decoder pass, the plain seq2seq step), ``bt`` (greedy
translation of the batch into the other language, then the same passes on the translation)
and the translation alone. An untrained decoder rarely ends a sentence, so its translations
run to the length limit (1.3 |x| + 5 tokens for the batch's longest x). Medians of
``--repeats`` runs, alternating the order.

    .venv/bin/python bench/unmt_step.py --text data/unmt-en-de/train.en --tokenizer DIR
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from crossalign.config import ModelConfig
from crossalign.data.tokenizer import load_tokenizer
from crossalign.models.seq2seq import build_seq2seq
from crossalign.objectives import OBJECTIVES, RawBatch, TokenContext


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--text", required=True, help="sentences of the first language, one a line")
    p.add_argument("--tokenizer", required=True, help="a crossalign tokenizer directory")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    tok = load_tokenizer(a.tokenizer)
    overrides = {
        "num_hidden_layers": a.layers,
        "hidden_size": a.hidden,
        "intermediate_size": 4 * a.hidden,
        "num_attention_heads": max(1, a.hidden // 64),
    }
    cfg = ModelConfig(arch="bert", preset="small", hf_overrides=overrides)
    ids = (tok.cls_token_id, tok.sep_token_id, tok.pad_token_id)
    model = build_seq2seq(cfg, len(tok), ids, ["de", "en"], a.max_length).to(a.device).train()
    ctx = TokenContext.for_model(tok, model.get_encoder(), a.max_length)
    with open(a.text, encoding="utf-8") as f:
        lines = [x for x in f.read().splitlines() if x.strip()]
    sentences = [
        np.array(s) for s in tok(lines[: a.batch_size], add_special_tokens=False)["input_ids"]
    ]
    raw = RawBatch("en", sentences=sentences)
    dae = OBJECTIVES.get("dae")(ctx)
    bt = OBJECTIVES.get("bt")(ctx)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def batch_of(objective):
        b = objective.collate(raw, torch.Generator().manual_seed(0))
        return {k: v.to(a.device) for k, v in b.items()}

    def step(objective) -> float:
        b = batch_of(objective)
        start = time.perf_counter()
        loss, _, _ = objective.loss(b, objective(model, b))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def translate_only() -> float:
        b = batch_of(bt)
        start = time.perf_counter()
        bt.translated_inputs(model, b)
        return time.perf_counter() - start

    jobs = {"dae": lambda: step(dae), "bt": lambda: step(bt), "translate": translate_only}
    for job in jobs.values():
        job()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for r in range(a.repeats):
        for name in list(jobs) if r % 2 == 0 else list(reversed(jobs)):
            times[name].append(jobs[name]())
    med = {k: statistics.median(v) for k, v in times.items()}
    length = int(np.mean([len(s) for s in sentences]))
    print(f"{a.layers} x {a.hidden} encoder-decoder, {a.batch_size} sentences "
          f"(mean {length} tokens), {a.device}, {torch.get_num_threads()} threads")  # fmt: skip
    for name, t in med.items():
        print(f"  {name:10s} {1000 * t:8.1f} ms")
    print(f"bt / dae step: {med['bt'] / med['dae']:.2f}x "
          f"(translation {100 * med['translate'] / med['bt']:.0f}% of the bt step)")  # fmt: skip


if __name__ == "__main__":
    main()
