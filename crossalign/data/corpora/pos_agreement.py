"""How far two languages' silver POS taggers agree: UPOS agreement of aligned words in
translated LibreOffice help paragraphs.

Gold tags of the help pages do not exist, so the silver labels' quality is measured indirectly:
the English and the other language's paragraphs of the same page and paragraph id
(``crossalign.data.corpora.libreoffice.libreoffice_pairs``) are tagged by the two spaCy pipelines
of ``crossalign.data.corpora.pos_silver`` (the same tags the silver sentences carry), their words
are aligned without a dictionary or a model, and the share of aligned word pairs with the same
Universal POS tag is reported. Translation changes parts of speech too (a French ``de`` for an
English possessive, a noun for a gerund), so the figure is a lower bound on how well the labels
transfer, not a tagger accuracy.

The aligner is competitive linking (Melamed 2000) on the Dice coefficient of lower-cased word
types co-occurring in a paragraph pair: Dice(e, f) = 2·c(e, f) / (c(e) + c(f)) with c counting
paragraph pairs; in each pair the highest-scoring free word pair is linked first (ties: identical
words, then nearer the diagonal), each word at most once, down to ``min_dice``.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

from crossalign.data.corpora.libreoffice import HELP_ROOT, libreoffice_pairs

Tokens = list[tuple[list[str], list[str]]]
"""Per paragraph: (words, UPOS tags)."""

TRIVIAL_TAGS = ("PUNCT", "SYM", "NUM", "X")
"""Tags left out of ``content_agreement``: punctuation, symbols and numbers agree trivially."""


def dice_scores(pairs: list[tuple[list[str], list[str]]], min_count: int = 2):
    """``{(e, f): Dice}`` of lower-cased word types over paragraph pairs ``pairs`` (each a pair
    of word lists): 2·c(e, f) / (c(e) + c(f)), counting the pairs a type (or both) occurs in;
    types seen in fewer than ``min_count`` pairs are left out."""
    c_e: Counter = Counter()
    c_f: Counter = Counter()
    c_ef: Counter = Counter()
    for src, tgt in pairs:
        es = {w.lower() for w in src}
        fs = {w.lower() for w in tgt}
        c_e.update(es)
        c_f.update(fs)
        c_ef.update((e, f) for e in es for f in fs)
    return {
        (e, f): 2 * n / (c_e[e] + c_f[f])
        for (e, f), n in c_ef.items()
        if c_e[e] >= min_count and c_f[f] >= min_count
    }


def competitive_links(
    src: list[str], tgt: list[str], dice: dict[tuple[str, str], float], min_dice: float = 0.3
) -> list[tuple[int, int]]:
    """Competitive linking of one pair: the (i, j) word pairs, highest Dice first, each word
    linked at most once, Dice ≥ ``min_dice``; ties go to identical words, then to the pair
    nearer the diagonal (relative positions), then by position. Sorted (Pharaoh order)."""
    scored = [
        (-dice.get((e.lower(), f.lower()), 0.0), e != f,
         abs(i / len(src) - j / len(tgt)), i, j)
        for i, e in enumerate(src)
        for j, f in enumerate(tgt)
    ]  # fmt: skip
    scored.sort()
    used_src: set[int] = set()
    used_tgt: set[int] = set()
    links = []
    for neg, _, _, i, j in scored:
        if -neg < min_dice:
            break
        if i in used_src or j in used_tgt:
            continue
        used_src.add(i)
        used_tgt.add(j)
        links.append((i, j))
    return sorted(links)


def tag_agreement(
    src: Tokens, tgt: Tokens, min_dice: float = 0.3, min_count: int = 2
) -> dict[str, Any]:
    """UPOS agreement of the competitive links of tagged paragraph pairs (``src[k]`` and
    ``tgt[k]`` translations of each other): ``agreement`` over all linked words,
    ``content_agreement`` leaving out links whose source tag is in ``TRIVIAL_TAGS``,
    the agreement per source tag, and the most frequent disagreements."""
    dice = dice_scores([(s[0], t[0]) for s, t in zip(src, tgt)], min_count)
    same: Counter = Counter()
    total: Counter = Counter()
    confusions: Counter = Counter()
    for (s_words, s_tags), (t_words, t_tags) in zip(src, tgt):
        for i, j in competitive_links(s_words, t_words, dice, min_dice):
            total[s_tags[i]] += 1
            if s_tags[i] == t_tags[j]:
                same[s_tags[i]] += 1
            else:
                confusions[f"{s_tags[i]}->{t_tags[j]}"] += 1
    links = sum(total.values())
    content = [t for t in total if t not in TRIVIAL_TAGS]
    n_content = sum(total[t] for t in content)

    def share(num: int, den: int) -> float:
        return 100.0 * num / den if den else 0.0

    return {
        "pairs": len(src),
        "links": links,
        "agreement": share(sum(same.values()), links),
        "content_links": n_content,
        "content_agreement": share(sum(same[t] for t in content), n_content),
        "per_tag": {
            tag: {"links": n, "agreement": share(same[tag], n)} for tag, n in total.most_common()
        },
        "top_disagreements": dict(confusions.most_common(10)),
        "aligner": f"competitive linking on paragraph-pair Dice ≥ {min_dice} (types in ≥ "
        f"{min_count} pairs)",
    }


def tag_texts(texts: list[str], nlp, batch_size: int = 256) -> Tokens:
    """Each text as its non-space tokens and their UPOS tags by the spaCy pipeline ``nlp``."""
    out = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        tokens = [t for t in doc if not t.is_space and t.pos_ != "SPACE"]
        out.append(([t.text for t in tokens], [t.pos_ for t in tokens]))
    return out


def silver_agreement(
    lang: str, max_pairs: int = 5000, seed: int = 0, root: str | Path = HELP_ROOT
) -> dict[str, Any]:
    """``tag_agreement`` of a seeded sample of ``max_pairs`` English–``lang`` help paragraph
    pairs, tagged by the two languages' silver pipelines (``pos_silver.PIPELINES``)."""
    from crossalign.data.corpora.pos_silver import PIPELINES, load_tagger, silver_pipeline

    pipeline = silver_pipeline(lang)
    pairs = libreoffice_pairs([pipeline.help], root)[pipeline.help]
    if len(pairs) > max_pairs:
        pairs = [pairs[i] for i in sorted(random.Random(seed).sample(range(len(pairs)), max_pairs))]
    src = tag_texts([e for e, _ in pairs], load_tagger(PIPELINES["en"], ner=False))
    tgt = tag_texts([t for _, t in pairs], load_tagger(pipeline, ner=False))
    taggers = {p.lang: p.model for p in (PIPELINES["en"], pipeline)}
    return {"language": lang, "taggers": taggers, "seed": seed, **tag_agreement(src, tgt)}


def record_agreement(
    lang: str,
    max_pairs: int = 5000,
    seed: int = 0,
    root: str | Path = HELP_ROOT,
    cache: str | Path | None = None,
) -> dict[str, Any]:
    """``silver_agreement`` of ``lang``, added to the card of its silver sentences (built first
    when missing: the card then says how good the labels it describes are); returns it."""
    import json

    from crossalign.data.corpora.pos_silver import CARD, silver_cache, silver_records
    from crossalign.fileio import write_json_atomic

    directory = Path(cache) if cache is not None else silver_cache(lang)
    silver_records(root, directory, lang=lang)
    result = silver_agreement(lang, max_pairs, seed, root)
    card = json.loads((directory / CARD).read_text(encoding="utf-8"))
    card["agreement_with_en"] = result
    write_json_atomic(directory / CARD, card)
    return result
