"""A small named registry with "did you mean" errors (objectives, evaluations, backbones)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

from crossalign.errors import CrossalignError

T = TypeVar("T")


def did_you_mean(name: str, choices: list[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Registry(Generic[T]):
    """Maps names to objects of one kind; ``get`` of an unknown name suggests the nearest."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name``; a duplicate name is a programming error."""

        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' registered twice")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        """The object registered as ``name``; raises CrossalignError naming the known ones."""
        if name not in self._items:
            raise CrossalignError(
                f"unknown {self.kind} '{name}'{did_you_mean(name, self.names())}; "
                f"known: {', '.join(self.names())}"
            )
        return self._items[name]

    def name_of(self, obj: T) -> str | None:
        """The name ``obj`` is registered under (None when it is not registered)."""
        return next((name for name, item in self._items.items() if item is obj), None)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)
