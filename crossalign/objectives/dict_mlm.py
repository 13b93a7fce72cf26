"""DICT-MLM: masked LM whose masked tokens are often replaced by a dictionary translation
(Chaudhary et al. 2020; the variant compared in ALIGN-MLM, Tang et al. 2022, §3).

Of the positions selected for prediction (15%), each goes, with probability ``translate_prob``
(0.5), to the dictionary branch: it becomes one of its translations (uniformly) if it has one,
and is left unchanged otherwise (ALIGN-MLM, App. G.4); the other selected positions get BERT's
80% ``<mask>`` / 10% random / 10% unchanged. The label is always the original token, so the
model learns to predict a word from its translation. The 80/10/10 part is "normal mBERT"
masking (App. G.4; the authors' collator draws ``torch.randint(len(tokenizer))``): a random
replacement is any id of the model's vocabulary (its ``vocab_size`` embedding rows: the
tokenizer's ids, and any padding rows a loaded model has beyond them), drawn uniformly, by
``mask_tokens`` as for plain MLM. In the authors' derived-language runs ``len(tokenizer)``
covers the original language's ids only, so their draws never reach the derived ids.

Variants: ``no_translation="bert"``: a selected position without a dictionary entry always
gets 80/10/10, as in plain MLM, so only positions with an entry reach the dictionary branch.
``random_replacement="language"``: random replacements are drawn from the block's own
language (``vocab``: the token pieces of each language, ``vocab.json`` of a derived corpus;
every non-special id without it) and never equal the label.
"""

from __future__ import annotations

from typing import Any

import torch

from crossalign.checks import check_choice, check_path
from crossalign.data.masking import IGNORE_INDEX, mask_tokens
from crossalign.errors import CrossalignError
from crossalign.objectives.base import OBJECTIVES, TokenContext
from crossalign.objectives.mlm import MaskedLM
from crossalign.objectives.options import (
    NO_TRANSLATION,
    DictMLMOptions,
    ObjectiveOptions,
)


