"""Options of every registered objective, importable without torch: one dataclass per objective
(``Objective.Options``), each field documented by the string below it, checked in
``__post_init__``. A run's ``objectives.N`` entry gives them by name (``mask_prob: 0.2``); its
``config.yaml`` records every field (``crossalign.objective_options``).

Shared groups are composed by inheritance: ``MLMOptions`` and ``MASSSpanOptions`` (the host
objective's masking), ``SwitchOptions`` (the code-switching of ``tcs_*``/``scs_*``) and
``GCOptions`` (the co-occurrence regression of ``mlm_gc``/``mass_gc``). A dataclass lists its
bases' fields first, the last base's first: an objective's own fields sit in a group of their
own (``_AlignFields``, ...) where the recorded order puts them before the shared ones.

Errors name the option alone (``mask_prob=2 must be in [0, 1]``); the objective that builds
its options puts ``objective NAME:`` before them (``Objective.build_options``)."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.align.config import OT_FILTERS, SINKHORN_ORDERS
from crossalign.checks import check_choice, check_flag, check_path, check_range
from crossalign.data.pair_layout import PAIR_LAYOUTS
from crossalign.errors import CrossalignError

NEIGHBOURS = ("state", "output_embedding")
"""What GC regresses a masked state against: a neighbour's state (Eq. 3) or its output
embedding (Eq. 6)."""
CSLS_NEIGHBOURHOODS = ("batch", "vocabulary")
"""Where SCS takes the CSLS term r_S(y) of a candidate y from (``csls_neighbourhood``)."""
NO_TRANSLATION = ("keep", "bert")
"""What DICT-MLM does to a selected token without a dictionary entry that drew the dictionary
branch: ``keep`` it unchanged (the paper) or give it ``bert``'s 80/10/10 (a variant)."""
RANDOM_REPLACEMENTS = ("vocabulary", "language")
"""Where DICT-MLM's random replacements come from: ``vocabulary``, any id of the model's
vocabulary (the paper's mBERT masking; it may be a special token or the label itself), or
``language``, a non-special id of the block's language other than the label (a variant,
crossalign's rule before it followed the paper)."""
DWA_REDUCTIONS = ("pooled", "sum", "mean")
"""How DWA reduces its pointer loss (``reduction``)."""
POINTER_LABELS = ("last-link", "max-plan")
"""Which link labels a DWA token with several (``pointer_label``)."""
DIRECTIONS = ("forward", "backward", "both")
"""Which way ``mt`` translates a pair."""


def check_replace_probs(where: str, replace_probs: object) -> None:
    """Refuse a ``replace_probs`` option that is not two probabilities [mask, random] summing
    to at most 1 (``where`` names the option in the error)."""
    if not isinstance(replace_probs, (list, tuple)) or len(replace_probs) != 2:
        raise CrossalignError(
            f"{where}={replace_probs!r} must be two probabilities [mask, random], e.g. [0.8, 0.1]"
        )
    for i, p in enumerate(replace_probs):
        check_range(f"{where}.{i}", p, 0, 1)
    if sum(replace_probs) > 1:
        raise CrossalignError(f"{where}={list(replace_probs)} must sum to at most 1")


@dataclass
class ObjectiveOptions:
    """Base of the objective options (an objective without options has these: none)."""

    def __post_init__(self) -> None:
        """Check the fields: each group has a ``check_*`` method for its own, and each
        objective's options call them in the order the objective has always checked them."""


@dataclass
class MLMOptions(ObjectiveOptions):
    """``mlm``: 80/10/10 masking of a share of the tokens."""

    mask_prob: float = 0.15
    """The share of tokens predicted, in [0, 1]."""
    replace_probs: tuple = (0.8, 0.1)
    """[mask, random]: the shares of predicted tokens that become <mask> and a random token
    (each in [0, 1], summing to at most 1; the rest stay unchanged)."""

    def __post_init__(self) -> None:
        self.check_masking()

    def check_masking(self) -> None:
        """Check ``mask_prob`` and ``replace_probs``."""
        check_range("mask_prob", self.mask_prob, 0, 1)
        check_replace_probs("replace_probs", self.replace_probs)


