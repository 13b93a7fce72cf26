"""A study's ``prepare`` steps: commands run once before the runs of a matrix cell that share
their output (a tokenizer, a co-occurrence matrix), recorded in ``OUT/prepared.json`` so that a
step made by the same command is not repeated."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.study.spec import StudyStep, substitute


def _tokenizer() -> tuple[type, Callable[[Any], str]]:
    from crossalign.data.options import TokenizerOptions
    from crossalign.data.store.prepare import write_tokenizer

    return TokenizerOptions, write_tokenizer


def _unmt_split() -> tuple[type, Callable[[Any], str]]:
    from crossalign.data.corpora.unmt_split import split_from_options
    from crossalign.data.options import UnmtSplitOptions

    def run(o: UnmtSplitOptions) -> str:
        split_from_options(o)
        return f"wrote {o.out} (see {o.out}/card.json)"

    return UnmtSplitOptions, run


def _dictionary_split() -> tuple[type, Callable[[Any], str]]:
    from crossalign.data.derive.dictionary_split import split_summary, write_dictionary_split
    from crossalign.data.options import DictionarySplitOptions

    def run(o: DictionarySplitOptions) -> str:
        return f"wrote {o.out}: {split_summary(write_dictionary_split(o))}"

    return DictionarySplitOptions, run


def _cooc_build() -> tuple[type, Callable[[Any], str]]:
    from crossalign.cooc.build import build_from_options
    from crossalign.cooc.options import CoocBuildOptions

    def run(o: CoocBuildOptions) -> str:
        build_from_options(o)
        return f"wrote {o.out} (see {o.out}/meta.json)"

    return CoocBuildOptions, run


@dataclass(frozen=True)
class PrepareCommand:
    """A crossalign command a ``prepare`` step may name, run through the library function
    behind it (the command-line interface is not involved)."""

    load: Callable[[], tuple[type, Callable[[Any], str]]]
    """Its options dataclass and the function that does the work and returns a summary line
    (imported only when a step names the command)."""
    positional: tuple[str, ...] = ()
    """Fields given as positional arguments, as on the command line."""


PREPARE_COMMANDS: dict[str, PrepareCommand] = {
    "data tokenizer": PrepareCommand(_tokenizer, positional=("overrides",)),
    "data unmt-split": PrepareCommand(_unmt_split),
    "data dictionary-split": PrepareCommand(_dictionary_split),
    "cooc build": PrepareCommand(_cooc_build),
}
"""The commands a ``prepare`` step may run, by the words that name them."""


@dataclass
class PreparedStep:
    """A ``prepare`` step with its variables substituted and its options parsed."""

    command: str
    """Its command line (without the program name), as the ledger records it."""
    creates: Path
    options: Any
    """The command's options dataclass."""
    run: Callable[[Any], str]
    """The library function that runs it."""


def parse_step(step: StudyStep, variables: Mapping[str, Any], where: str) -> PreparedStep:
    """``step`` with ``variables`` substituted and its command line parsed into the options of
    one of ``PREPARE_COMMANDS`` (an unknown command or option is an error here, before any
    work)."""
    import argparse
    import shlex

    from crossalign.options import add_options, build_options
    from crossalign.registry import did_you_mean

    command = substitute(step.command, variables, f"{where}.command")
    creates = Path(substitute(step.creates, variables, f"{where}.creates"))
    argv = shlex.split(command)
    if argv[:1] == ["crossalign"]:
        argv = argv[1:]
    name = " ".join(argv[:2])
    if name not in PREPARE_COMMANDS:
        known = list(PREPARE_COMMANDS)
        raise CrossalignError(
            f"{where}: '{command}' is not a command a prepare step can run"
            f"{did_you_mean(name, known)}; steps run one of: {', '.join(known)}"
        )
    spec = PREPARE_COMMANDS[name]
    cls, run = spec.load()
    parser = argparse.ArgumentParser(prog=f"crossalign {name}")
    add_options(parser, cls, positional=spec.positional)
    try:
        ns = parser.parse_args(argv[2:])
    except SystemExit:
        raise CrossalignError(
            f"{where}: '{command}' has options 'crossalign {name}' does not take (see the "
            "message above)"
        ) from None
    options = build_options(vars(ns), cls, where=where)
    return PreparedStep(command=shlex.join(argv), creates=creates, options=options, run=run)


def _ledger(path: Path) -> dict[str, str]:
    """The prepare ledger ``OUT/prepared.json``: output path → the command that made it."""
    import json

    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def is_made(step: PreparedStep, ledger: Path) -> bool:
    """Whether ``step.creates`` exists and ``ledger`` records that the same command made it."""
    return step.creates.exists() and _ledger(ledger).get(str(step.creates)) == step.command


def ensure_prepared(step: PreparedStep, ledger: Path) -> None:
    """Run ``step`` unless ``is_made``; record it in ``ledger`` after it succeeds."""
    from crossalign.fileio import write_json_atomic

    key = str(step.creates)
    if is_made(step, ledger):
        print(f"prepared: {key} (already made by 'crossalign {step.command}')")
        return
    print(f"== crossalign {step.command}")
    print(step.run(step.options))
    if not step.creates.exists():
        raise CrossalignError(
            f"'crossalign {step.command}' did not write {key}; fix the step's 'creates'"
        )
    write_json_atomic(ledger, {**_ledger(ledger), key: step.command})