def translation_table(
    src: torch.Tensor, tgt: torch.Tensor, vocab_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The dictionary in both directions as a CSR table over token ids: the translations of
    token t are ``targets[offsets[t]:offsets[t + 1]]``. Identity pairs (a == b) are dropped,
    so a translation never equals the token it replaces.

    src, tgt: [D] long. Returns (offsets [vocab_size + 1] long, targets [E] long).
    """
    a = torch.cat([src, tgt])
    b = torch.cat([tgt, src])
    pairs = torch.unique(torch.stack([a, b], dim=1)[a != b], dim=0)  # sorted by source id
    counts = torch.bincount(pairs[:, 0], minlength=vocab_size)
    offsets = torch.zeros(vocab_size + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(counts, 0)
    return offsets, pairs[:, 1].contiguous()


def id_positions(ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """[vocab_size] long: the index of every id in ``ids`` [R], -1 for ids not in it."""
    positions = torch.full((vocab_size,), -1, dtype=torch.long)
    positions[ids] = torch.arange(ids.numel())
    return positions


def random_other(
    labels: torch.Tensor,
    ids: torch.Tensor,
    generator: torch.Generator,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """For every entry of ``labels`` [B, L], a uniform draw from the ids [R] other than the
    label itself (from all of them when the label is not among them). ``positions`` is
    ``id_positions(ids, V)`` (computed when None). Needs R >= 2."""
    r = ids.numel()
    if positions is None:
        positions = id_positions(ids, int(max(ids.max(), labels.max())) + 1)
    pos = positions[labels]
    inside = pos >= 0
    n = r - inside.long()
    pick = (torch.rand(labels.shape, generator=generator) * n).long().clamp(max=r - 1)
    pick = pick + (inside & (pick >= pos)).long()
    return ids[pick]


def check_no_translation(value: str) -> None:
    """Raise CrossalignError unless ``value`` is one of ``NO_TRANSLATION``."""
    check_choice("dict_mlm: no_translation", value, NO_TRANSLATION)


def dict_mask(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    mask_id: int,
    offsets: torch.Tensor,
    targets: torch.Tensor,
    random_ids: torch.Tensor,
    generator: torch.Generator,
    mask_prob: float = 0.15,
    translate_prob: float = 0.5,
    replace_probs: tuple[float, float] = (0.8, 0.1),
    positions: torch.Tensor | None = None,
    no_translation: str = "keep",
    exclude_label: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DICT-MLM masking: select each maskable token with ``mask_prob``; with ``translate_prob``
    a selected token becomes one of its translations, or stays unchanged when it has none
    (``no_translation="keep"``, the paper); the other selected tokens get 80% ``mask_id`` /
    10% a random id / 10% unchanged. With ``no_translation="bert"`` a selected token without
    translations always gets 80/10/10.

    A random id is drawn uniformly from ``random_ids`` by ``mask_tokens`` (the paper, with
    ``random_ids`` = every id of the vocabulary), or, with ``exclude_label``, uniformly from
    ``random_ids`` other than the token (``random_other``; the variant).

    input_ids, maskable: [B, L]; (offsets, targets) from ``translation_table``; random_ids [R]
    with ``positions = id_positions(random_ids, V)`` (computed when None; read only with
    ``exclude_label``). Returns (inputs [B, L], labels [B, L]); labels = IGNORE_INDEX where not
    selected.
    """
    check_no_translation(no_translation)
    shape = input_ids.shape
    selected = (torch.rand(shape, generator=generator) < mask_prob) & maskable
    start = offsets[input_ids]
    count = offsets[input_ids + 1] - start
    has_entry = count > 0
    branch = selected & (torch.rand(shape, generator=generator) < translate_prob)
    if no_translation == "bert":
        branch = branch & has_entry
    translate = branch & has_entry
    which = (torch.rand(shape, generator=generator) * count).long().clamp(min=0)
    which = torch.minimum(which, (count - 1).clamp(min=0))
    if targets.numel():
        translation = targets[(start + which).clamp(max=targets.numel() - 1)]
    else:
        translation = input_ids
    rest = selected & ~branch  # with "keep", the branch's tokens without entry stay as they are
    inputs = torch.where(translate, translation, input_ids)
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    if not exclude_label:  # 80/10/10 of every ``rest`` token, as plain MLM masks
        inputs, _ = mask_tokens(inputs, rest, mask_id, random_ids, generator, 1.0, replace_probs)
        return inputs, labels
    u = torch.rand(shape, generator=generator)
    to_mask = rest & (u < replace_probs[0])
    to_random = rest & (u >= replace_probs[0]) & (u < replace_probs[0] + replace_probs[1])
    inputs = torch.where(to_mask, torch.full_like(input_ids, mask_id), inputs)
    inputs = torch.where(
        to_random, random_other(input_ids, random_ids, generator, positions), inputs
    )
    return inputs, labels


def dictionary_token_ids(
    objective: str, dictionary: str | None, ctx: TokenContext
) -> tuple[list[int], list[int]]:
    """Source and target token ids of the MUSE token dictionary an objective was given.

    Raises CrossalignError naming ``objective`` when the option is missing.
    """
    from crossalign.data.derive.derivation import token_dictionary

    if not dictionary:
        raise CrossalignError(
            f"objective {objective} needs option 'dictionary': a MUSE file of token pairs, e.g. "
            f"{{name: {objective}, dictionary: data/derived/trans+inv/dictionary/train.txt}}"
        )
    check_path(f"objective {objective}: dictionary", dictionary)
    if ctx.tokenizer is None:
        raise CrossalignError(f"objective {objective} needs the run's tokenizer")
    src, tgt, _ = token_dictionary(dictionary, ctx.tokenizer)
    return src, tgt


@OBJECTIVES.register("dict_mlm")
class DictMLM(MaskedLM):
    """DICT-MLM: half of the masked tokens replaced by their dictionary translation (kept as
    they are when they have none; ``no_translation="bert"``: 80/10/10 then); random
    replacements from the whole vocabulary (``random_replacement="language"``: from the
    block's language, never the label)."""

    Options = DictMLMOptions

    data = "mono"

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``DictMLMOptions`` (MLM's, ``dictionary``, ``vocab``, ``translate_prob``,
        ``no_translation``, ``random_replacement``)."""
        super().__init__(ctx, options, **values)
        from crossalign.data.derive.derivation import read_vocab

        o = self.options
        dictionary, vocab, random_replacement = o.dictionary, o.vocab, o.random_replacement
        src, tgt = dictionary_token_ids("dict_mlm", dictionary, ctx)
        self.translate_prob = o.translate_prob
        self.no_translation = o.no_translation
        self.random_replacement = random_replacement
        # Masking runs in collate on the CPU: plain CPU tensors, not buffers.
        self.offsets, self.targets = translation_table(
            torch.tensor(src), torch.tensor(tgt), ctx.vocab_size
        )
        self.vocab_path = vocab
        # The ids random replacements come from, per language ("": every language).
        self.language_ids: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        if vocab:
            for lang, ids in read_vocab(vocab, ctx.tokenizer).items():
                ids = torch.tensor(ids, dtype=torch.long)
                self.language_ids[lang] = (ids, id_positions(ids, ctx.vocab_size))
        else:
            if random_replacement == "vocabulary":
                ids = torch.arange(ctx.vocab_size)
            else:
                ids = self.random_ids.clone()
            self.language_ids[""] = (ids, id_positions(ids, ctx.vocab_size))

    def start(self, model, data=None) -> None:
        """Every training language must have a vocabulary in ``vocab`` (when given)."""
        if "" in self.language_ids or data is None:
            return
        for lang in data.languages():
            if lang not in self.language_ids:
                raise CrossalignError(
                    f"dict_mlm: {self.vocab_path} has no vocabulary for language '{lang}'; it "
                    f"has {', '.join(self.language_ids)}"
                )

    def mask(
        self, input_ids: torch.Tensor, generator: torch.Generator, language: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """DICT-MLM masking of every non-special token of a block in ``language``."""
        key = "" if "" in self.language_ids else language
        random_ids, positions = self.language_ids[key]
        maskable = ~torch.isin(input_ids, torch.tensor(self.ctx.special_ids))
        return dict_mask(
            input_ids,
            maskable,
            self.ctx.mask_id,
            self.offsets,
            self.targets,
            random_ids,
            generator,
            self.mask_prob,
            self.translate_prob,
            self.replace_probs,
            positions,
            self.no_translation,
            exclude_label=self.random_replacement == "language",
        )
