"""Do translated phrases co-occur as often as their source? (Ai & Fang 2023, Figure 1)

Two-word phrases are adjacent word pairs of language a's text (both words alphabetic, each
one token of the matrix's tokenizer). A phrase (a1, a2) is translated through a bilingual
dictionary: among b1 ∈ D(a1), b2 ∈ D(a2), the pair most often adjacent (in either order) in
language b's text. For each translated phrase we take |log X_a − log X_b|, with X_a =
X[a1, a2] and X_b = X[b1, b2] on one scale (the language normalisation of the build,
``normalised_counts``), and the same difference against a random adjacent pair of language
b. Statistics are given per bin of X_a (decades), with 95% Student-t confidence intervals of
the mean (``crossalign.stats.t_interval``; a bin of one phrase has none).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crossalign.cooc.matrix import CoocMatrix
from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput
from crossalign.fileio import atomic_path, write_json_atomic
from crossalign.stats import t_interval

if TYPE_CHECKING:
    from crossalign.evals.options import CoocCompareOptions

_WORD = re.compile(r"[^\W\d_]+")


def adjacent_words(lines: Iterable[str]) -> tuple[Counter, Counter]:
    """(adjacent word pairs, word counts) of whitespace-split lines; a pair is two neighbouring
    whitespace tokens that are both made of letters only (punctuation breaks a phrase)."""
    pairs: Counter = Counter()
    words: Counter = Counter()
    for line in lines:
        tokens = line.split()
        letters = [bool(_WORD.fullmatch(t)) for t in tokens]
        words.update(t for t, ok in zip(tokens, letters) if ok)
        pairs.update(
            (tokens[i], tokens[i + 1])
            for i in range(len(tokens) - 1)
            if letters[i] and letters[i + 1]
        )
    return pairs, words


def single_token_ids(words: Iterable[str], tokenizer: Any) -> dict[str, int]:
    """word → token id for words the tokenizer encodes as exactly one token (as a
    line-initial word; the same token as after a space for ▁-style tokenizers)."""
    words = sorted(set(words))
    if not words:
        return {}
    ids = tokenizer(words, add_special_tokens=False)["input_ids"]
    return {w: s[0] for w, s in zip(words, ids) if len(s) == 1}


def surface_forms(words: Counter) -> dict[str, str]:
    """lowercase word → its most frequent spelling in the text (German nouns keep their
    capital; dictionaries are lowercase)."""
    best: dict[str, tuple[int, str]] = {}
    for w, n in words.items():
        key = w.lower()
        if key not in best or (n, w) > best[key]:
            best[key] = (n, w)
    return {k: w for k, (_, w) in best.items()}


def translate_phrases(
    pairs_a: Counter,
    pairs_b: Counter,
    words_b: Counter,
    dictionary: list[tuple[str, str]],
    ids_a: dict[str, int],
    ids_b: dict[str, int],
    min_count: int = 1,
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Phrases of a (seen at least ``min_count`` times) whose dictionary translation is an
    adjacent pair of b: (phrase a, phrase b), b's words in their usual spelling and in the
    order b's text has them most often."""
    table: dict[str, set[str]] = {}
    for src, tgt in dictionary:
        table.setdefault(src.lower(), set()).add(tgt.lower())
    spelling = surface_forms(words_b)
    out = []
    for (a1, a2), n in sorted(pairs_a.items()):
        if n < min_count or a1 not in ids_a or a2 not in ids_a:
            continue
        best = None
        for t1 in table.get(a1.lower(), ()):
            for t2 in table.get(a2.lower(), ()):
                b1, b2 = spelling.get(t1), spelling.get(t2)
                if b1 is None or b2 is None or b1 not in ids_b or b2 not in ids_b:
                    continue
                ahead, behind = pairs_b.get((b1, b2), 0), pairs_b.get((b2, b1), 0)
                if behind > ahead:  # keep the word order of b's text (X is symmetric)
                    b1, b2 = b2, b1
                seen = ahead + behind
                if seen and (best is None or (seen, b1, b2) > best):
                    best = (seen, b1, b2)
        if best is not None:
            out.append(((a1, a2), (best[1], best[2])))
    return out


def normalised_counts(
    matrix: CoocMatrix, lang: str, ref_matrix: CoocMatrix, ref_lang: str
) -> float:
    """Factor turning ``matrix``'s counts of ``lang`` into raw counts rescaled to the token
    count of ``ref_lang`` in ``ref_matrix``: (1 / scale_lang) · C_ref / C_lang. For one
    multilingual matrix this equals c_lang / c_ref, a factor common to both languages."""
    for m, code in ((matrix, lang), (ref_matrix, ref_lang)):
        if code not in m.meta["languages"]:
            raise CrossalignError(
                f"co-occurrence matrix {m.path} has no language '{code}'; it has "
                f"{', '.join(m.meta['languages'])}"
            )
    info = matrix.meta["languages"][lang]
    c_ref = ref_matrix.meta["languages"][ref_lang]["tokens"]
    return c_ref / info["tokens"] / info["scale"]


