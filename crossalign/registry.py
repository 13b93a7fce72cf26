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
    """Maps names to objects of one kind; ``get`` of an unknown name suggests the nearest.

    With ``plugins`` (an entry-point group such as ``crossalign.objectives``), installed
    packages add entries: each entry point of the group is loaded on the registry's first
    lookup and registered under its name (an entry point naming a module registers whatever
    the module registers when imported)."""

    def __init__(self, kind: str, plugins: str | None = None) -> None:
        self.kind = kind
        self.plugins = plugins
        self._items: dict[str, T] = {}
        self._plugins_loaded = plugins is None

    def _load_plugins(self) -> None:
        """Load and register the ``plugins`` entry points, once; one that fails to load is a
        one-line error naming it."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from importlib.metadata import entry_points
        from types import ModuleType

        for ep in entry_points(group=self.plugins):
            try:
                obj = ep.load()
            except Exception as e:  # any error of third-party code, reported on one line
                first = (str(e).splitlines() or [type(e).__name__])[0]
                raise CrossalignError(
                    f"{self.kind} plugin '{ep.name}' ({ep.value}, entry point group "
                    f"{self.plugins}) does not load: {first}; fix or uninstall the package "
                    f"that provides it"
                ) from None
            if ep.name not in self._items and not isinstance(obj, ModuleType):
                self._items[ep.name] = obj

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
        self._load_plugins()
        if name not in self._items:
            raise CrossalignError(
                f"unknown {self.kind} '{name}'{did_you_mean(name, self.names())}; "
                f"known: {', '.join(self.names())}"
            )
        return self._items[name]

    def name_of(self, obj: T) -> str | None:
        """The name ``obj`` is registered under (None when it is not registered)."""
        self._load_plugins()
        return next((name for name, item in self._items.items() if item is obj), None)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        self._load_plugins()
        return sorted(self._items)