@dataclass
class _PackingField(ObjectiveOptions):
    packing: bool = False
    """Pack several pairs (sentences, for ``mass``, ``mass_gc``, ``dae`` and line-by-line
    ``mlm``, ``mlm_gc``, ``align_mlm`` and ``dict_mlm``) into each row of ``data.max_length`` tokens
    (block-diagonal attention, positions kept; an encoder-decoder's encoder and decoder rows
    packed pair by pair), so no position is padding; the same examples, masks, loss and
    gradients as the padded rows (tested), in fewer rows."""


@dataclass
class _RowFields(_PackingField):
    line_by_line: bool = False
    """One sentence per row, ``[cls] sentence [sep]`` with positions from 0 (Hugging Face
    run_mlm's --line_by_line; Dufter & Schütze's set-up), instead of blocks of
    ``data.max_length`` tokens cut from the language's text stream across sentences (XLM's
    streams, the default). Needs whole sentences: a token store, not a streamed source. With
    ``packing``, several sentences share a row."""

    def check_rows(self, name: str) -> None:
        """Check ``line_by_line`` and ``packing`` (which packs sentences, so needs it)."""
        check_flag("line_by_line", self.line_by_line)
        check_flag("packing", self.packing)
        if self.packing and not self.line_by_line:
            raise CrossalignError(
                f"{name}: packing: true packs sentences, so it needs line_by_line: true "
                "(blocks of the text stream have no padding to save)"
            )


@dataclass
class MaskedLMOptions(MLMOptions, _RowFields):
    """``mlm``: 80/10/10 masking of a share of the tokens, on blocks of the text stream or one
    sentence per row."""

    def __post_init__(self) -> None:
        self.check_rows("mlm")
        self.check_masking()


@dataclass
class TLMOptions(MLMOptions, _PackingField):
    """``tlm``: MLM's masking of both sides of a pair."""

    layout: str = "tlm"
    """Layout of the pair: tlm (XLM's, positions restarting at the target) or concat ([cls]
    src [sep] tgt [sep], continuous positions; XLM-Align's data)."""

    def __post_init__(self) -> None:
        check_choice("layout", self.layout, PAIR_LAYOUTS)
        check_flag("packing", self.packing)
        self.check_masking()


@dataclass
class _AlignFields(ObjectiveOptions):
    dictionary: str | None = None
    """A MUSE file of token pairs (required)."""
    alpha: float = 10.0
    """α (>= 0), the weight of the alignment loss."""


@dataclass
class AlignMLMOptions(MLMOptions, _AlignFields, _RowFields):
    """``align_mlm``: MLM's options (blocks or one sentence per row) and the dictionary whose
    pairs' embeddings are pulled together."""

    def __post_init__(self) -> None:
        self.check_rows("align_mlm")
        self.check_masking()
        check_range("alpha", self.alpha, 0)


@dataclass
class _DictHeadFields(ObjectiveOptions):
    dictionary: str | None = None
    """The dictionary file (required)."""
    vocab: str | None = None
    """vocab.json, the languages' ids; read only by random_replacement: language."""
    translate_prob: float = 0.5
    """In [0, 1]: the share of the masked tokens replaced by their translation."""


@dataclass
class _DictTailFields(ObjectiveOptions):
    no_translation: str = "keep"
    """keep or bert (see NO_TRANSLATION)."""
    random_replacement: str = "vocabulary"
    """vocabulary: any id of the model's vocabulary (the paper); language: an id of the
    block's language other than the label (the variant)."""


@dataclass
class DictMLMOptions(_DictTailFields, MLMOptions, _DictHeadFields, _RowFields):
    """``dict_mlm``: MLM's options (blocks or one sentence per row) and the dictionary's
    translations of masked tokens."""

    def __post_init__(self) -> None:
        self.check_rows("dict_mlm")
        self.check_masking()
        check_range("translate_prob", self.translate_prob, 0, 1)
        check_choice("no_translation", self.no_translation, NO_TRANSLATION)
        check_choice("random_replacement", self.random_replacement, RANDOM_REPLACEMENTS)
        if self.vocab is not None:
            check_path("vocab", self.vocab)
            if self.random_replacement == "vocabulary":
                raise CrossalignError(
                    "vocab is read only with random_replacement: language; drop vocab (random "
                    "replacements come from the whole vocabulary, as in the paper) or set "
                    "random_replacement: language"
                )


