"""Typed dataclasses from plain YAML data: key and type checks with "did you mean", ``key=value``
overrides parsed as YAML, and a YAML reader that refuses duplicate keys. Used by the run config,
evaluation options and study files."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Hashable
from typing import Any

import yaml

from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean


def build_dataclass(cls: Any, raw: Any, where: str = "") -> Any:
    """Build dataclass ``cls`` (or a typed container) from plain YAML data, checking keys and
    types; an unknown key names the nearest known one. A dataclass with a class attribute
    ``EXTRA_KEYS = "field"`` collects unknown keys into that mapping field instead."""
    origin = typing.get_origin(cls)
    if dataclasses.is_dataclass(cls):
        if isinstance(raw, cls):
            return raw
        if not isinstance(raw, dict):
            raise CrossalignError(f"{where or 'config'} must be a mapping, got {raw!r}")
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs = {}
        extra = {}
        for key, value in raw.items():
            if key not in names:
                if getattr(cls, "EXTRA_KEYS", None):
                    extra[key] = value
                    continue
                path = f"{where}.{key}" if where else key
                raise CrossalignError(
                    f"unknown config key '{path}'{did_you_mean(str(key), names)}; "
                    f"valid keys{' under ' + where if where else ''}: {', '.join(names)}"
                )
            kwargs[key] = build_dataclass(hints[key], value, f"{where}.{key}" if where else key)
        if extra:
            into = cls.EXTRA_KEYS
            twice = sorted(set(extra) & set(kwargs.get(into, {})))
            if twice:
                raise CrossalignError(
                    f"{where}: option '{twice[0]}' is given twice, in {into} and beside it"
                )
            kwargs[into] = {**kwargs.get(into, {}), **extra}
        for f in dataclasses.fields(cls):
            required = dataclasses.MISSING is f.default and dataclasses.MISSING is f.default_factory
            if required and f.name not in kwargs:
                raise CrossalignError(f"{where or 'config'}: required key '{f.name}' is missing")
        return cls(**kwargs)
    if origin is list:
        (item,) = typing.get_args(cls)
        if not isinstance(raw, list):
            raise CrossalignError(f"{where} must be a list, got {raw!r}")
        return [build_dataclass(item, v, f"{where}.{i}") for i, v in enumerate(raw)]
    if origin is tuple:
        items = typing.get_args(cls)
        if len(items) == 2 and items[1] is Ellipsis:
            if not isinstance(raw, (list, tuple)):
                raise CrossalignError(f"{where} must be a list, got {raw!r}")
            return tuple(build_dataclass(items[0], v, f"{where}.{i}") for i, v in enumerate(raw))
        if not isinstance(raw, (list, tuple)) or len(raw) != len(items):
            raise CrossalignError(f"{where}={raw!r} must be a list of {len(items)} values")
        return tuple(
            build_dataclass(t, v, f"{where}.{i}") for i, (t, v) in enumerate(zip(items, raw))
        )
    if origin is dict:
        if not isinstance(raw, dict):
            raise CrossalignError(f"{where} must be a mapping, got {raw!r}")
        for key in raw:
            if not isinstance(key, str):
                raise CrossalignError(
                    f"{where}: key {key!r} is not a string; quote it in YAML (unquoted no, off, "
                    f"yes, on, true, false and numbers are not strings)"
                )
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None:
            return None
        # ``float | str``: the first type that takes the value; else the first one's error
        errors = []
        for arg in (a for a in typing.get_args(cls) if a is not type(None)):
            try:
                return build_dataclass(arg, raw, where)
            except CrossalignError as e:
                errors.append(e)
        raise errors[0] from None
    if cls is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if cls is float and isinstance(raw, str):
        # YAML 1.1 reads exponents without a dot ("5e-5") as strings.
        try:
            return float(raw)
        except ValueError:
            pass
    if cls in (int, float, str, bool):
        # bool is a subclass of int: true is not a number, nor 1 a flag
        if isinstance(raw, cls) and (cls is bool or not isinstance(raw, bool)):
            return raw
        raise CrossalignError(
            f"{where}={raw!r} must be of type {cls.__name__}{_int_hint(cls, raw)}"
        )
    return raw


def _int_hint(cls: Any, raw: Any) -> str:
    """`` (write 1000)`` when an int field got a whole number in float notation (``1e3``)."""
    if cls is not int or isinstance(raw, bool) or not isinstance(raw, (str, float)):
        return ""
    try:
        number = float(raw)
    except ValueError:
        return ""
    return f" (write {int(number)})" if number.is_integer() else ""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    """Construct a mapping; a key given twice is a YAML error at its second occurrence."""
    lines: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base" keys may be overridden
            continue
        key = loader.construct_object(key_node)
        if isinstance(key, Hashable) and key in lines:
            raise yaml.constructor.ConstructorError(
                None, None, f"key '{key}' is given twice (first on line {lines[key]})",
                key_node.start_mark,
            )  # fmt: skip
        lines[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_yaml(text: str, what: str) -> Any:
    """``text`` parsed as YAML; an error names ``what`` and the line and column."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark, problem = getattr(e, "problem_mark", None), getattr(e, "problem", None)
        if mark is None or problem is None:
            raise CrossalignError(f"{what}: not valid YAML: {str(e).splitlines()[0]}") from None
        start = getattr(e, "context_mark", None)
        context = getattr(e, "context", None)
        if context and start:
            problem += f" ({context} at line {start.line + 1}, column {start.column + 1})"
        raise CrossalignError(
            f"{what}: not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
        ) from None


