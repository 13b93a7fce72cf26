"""A study's ``prepare`` steps: commands run once before the runs of a matrix cell that share
their output (a tokenizer, a co-occurrence matrix), recorded in ``OUT/prepared.json`` so that a
step made by the same command is not repeated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.study.spec import StudyStep, substitute


@dataclass
class PreparedStep:
    """A ``prepare`` step with its variables substituted and its command line parsed."""

    command: str
    argv: list[str]
    creates: Path
    args: Any
    """The parsed command line (its ``func`` runs it)."""


def parse_step(step: StudyStep, variables: Mapping[str, Any], where: str) -> PreparedStep:
    """``step`` with ``variables`` substituted, its command line parsed by crossalign's own
    parser (an unknown command or option is an error here, before any work)."""
    import shlex

    from crossalign.cli import build_parser

    command = substitute(step.command, variables, f"{where}.command")
    creates = Path(substitute(step.creates, variables, f"{where}.creates"))
    argv = shlex.split(command)
    if argv[:1] == ["crossalign"]:
        argv = argv[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        raise CrossalignError(
            f"{where}: '{command}' is not a crossalign command line (see the message above)"
        ) from None
    return PreparedStep(command=shlex.join(argv), argv=argv, creates=creates, args=args)


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
    status = step.args.func(step.args)
    if status:
        raise CrossalignError(f"'crossalign {step.command}' failed (exit status {status})")
    if not step.creates.exists():
        raise CrossalignError(
            f"'crossalign {step.command}' did not write {key}; fix the step's 'creates'"
        )
    write_json_atomic(ledger, {**_ledger(ledger), key: step.command})
