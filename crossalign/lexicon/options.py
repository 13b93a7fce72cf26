"""Options of dictionary induction (``crossalign induce-dict``, ``eval induced-dict``),
importable without torch: the CLI builds its flags from these dataclasses."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.checks import check_choice, check_range
from crossalign.options import opt

BACKENDS = ("auto", "torch", "faiss")


@dataclass(kw_only=True)
class TextOptions:
    """Where the text of each language comes from (contextual layers, vocabularies)."""

    corpus: str | None = opt(None, metavar="DIR", reads=True)
    """A built corpus (crossalign data ...): its train text of each language."""
    src_text: list[str] | None = opt(None, metavar="FILE", reads=True)
    """Source-language text files (instead of --corpus)."""
    tgt_text: list[str] | None = opt(None, metavar="FILE", reads=True)
    """Target-language text files (instead of --corpus)."""
    context_sentences: int = 2000
    """Lines per language whose hidden states are averaged (layers >= 1)."""
    device: str = "cpu"
    """Torch device of the model (cpu, cuda)."""

    def __post_init__(self) -> None:
        check_range("context_sentences", self.context_sentences, 1, integer=True)


@dataclass(kw_only=True)
class VocabularyOptions:
    """The language-specific vocabularies (Lu et al. 2023: tokens with frequency above
    ``threshold`` in one language and at most ``other_max`` in the other)."""

    threshold: int = 100
    """Frequency above which a token counts."""
    other_max: int = 100
    """Most occurrences a token may have in the other language."""
    max_sentences: int = 200_000
    """Lines of text read per language."""

    def __post_init__(self) -> None:
        check_range("threshold", self.threshold, 0, integer=True)
        check_range("other_max", self.other_max, 0, integer=True)
        check_range("max_sentences", self.max_sentences, 1, integer=True)


@dataclass(kw_only=True)
class InductionOptions(TextOptions, VocabularyOptions):
    """How a dictionary is induced: from which layer, with which CSLS neighbourhood."""

    layer: int = 0
    """0 = the embedding layer, 1..L = a layer's hidden states averaged over the text."""
    k: int = 10
    """CSLS neighbourhood size."""
    backend: str = opt("torch", choices=BACKENDS)
    """CSLS search: torch, faiss, or auto (faiss when installed)."""

    def __post_init__(self) -> None:
        TextOptions.__post_init__(self)
        VocabularyOptions.__post_init__(self)
        check_range("layer", self.layer, 0, integer=True)
        check_range("k", self.k, 1, integer=True)
        check_choice("backend", self.backend, BACKENDS)


@dataclass(kw_only=True)
class InduceOptions(InductionOptions):
    """``crossalign induce-dict``: a token dictionary induced from a model's embeddings."""

    model: str = opt(metavar="DIR")
    """save_pretrained masked-LM directory (or a run directory)."""
    src: str = opt(metavar="LANG")
    """Source language, e.g. en."""
    tgt: str = opt(metavar="LANG")
    """Target language, e.g. de."""
    out: str = opt(metavar="FILE")
    """Output dictionary (MUSE lines 'src tgt score', best first)."""
    backward: str | None = opt(None, metavar="FILE")
    """Also write the tgt->src dictionary here."""
    backend: str = opt("auto", choices=BACKENDS)
    """CSLS search: auto (faiss when installed), torch or faiss."""