def _declared(cls: Any, key: str) -> Any:
    """The declared type of ``key`` inside a value of type ``cls``, without ``| None`` (Any
    for free-form data)."""
    if dataclasses.is_dataclass(cls):
        found = typing.get_type_hints(cls).get(key, Any)
    elif typing.get_origin(cls) in (list, tuple, dict):
        found = typing.get_args(cls)[-1]
    else:
        found = Any
    if typing.get_origin(found) in (typing.Union, types.UnionType):
        found = next(a for a in typing.get_args(found) if a is not type(None))
    return found


def apply_override(data: dict, dotted: str, root: Any) -> None:
    """Set ``a.b.c=value`` (value parsed as YAML) in nested ``data`` of dataclass ``root``;
    list items by index.

    A path through a list needs an existing index; a path below a single value (``train.steps``)
    or through a list the config does not set is refused, naming the override."""
    if "=" not in dotted:
        raise CrossalignError(f"override '{dotted}' must look like key=value, e.g. train.steps=100")
    key, value = dotted.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise CrossalignError(f"override '{dotted}': '{key}' is not a dotted key like train.steps")
    parsed = parse_yaml(value, f"override '{dotted}'") if value else ""
    node: Any = data
    cls: Any = root
    for depth, part in enumerate(parts):
        here = ".".join(parts[:depth])
        if cls in (int, float, str, bool):
            raise CrossalignError(
                f"override '{dotted}': {here} is a single {cls.__name__}, it has no key '{part}'"
            )
        if isinstance(node, list):
            if not part.isdecimal() or int(part) >= len(node):
                n = len(node)
                items = f"{n} item{'s' * (n != 1)} (0-{n - 1})" if node else "no items"
                raise CrossalignError(f"override '{dotted}': {here} has {items}, not '{part}'")
            part = int(part)
        elif not isinstance(node, dict):
            raise CrossalignError(f"override '{dotted}': {here}={node!r} has no key '{part}'")
        if depth == len(parts) - 1:
            node[part] = parsed
            return
        cls = _declared(cls, part)
        if isinstance(node, dict) and part not in node:
            if typing.get_origin(cls) in (list, tuple):
                path = ".".join(parts[: depth + 1])
                raise CrossalignError(
                    f"override '{dotted}': {path} is not set, so it has no item {parts[depth + 1]}"
                    f"; set the whole list: {path}=[...]"
                )
            node[part] = {}
        node = node[part]
