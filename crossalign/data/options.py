"""Options of the data commands a study's ``prepare`` steps may run (light: read by the CLI
and by study files without importing the builders)."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.options import opt, unit_fraction


@dataclass
class TokenizerOptions:
    """``crossalign data tokenizer``."""

    out: str
    """Tokenizer directory, replaced atomically."""
    config: str | None = opt(
        None, short="-c", help="YAML run config whose data.* sources and tokenizer.* settings "
        "to train on"
    )  # fmt: skip
    overrides: list[str] = opt([], metavar="KEY=VALUE", help="config overrides")


@dataclass
class UnmtSplitOptions:
    """``crossalign data unmt-split``."""

    pairs: str
    """A parallel folder <src>-<tgt>/ (train.*, valid.*, test.*)."""
    out: str
    """Output folder, replaced atomically."""


@dataclass
class DictionarySplitOptions:
    """``crossalign data dictionary-split``."""

    derived: str
    """A derived corpus with an exact dictionary (crossalign data derive --transform trans...)."""
    fraction: float = opt(
        parse=unit_fraction, metavar="F", help="share of the dictionary's pairs to train on, "
        "in (0, 1]"
    )  # fmt: skip
    out: str = opt(help="output directory (train.txt, test.txt, card.json), replaced atomically")
