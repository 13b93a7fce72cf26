"""The settings of a derived-language corpus (``crossalign data derive``, ``crossalign study
derived``): one frozen dataclass for the writer, the command line and the card. Torch-free, so
building the CLI parser stays light."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.languages import DERIVED_LANG
from crossalign.options import build_options, opt

TRANSFORMS = ("syn", "inv", "trans")
"""Known transforms, in the order a composition applies them."""


def parse_transform(spec: str) -> tuple[str, ...]:
    """``trans+inv`` → ``("inv", "trans")``: the transforms of a composition, in the order they
    are applied (``syn``, ``inv``, ``trans``). Raises on unknown or repeated names."""
    names = [s.strip() for s in spec.split("+") if s.strip()]
    if not names:
        raise CrossalignError(f"--transform '{spec}' is empty; use e.g. trans+inv")
    for name in names:
        if name not in TRANSFORMS:
            from crossalign.registry import did_you_mean

            raise CrossalignError(
                f"unknown transform '{name}' in '{spec}'{did_you_mean(name, list(TRANSFORMS))}; "
                f"known: {', '.join(TRANSFORMS)} (compose with +, e.g. trans+inv)"
            )
    if len(set(names)) != len(names):
        raise CrossalignError(f"--transform '{spec}' repeats a transform")
    return tuple(t for t in TRANSFORMS if t in names)


@dataclass(frozen=True)
class DeriveSettings:
    """What a derived corpus is made from; each field is the ``crossalign data derive`` option
    of the same name (``--dict-fraction`` for ``dict_fraction``)."""

    transform: str
    """trans, inv, syn or a composition such as trans+inv, trans+syn (as given)."""
    corpus: tuple[str, ...] = opt(append=True, metavar="DIR_OR_FILE")
    """English text: a built corpus (its English side, e.g. data/bible) or a text file; repeat
    to combine."""
    overlap: float = opt(0.0, metavar="P")
    """PERCENT of token types shared (not twinned), in [0, 100]; the card stores a fraction."""
    dict_fraction: float = 0.25
    """Fraction in (0, 1] of the twinned vocabulary in the training dictionary."""
    parallel_fraction: float = 0.25
    """Fraction in (0, 1] of the training sentences also written as pairs for TLM."""
    tokenizer: str | None = opt(None, metavar="DIR")
    """English unigram or BPE tokenizer to twin; None (or empty) trains one of ``vocab_size``."""
    vocab_size: int = 8000
    """Vocabulary (token types) of the English tokenizer trained without ``tokenizer``."""
    tokenizer_kind: str = opt("unigram", choices=("unigram", "bpe"))
    """Subword model of the English tokenizer trained without ``tokenizer``: unigram (the
    default) or BPE (fewer pieces per word on small corpora; see docs/derived.md)."""
    max_lines: int | None = opt(None, metavar="N")
    """Seeded sample of this many English training lines; None: all."""
    seed: int = 0
    """Seed of every random choice."""
    valid: int = opt(1000, metavar="N")
    """Valid lines split off a text file (at most 10% of it)."""
    test: int = opt(1000, metavar="N")
    """Test lines split off a text file (at most 10% of it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "corpus", tuple(str(c) for c in self.corpus))
        if not self.corpus:
            raise CrossalignError("no --corpus given: pass an English corpus or text file")
        transforms = parse_transform(self.transform)
        if not 0.0 <= self.overlap <= 100.0:
            raise CrossalignError(f"--overlap {self.overlap:g} must be a percentage in [0, 100]")
        if self.overlap and "trans" not in transforms:
            raise CrossalignError("--overlap applies to transliteration: add trans to --transform")
        for flag, value in (
            ("--dict-fraction", self.dict_fraction),
            ("--parallel-fraction", self.parallel_fraction),
        ):
            if not 0.0 < value <= 1.0:
                raise CrossalignError(f"{flag} {value:g} must be a fraction in (0, 1]")
        for flag, number, least in (
            ("--vocab-size", self.vocab_size, 1),
            ("--max-lines", self.max_lines, 1),
            ("--valid", self.valid, 0),
            ("--test", self.test, 0),
        ):
            if number is not None and number < least:
                raise CrossalignError(f"{flag} {number} must be at least {least}")

    @property
    def overlap_fraction(self) -> float:
        """``overlap`` as a fraction in [0, 1] (what the card records and the writer uses)."""
        return self.overlap / 100.0

    @property
    def transforms(self) -> tuple[str, ...]:
        """The transforms of ``transform``, in the order they are applied."""
        return parse_transform(self.transform)

    def card(self, command: str = "") -> dict[str, Any]:
        """The settings part of the corpus card: ``format``, ``command``, ``sources``, ``seed``
        and the ``derived`` block (``overlap`` as a fraction, the transform normalised);
        ``write_derived`` adds what it measures."""
        return {
            "format": "parallel",
            "command": command,
            "sources": list(self.corpus),
            "seed": self.seed,
            "derived": {
                "transform": "+".join(self.transforms),
                "language": DERIVED_LANG,
                "overlap": self.overlap_fraction,
                "dict_fraction": self.dict_fraction,
                "parallel_fraction": self.parallel_fraction,
                "max_lines": self.max_lines,
            },
        }

    def command_line(self, out: str) -> str:
        """The ``crossalign data derive`` command that writes these settings to ``out`` (the
        card's ``command``, also the reuse key of a study's corpus: keep it stable)."""
        words = ["crossalign", "data", "derive", "--transform", self.transform]
        for corpus in self.corpus:
            words += ["--corpus", corpus]
        words += ["--out", out, "--overlap", f"{self.overlap:g}"]
        words += ["--dict-fraction", f"{self.dict_fraction:g}"]
        words += ["--parallel-fraction", f"{self.parallel_fraction:g}"]
        if self.tokenizer:
            words += ["--tokenizer", self.tokenizer]
        else:
            words += ["--vocab-size", str(self.vocab_size)]
            if self.tokenizer_kind != "unigram":  # unigram corpora keep their reuse key
                words += ["--tokenizer-kind", self.tokenizer_kind]
        if self.max_lines is not None:
            words += ["--max-lines", str(self.max_lines)]
        words += ["--seed", str(self.seed), "--valid", str(self.valid), "--test", str(self.test)]
        return shlex.join(words)

    @classmethod
    def from_values(cls, values: Mapping[str, Any], transform: str | None = None) -> DeriveSettings:
        """The settings of ``values`` (field name → value, e.g. the parsed flags of
        ``add_options(parser, DeriveSettings)``; None takes a field's default), with another
        ``transform`` where given (``study derived`` takes several)."""
        if transform is not None:
            values = {**values, "transform": transform}
        return build_options(values, cls)