def mean_and_interval(values: np.ndarray) -> dict[str, Any]:
    """``{"mean", "ci95": [lower, upper]}`` of ``values`` (at least one), the interval the 95%
    Student-t interval of the mean (``t_interval``); ``ci95`` is None for a single value."""
    mean, half = t_interval(values.tolist())
    return {"mean": mean, "ci95": None if half is None else [mean - half, mean + half]}


def binned_statistics(
    x_a: np.ndarray, diff: np.ndarray, diff_random: np.ndarray
) -> list[dict[str, Any]]:
    """Per decade of X_a ([10^k, 10^(k+1)), all X_a > 0): n, and mean with 95% CI of
    |log X_a − log X_b| for translations and for random pairs."""
    decade = np.floor(np.log10(x_a)).astype(int)
    rows = []
    for k in range(int(decade.min()), int(decade.max()) + 1) if len(x_a) else []:
        sel = decade == k
        if not sel.any():
            continue
        rows.append(
            {
                "bin": [10.0**k, 10.0 ** (k + 1)],
                "n": int(sel.sum()),
                "translated": mean_and_interval(diff[sel]),
                "random": mean_and_interval(diff_random[sel]),
            }
        )
    return rows


def compare_phrases(
    matrix_a: CoocMatrix,
    matrix_b: CoocMatrix,
    lang_a: str,
    lang_b: str,
    lines_a: list[str],
    lines_b: list[str],
    dictionary: list[tuple[str, str]],
    tokenizer: Any,
    min_count: int = 1,
    seed: int = 0,
) -> dict[str, Any]:
    """The Figure 1 statistics: phrases, their normalised counts, and per-bin |Δ log X| for
    translations and random pairs (see the module docstring)."""
    pairs_a, words_a = adjacent_words(lines_a)
    pairs_b, words_b = adjacent_words(lines_b)
    ids_a = single_token_ids(words_a, tokenizer)
    ids_b = single_token_ids(words_b, tokenizer)
    phrases = translate_phrases(pairs_a, pairs_b, words_b, dictionary, ids_a, ids_b, min_count)
    scale_a = normalised_counts(matrix_a, lang_a, matrix_a, lang_a)
    scale_b = normalised_counts(matrix_b, lang_b, matrix_a, lang_a)

    def counts(m: CoocMatrix, ids: dict[str, int], pairs: list, scale: float) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        rows = np.array([ids[p[0]] for p in pairs])
        cols = np.array([ids[p[1]] for p in pairs])
        return m.lookup(rows, cols).double().numpy() * scale

    x_a = counts(matrix_a, ids_a, [a for a, _ in phrases], scale_a)
    x_b = counts(matrix_b, ids_b, [b for _, b in phrases], scale_b)
    keep = (x_a > 0) & (x_b > 0)
    phrases = [p for p, k in zip(phrases, keep) if k]
    x_a, x_b = x_a[keep], x_b[keep]
    pool = sorted(p for p in pairs_b if p[0] in ids_b and p[1] in ids_b)
    x_pool = counts(matrix_b, ids_b, pool, scale_b)
    pool_ok = np.flatnonzero(x_pool > 0)
    if len(phrases) == 0 or len(pool_ok) == 0:
        raise CrossalignError(
            f"no translated {lang_a}-{lang_b} phrase with counts in both languages: check the "
            f"dictionary direction ({lang_a} {lang_b}), the texts and the matrix's languages"
        )
    rng = np.random.default_rng(seed)
    x_random = x_pool[rng.choice(pool_ok, size=len(x_a))]
    diff = np.abs(np.log(x_a) - np.log(x_b))
    diff_random = np.abs(np.log(x_a) - np.log(x_random))
    order = np.argsort(-x_a, kind="stable")
    return {
        "languages": [lang_a, lang_b],
        "phrases": len(phrases),
        "dropped_zero_counts": int((~keep).sum()),
        "random_pool": int(len(pool_ok)),
        "overall": {
            "translated": mean_and_interval(diff),
            "random": mean_and_interval(diff_random),
        },
        "bins": binned_statistics(x_a, diff, diff_random),
        "examples": [
            {
                "a": " ".join(phrases[i][0]),
                "b": " ".join(phrases[i][1]),
                "x_a": x_a[i],
                "x_b": x_b[i],
            }
            for i in order[:20]
        ],
    }