@dataclass
class _DWAFields(ObjectiveOptions):
    layer: int = 10
    """Self-labelling layer (--wa_layer; the paper's ablation varies it), >= 0."""
    sinkhorn_iters: int = 2
    """Sinkhorn iterations, >= 0."""
    filter_iters: int = 2
    """IterMax's max_count (--wa_max_count), >= 1."""
    alpha: float = 0.9
    """In [0, 1] (IterMax's)."""
    mu: float = 1.0
    """> 0 (Sinkhorn's)."""
    sinkhorn_order: str = "columns-first"
    """columns-first; rows-first: Eq. 6 as written."""
    ot_filter: str = "itermax"
    """itermax; eq9-literal: Eq. 7-9 read literally; union: the ablation without filtering;
    argmax: one mutual argmax."""
    pointer_label: str = "last-link"
    """For a token with several links: last-link (the criterion's) or max-plan (the largest
    plan value)."""
    layout: str = "concat"
    """Layout of the pair: concat ([cls] src [sep] tgt [sep], continuous positions, the
    authors' data) or tlm (crossalign's TLM layout)."""
    reduction: str = "pooled"
    """Of the pointer loss: pooled (the criterion's, summed and divided with TLM by their tokens
    together), sum (Eq. 15 per pair, averaged over pairs) or mean."""
    tlm_weight: float = 1.0
    """Weight of the TLM loss, >= 0."""
    allow_cold_start: bool = False
    """Train from a random model (no model.path), whose self-labels are noise."""


@dataclass
class DWAOptions(MLMOptions, _DWAFields, _PackingField):
    """``dwa`` (defaults: the authors' pre-training task): TLM's options and the
    self-labelled alignments' pointer loss."""

    def __post_init__(self) -> None:
        check_choice("layout", self.layout, PAIR_LAYOUTS)
        self.check_masking()
        for key, allowed in (
            ("sinkhorn_order", SINKHORN_ORDERS),
            ("ot_filter", OT_FILTERS),
            ("pointer_label", POINTER_LABELS),
            ("reduction", DWA_REDUCTIONS),
        ):
            check_choice(key, getattr(self, key), allowed)
        for key, low in (("layer", 0), ("sinkhorn_iters", 0), ("filter_iters", 1)):
            check_range(key, getattr(self, key), low, integer=True)
        check_range("alpha", self.alpha, 0, 1)
        check_range("mu", self.mu, 0, low_open=True)
        check_range("tlm_weight", self.tlm_weight, 0)
        check_flag("allow_cold_start", self.allow_cold_start)
        check_flag("packing", self.packing)


@dataclass
class Seq2SeqOptions(ObjectiveOptions):
    """Every sequence-to-sequence objective's: the decoder loss's label smoothing."""

    label_smoothing: float = 0.1
    """In [0, 1)."""

    def __post_init__(self) -> None:
        self.check_label_smoothing()

    def check_label_smoothing(self) -> None:
        """Check ``label_smoothing``."""
        check_range("label_smoothing", self.label_smoothing, 0, 1, high_open=True)


@dataclass
class _MASSFields(ObjectiveOptions):
    span_ratio: float = 0.5
    """The share of the sentence masked, in (0, 1] (MASS: 0.5)."""
    replace_probs: tuple = (0.8, 0.1)
    """[mask, random]: the shares of span tokens that become <mask> and a random token in the
    encoder input (the rest stay)."""


@dataclass
class MASSSpanOptions(Seq2SeqOptions, _MASSFields):
    """MASS's masked span, shared by ``mass``, ``mass_gc``, ``tcs_mass`` and ``scs_mass``."""

    def __post_init__(self) -> None:
        self.check_span()

    def check_span(self) -> None:
        """Check ``label_smoothing``, ``span_ratio`` and ``replace_probs``."""
        self.check_label_smoothing()
        check_range("span_ratio", self.span_ratio, 0, 1, low_open=True)
        check_replace_probs("replace_probs", self.replace_probs)


@dataclass
class MASSOptions(MASSSpanOptions, _PackingField):
    """``mass``: the masked span, and packing."""

    def __post_init__(self) -> None:
        self.check_span()
        check_flag("packing", self.packing)


@dataclass
class _DAEFields(ObjectiveOptions):
    shuffle: float = 3.0
    """The local-shuffle range (a token moves fewer than shuffle positions): 0 (off) or more
    than 1 (XLM: 3)."""
    drop: float = 0.1
    """The probability of removing a token, in [0, 1)."""
    blank: float = 0.1
    """The probability of replacing a token by <mask>, in [0, 1)."""


