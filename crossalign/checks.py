"""One-line checks of option values (config fields, objective options): a name among choices,
a number within bounds, a path, a flag.

Each raises CrossalignError naming ``where`` (``train.lr``, ``objective mlm: mask_prob``),
the value and what it must be. Booleans are never numbers here (YAML reads ``true`` as one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean

RENAMED = {
    "iterative": "eq9-literal",
    "--joint": "--encoding tlm",
    "--separate": "--encoding separate",
}
"""Option values and flags of earlier versions and what they are called now."""


def renamed_hint(value: object) -> str:
    """`` ('X' is now called 'Y')`` for a renamed option value or flag, else ``""``."""
    new = RENAMED.get(value) if isinstance(value, str) else None
    return f" ('{value}' is now called '{new}')" if new else ""


def choice_hint(value: object, choices: Sequence[str]) -> str:
    """What to say after an unknown choice: its new name when it was renamed to one of
    ``choices``, else "did you mean" the nearest choice."""
    new = RENAMED.get(value) if isinstance(value, str) else None
    if new is not None and new.split()[0] in choices:
        return renamed_hint(value)
    return did_you_mean(str(value), [str(c) for c in choices])


def check_choice(where: str, value: object, choices: Sequence[str]) -> None:
    """Raise unless ``value`` is one of ``choices``: ``<where> 'x' is unknown (did you mean
    'y'?); choose a or b`` (``one of a, b, c`` for more than two; a renamed value gets its
    new name instead of "did you mean")."""
    if isinstance(value, str) and value in choices:
        return
    listed = " or ".join(choices) if len(choices) == 2 else "one of " + ", ".join(choices)
    raise CrossalignError(
        f"{where} '{value}' is unknown{choice_hint(value, choices)}; choose {listed}"
    )


def _bounds(
    low: float | None, high: float | None, low_open: bool = False, high_open: bool = False
) -> str:
    """``in (0, 1]``, ``>= 1``, ``> 0`` or ``<= 5``: the range a value must lie in."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    return f"{'<' if high_open else '<='} {high}"


def check_range(
    where: str,
    value: object,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> None:
    """Raise unless ``value`` is a finite number (an int when ``integer``; never a bool) with
    ``low <= value <= high`` (strict at an open end; None: unbounded), e.g.
    ``train.lr=-1.0 must be > 0`` or ``objective mlm: mask_prob='abc' must be a finite number
    in [0, 1]``."""
    bounds = _bounds(low, high, low_open, high_open)
    numeric = (int,) if integer else (int, float)
    finite = not isinstance(value, float) or math.isfinite(value)
    if isinstance(value, bool) or not isinstance(value, numeric) or not finite:
        kind = "an integer" if integer else "a finite number"
        raise CrossalignError(f"{where}={value!r} must be {kind} {bounds}")
    above = low is None or (value > low if low_open else value >= low)
    below = high is None or (value < high if high_open else value <= high)
    if not (above and below):
        raise CrossalignError(f"{where}={value!r} must be {bounds}")


def check_path(where: str, value: object) -> None:
    """Raise unless ``value`` is a file or directory name: a string (YAML reads ``5`` as an
    int)."""
    if not isinstance(value, str):
        raise CrossalignError(f"{where}={value!r} must be a path (a string)")


def check_flag(where: str, value: object) -> None:
    """Raise unless ``value`` is true or false (not a string or number that reads as one)."""
    if not isinstance(value, bool):
        raise CrossalignError(f"{where}={value!r} must be true or false")