def compare_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The statistics of ``compare_phrases`` as flat metrics: overall ``n`` (the phrases),
    ``translated`` and ``random`` (mean |Δ log X|) with their 95% half-widths
    (``translated_ci95``, ``random_ci95``), and the same per decade ``bin<k>/...`` (X_a in
    [10^k, 10^(k+1)))."""

    def row(n: int, stats: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {"n": n}
        for key in ("translated", "random"):
            mean, ci = stats[key]["mean"], stats[key]["ci95"]
            out[key], out[f"{key}_ci95"] = mean, math.nan if ci is None else (ci[1] - ci[0]) / 2
        return out

    metrics = row(result["phrases"], result["overall"])
    for b in result["bins"]:
        k = round(math.log10(b["bin"][0]))
        metrics.update({f"bin{k}/{name}": v for name, v in row(b["n"], b).items()})
    return metrics


def plot(result: dict[str, Any], path: str | os.PathLike) -> None:
    """Mean |Δ log X| per X_a bin with 95% CIs, translations vs random pairs (PNG)."""
    from crossalign.extras import require

    matplotlib = require("matplotlib", "plots", "the cooc-compare figure")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lang_a, lang_b = result["languages"]
    bins = result["bins"]
    x = np.arange(len(bins))
    fig, ax = plt.subplots(figsize=(7, 4))
    for offset, key, label in (
        (-0.1, "translated", "translated phrase"),
        (0.1, "random", "random pair"),
    ):
        means = np.array([b[key]["mean"] for b in bins])
        lo = np.array([b[key]["ci95"][0] if b[key]["ci95"] else np.nan for b in bins])
        hi = np.array([b[key]["ci95"][1] if b[key]["ci95"] else np.nan for b in bins])
        ax.errorbar(
            x + offset, means, yerr=[means - lo, hi - means], fmt="o-", capsize=3, label=label
        )
    ax.set_xticks(x, [f"[{b['bin'][0]:g}, {b['bin'][1]:g})\nn={b['n']}" for b in bins], fontsize=8)
    ax.set_xlabel(f"X_{lang_a} of the {lang_a} phrase (normalised count)")
    ax.set_ylabel(f"|log X_{lang_a} − log X_{lang_b}|")
    ax.set_title(f"Co-occurrence of {lang_a} phrases and their {lang_b} translations (95% CI)")
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def write_report(result: dict[str, Any], out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """``compare.json`` and ``compare.png`` in ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "compare.json", result)
    plot(result, out_dir / "compare.png")
    return out_dir / "compare.json", out_dir / "compare.png"


def evaluate_compare(model_dir: None, opts: CoocCompareOptions) -> EvalOutput:
    """``eval cooc-compare``: ``compare_phrases`` on the options' matrices, text and
    dictionary; writes ``compare.json`` and ``compare.png`` to ``opts.out``."""
    from crossalign.data.readers import read_dictionary, read_mono
    from crossalign.data.tokenizer import load_tokenizer

    lang_a, lang_b = opts.languages()
    matrix_a = CoocMatrix(opts.matrix)
    matrix_b = CoocMatrix(opts.matrix_b) if opts.matrix_b else matrix_a
    if opts.corpus:
        from crossalign.data.corpora.files import resolve_corpus

        mono = resolve_corpus(opts.corpus, [lang_a, lang_b])["mono"]
        files_a, files_b = mono[lang_a], mono[lang_b]
    else:
        files_a, files_b = opts.text_a, opts.text_b
    if not files_a or not files_b:
        raise CrossalignError("give --corpus DIR, or --text-a FILE and --text-b FILE")
    name = opts.tokenizer or matrix_a.meta["tokenizer"]["path"]
    tokenizer = load_tokenizer(name)
    for m in {matrix_a.path: matrix_a, matrix_b.path: matrix_b}.values():
        m.check_tokenizer(tokenizer, name, "pass the matrices' tokenizer with --tokenizer")
    result = compare_phrases(
        matrix_a,
        matrix_b,
        lang_a,
        lang_b,
        read_mono(list(files_a)),
        read_mono(list(files_b)),
        read_dictionary(opts.dict),
        tokenizer,
        min_count=opts.min_count,
        seed=opts.seed,
    )
    result["matrices"] = [str(matrix_a.path), str(matrix_b.path)]
    result["dictionary"] = str(opts.dict)
    result["texts"] = {lang_a: [str(f) for f in files_a], lang_b: [str(f) for f in files_b]}
    json_path, png_path = write_report(result, opts.out)
    notes = [
        f"{lang_a} phrases and their {lang_b} translations: |log X_{lang_a} - log X_{lang_b}| "
        f"against random {lang_b} pairs, ± the 95% half-width; bin k: X_{lang_a} in "
        f"[10^k, 10^(k+1)); wrote {json_path} and {png_path}"
    ]
    return EvalOutput(
        metrics=compare_metrics(result),
        notes=notes,
        legacy=result,
        files={"report": str(json_path), "plot": str(png_path)},
    )