@dataclass
class DAEOptions(Seq2SeqOptions, _DAEFields, _PackingField):
    """``dae`` (XLM's defaults): the noise C(x), and packing."""

    def __post_init__(self) -> None:
        self.check_label_smoothing()
        check_flag("packing", self.packing)
        check_range("shuffle", self.shuffle, 0)
        if 0 < self.shuffle <= 1:
            raise CrossalignError(
                f"shuffle={self.shuffle} shuffles nothing; use 0 (off) or more than 1 (XLM: 3)"
            )
        check_range("drop", self.drop, 0, 1, high_open=True)
        check_range("blank", self.blank, 0, 1, high_open=True)


@dataclass
class _BTFields(ObjectiveOptions):
    languages: list | None = None
    """The languages sentences are translated into (default: every language of the run; each
    batch draws one other than its own)."""
    max_len_a: float = 1.3
    """A translation has at most max_len_a · |x| + max_len_b tokens (XLM: 1.3), > 0."""
    max_len_b: int = 5
    """See max_len_a (XLM: 5), >= 0."""


@dataclass
class BTOptions(Seq2SeqOptions, _BTFields):
    """``bt``: the online translations."""

    def __post_init__(self) -> None:
        self.check_label_smoothing()
        check_range("max_len_a", self.max_len_a, 0, low_open=True)
        check_range("max_len_b", self.max_len_b, 0, integer=True)


@dataclass
class _MTFields(ObjectiveOptions):
    direction: str = "both"
    """forward (a pair source en-de translates en→de), backward (de→en) or both (one drawn
    per batch)."""


@dataclass
class MTOptions(Seq2SeqOptions, _MTFields, _PackingField):
    """``mt``: which way pairs are translated, and packing."""

    def __post_init__(self) -> None:
        self.check_label_smoothing()
        check_flag("packing", self.packing)
        check_choice("direction", self.direction, DIRECTIONS)


@dataclass
class GCOptions(ObjectiveOptions):
    """The global co-occurrence regression (MLM-GC), shared by ``mlm_gc`` and ``mass_gc``."""

    cooc: str | None = None
    """The matrix directory (from 'crossalign cooc build'; required)."""
    gc_weight: float = 1.0
    """λ (>= 0), the weight of the GC term."""
    window: int | None = None
    """n, from 1 to the matrix's window (default the matrix's)."""
    x_max: float = 100.0
    """x_max of the regression's weighting (> 0)."""
    alpha: float = 0.75
    """The exponent of the regression's weighting (>= 0)."""
    masked_neighbours: bool = False
    """Pair a masked position with neighbours whose input is <mask> too (by original id)."""
    neighbour: str = "state"
    """state: Eq. 3; output_embedding: Eq. 6."""
    lookup_device: str = "model"
    """Where the matrix's rows are looked up: model (its device) or cpu."""
    force_no_warmup: bool = False
    """Train with train.warmup_steps 0 (refused otherwise: the GC regression collapses
    without learning-rate warm-up, Ai & Fang 2023)."""

    def __post_init__(self) -> None:
        self.check_gc()

    def check_gc(self) -> None:
        """Check the GC options (``cooc`` only for its type: the objective opens it)."""
        check_range("gc_weight", self.gc_weight, 0)
        check_range("x_max", self.x_max, 0, low_open=True)
        check_range("alpha", self.alpha, 0)
        if self.window is not None:
            check_range("window", self.window, 1, integer=True)
        check_choice("neighbour", self.neighbour, NEIGHBOURS)
        check_choice("lookup_device", self.lookup_device, ("model", "cpu"))
        check_flag("masked_neighbours", self.masked_neighbours)
        check_flag("force_no_warmup", self.force_no_warmup)
        if self.cooc:
            check_path("cooc", self.cooc)


@dataclass
class MLMGCOptions(MLMOptions, GCOptions, _RowFields):
    """``mlm_gc``: MLM's options (blocks or one sentence per row) and GC's; a neighbour whose
    input is <mask> is skipped."""

    def __post_init__(self) -> None:
        self.check_rows("mlm_gc")
        self.check_masking()
        self.check_gc()


@dataclass
class MASSGCOptions(MASSOptions, GCOptions):
    """``mass_gc``: MASS's options and GC's; masked neighbours pair too (Ai & Fang 2023, §3.2)."""

    masked_neighbours: bool = True
    """Pair a span position with neighbours whose encoder input is <mask> too (by original id,
    the span's tokens); false: crossalign's earlier default."""

    def __post_init__(self) -> None:
        self.check_span()
        check_flag("packing", self.packing)
        self.check_gc()


@dataclass
class SwitchOptions(ObjectiveOptions):
    """The code-switching shared by ``tcs_mlm``, ``scs_mlm``, ``tcs_mass`` and ``scs_mass``
    (checked after the host objective's own options)."""

    switch_prob: float = 0.15
    """In [0, 1], the share of context tokens switched."""
    threshold: int = 100
    """A token is specific to a language seen at least this often there (>= 0)."""
    other_max: int = 100
    """... and at most this often in the other language (>= 0, <= threshold)."""
    csls_k: int = 10
    """CSLS's neighbourhood size (>= 1)."""
    refresh_every: int = 0
    """Recompute the switching state every this many steps (>= 0; 0: never)."""
    max_sentences: int | None = None
    """The sentences per language the vocabularies are counted on: None (the default), the
    whole training text, as the paper counts its corpus; N (>= 1), the first N sentences only
    (crossalign's earlier 100000 cap)."""

    def check_switching(self) -> None:
        """Check the switching options."""
        check_range("switch_prob", self.switch_prob, 0, 1)
        for key, low in (("threshold", 0), ("other_max", 0), ("csls_k", 1), ("refresh_every", 0)):
            check_range(key, getattr(self, key), low, integer=True)
        if self.max_sentences is not None:
            check_range("max_sentences", self.max_sentences, 1, integer=True)


@dataclass
class TokenSwitchOptions(SwitchOptions):
    """Token code-switching (TCS): the self-induced dictionary, checked first."""

    layer: int = 0
    """The layer the dictionary is induced from (>= 0; 0: the embedding layer)."""
    context_sentences: int = 2000
    """The sentences per language its context-averaged vectors are taken over (>= 1)."""

    def check_token(self) -> None:
        """Check TCS's options."""
        check_range("layer", self.layer, 0, integer=True)
        check_range("context_sentences", self.context_sentences, 1, integer=True)


@dataclass
class SemanticSwitchOptions(SwitchOptions):
    """Semantic code-switching (SCS): the soft CSLS translations, checked first."""

    top_k: int = 8
    """The tokens of x̂ and the candidates of ŷ (>= 1)."""
    temperature: float = 1.0
    """Of the candidates' softmax (> 0)."""
    csls_neighbourhood: str = "batch"
    """The set the CSLS term r_S(y) of a candidate y is taken against: batch (the paper's
    footnote 6: the switched tokens of the same batch, nothing cached, refresh_every refused)
    or vocabulary (the block language's specific vocabulary, cached and recomputed every
    refresh_every steps; crossalign's earlier behaviour)."""

    def check_semantic(self) -> None:
        """Check SCS's options."""
        check_range("top_k", self.top_k, 1, integer=True)
        check_range("temperature", self.temperature, 0, low_open=True)
        check_choice("csls_neighbourhood", self.csls_neighbourhood, CSLS_NEIGHBOURHOODS)
        if self.csls_neighbourhood == "batch" and self.refresh_every:
            raise CrossalignError(
                f"refresh_every={self.refresh_every}: with csls_neighbourhood: batch nothing is "
                "cached to refresh; remove refresh_every or set csls_neighbourhood: vocabulary"
            )


@dataclass
class TCSMLMOptions(TokenSwitchOptions, MLMOptions):
    """``tcs_mlm``: MLM's options, then the switching's, then TCS's."""

    def __post_init__(self) -> None:
        self.check_token()
        self.check_masking()
        self.check_switching()


@dataclass
class SCSMLMOptions(SemanticSwitchOptions, MLMOptions):
    """``scs_mlm``: MLM's options, then the switching's, then SCS's."""

    def __post_init__(self) -> None:
        self.check_semantic()
        self.check_masking()
        self.check_switching()


@dataclass
class TCSMASSOptions(TokenSwitchOptions, MASSSpanOptions):
    """``tcs_mass``: MASS's options, then the switching's, then TCS's (MASS masks its span:
    no mask_prob)."""

    def __post_init__(self) -> None:
        self.check_token()
        self.check_span()
        self.check_switching()


@dataclass
class SCSMASSOptions(SemanticSwitchOptions, MASSSpanOptions):
    """``scs_mass``: MASS's options, then the switching's, then SCS's (MASS masks its span:
    no mask_prob)."""

    def __post_init__(self) -> None:
        self.check_semantic()
        self.check_span()
        self.check_switching()
