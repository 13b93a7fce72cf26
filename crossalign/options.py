"""Options as typed dataclasses: the one schema that documents, checks and builds the options
of every command, evaluation and objective (stdlib only, torch-free).

A field declared with ``opt(...)`` carries command-line metadata (see ``opt``); its
documentation is the ``opt(help=...)`` text or the string literal under the field (the house
docstring style, read by ``field_docs``). ``build_options`` makes the dataclass from given
values and trailing ``key=value`` pairs (values read as YAML); ``command_line`` writes the flags
that give an options object back; ``add_options`` turns the fields into argparse options
(``crossalign.cli.generate.Parser`` is the CLI's parser). A field becomes ``--field-name``;
``bool`` → a switch, ``X | None`` → optional, ``list[X]``/``tuple[X, ...]`` → several values,
``tuple[X, Y]`` → two, ``Literal[...]`` → choices.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import shlex
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from crossalign.checks import choice_hint
from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean

MISSING: Any = dataclasses.MISSING
_KEY = "crossalign.options"


def opt(
    default: Any = MISSING,
    *,
    help: str = "",  # noqa: A002 (argparse's name)
    flag: str | None = None,
    short: str | None = None,
    metavar: str | None = None,
    nargs: int | str | None = None,
    const: Any = None,
    append: bool = False,
    choices: Sequence[Any] | None = None,
    parse: Callable[[str], Any] | None = None,
    exclusive: str | None = None,
    cli: bool = True,
    reads: bool = False,
) -> Any:
    """A dataclass field with command-line metadata: ``flag`` replaces ``--field-name`` (for a
    bool, ``"--on/--off"`` gives two exclusive flags), ``short`` adds e.g. ``-o``, ``parse``
    converts the text (argparse ``type``; the field's whole value), ``append`` makes a list field
    a repeatable flag, ``nargs="?"`` with ``const`` a flag whose value is optional, fields with
    the same ``exclusive`` name are mutually exclusive flags, and ``cli=False`` keeps the field
    off the command line. ``reads`` marks a field naming files or folders that must exist before
    the command runs (``read_paths``). A list default is copied per instance."""
    meta = {
        _KEY: {
            "help": help,
            "flag": flag,
            "short": short,
            "metavar": metavar,
            "nargs": nargs,
            "const": const,
            "append": append,
            "choices": tuple(choices) if choices is not None else None,
            "parse": parse,
            "exclusive": exclusive,
            "cli": cli,
            "reads": reads,
        }
    }
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def field_meta(f: dataclasses.Field) -> dict[str, Any]:
    """The ``opt`` metadata of a field (plain fields get the defaults)."""
    return f.metadata.get(_KEY) or _PLAIN


_PLAIN = opt().metadata[_KEY]
"""The metadata of a field declared without ``opt``."""


def read_paths(options: Any) -> list[tuple[str, str]]:
    """(field, path) of every file or folder the options dataclass ``options`` names for
    reading: the values of its ``opt(reads=True)`` fields (each item of a list; the ``FILE``
    of a ``KEY=FILE`` item, as a field whose metavar has ``=`` takes it)."""
    found = []
    for f in dataclasses.fields(options):
        meta = field_meta(f)
        value = getattr(options, f.name)
        if not meta["reads"] or value is None:
            continue
        keyed = "=" in str(meta["metavar"] or "")
        for item in value if isinstance(value, (list, tuple)) else [value]:
            found.append((f.name, str(item).partition("=")[2] if keyed else str(item)))
    return found


def field_default(f: dataclasses.Field) -> Any:
    """The field's default (MISSING when it has none)."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


@functools.cache
def _module_tree(filename: str) -> ast.Module | None:
    """The parsed source of a module (None when it cannot be read)."""
    try:
        with open(filename, encoding="utf-8") as f:
            return ast.parse(f.read(), filename)
    except OSError:
        return None


def field_docs(cls: type) -> dict[str, str]:
    """Field name → the string literal written under it, for ``cls`` and its dataclass bases
    (a subclass's text wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        filename = getattr(sys.modules.get(klass.__module__), "__file__", None)
        tree = _module_tree(filename) if filename else None
        if tree is None or not dataclasses.is_dataclass(klass):
            continue
        body: list[ast.stmt] = tree.body
        for part in klass.__qualname__.split("."):
            node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
            body = node.body if node else []
        for stmt, after in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(after.value.value.replace("``", "").split())
    return docs


def seed_list(text: str) -> list[int]:
    """argparse type: comma-separated seeds (``0, 1,2`` → ``[0, 1, 2]``)."""
    try:
        seeds = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        seeds = []
    if not seeds:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of seeds")
    return seeds


def unit_fraction(text: str) -> float:
    """argparse type: a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], e.g. 0.5, got '{text}'")
    return value


def optional_type(hint: Any) -> tuple[Any, bool]:
    """``X | None`` → (X, True); anything else → (hint, False)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def show_value(value: Any) -> str:
    """A value as it is written on the command line."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    if isinstance(value, (list, tuple)):
        return " ".join(show_value(v) for v in value)
    return str(value)


def flag_names(f: dataclasses.Field) -> list[str]:
    """The option strings of a field (``--field-name`` unless ``opt(flag=...)``, plus short)."""
    meta = field_meta(f)
    flags = [meta["flag"] or "--" + f.name.replace("_", "-")]
    return flags + ([meta["short"]] if meta["short"] else [])


def _coerce(f: dataclasses.Field, hint: Any, value: Any, where: str) -> Any:
    """A ``key=value`` value (parsed YAML) converted to the field's type, checked like a flag."""
    from crossalign.schema import build_dataclass

    meta = field_meta(f)
    base, optional = optional_type(hint)
    if value is None and optional:
        return None
    if meta["parse"] is not None and isinstance(value, str):
        try:
            return meta["parse"](value)
        except (ValueError, argparse.ArgumentTypeError) as e:
            raise CrossalignError(f"{where}={value!r}: {e}") from None
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in (list, tuple) and not isinstance(value, list) and meta["append"]:
        value = [value]
    choices = args if origin is typing.Literal else meta["choices"]
    if choices is not None:
        if value not in choices:
            raise CrossalignError(
                f"{where}={value!r} is not one of {', '.join(map(str, choices))}"
                f"{choice_hint(value, [str(c) for c in choices])}"
            )
        return value
    return build_dataclass(base, value, where)


def build_options(
    values: Mapping[str, Any], cls: type, overrides: Iterable[str] = (), where: str = ""
) -> Any:
    """Dataclass ``cls`` from ``values`` (field name → value, e.g. parsed flags; other keys are
    ignored), then ``key=value`` pairs (values read as YAML; an unknown key or a wrong type is
    a one-line error naming ``where`` and the nearest key). A value of None takes the field's
    default where it has one."""
    from crossalign.schema import apply_override

    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        value = values.get(name, MISSING)
        if value is MISSING or (value is None and field_default(f) is not MISSING):
            continue
        if isinstance(value, list) and typing.get_origin(optional_type(hints[name])[0]) is tuple:
            value = tuple(value)
        kwargs[name] = value
    raw: dict[str, Any] = {}
    for item in overrides:
        key = item.partition("=")[0].strip().split(".")[0]
        if key not in fields or not field_meta(fields[key])["cli"]:
            known = [n for n, f in fields.items() if field_meta(f)["cli"]]
            raise CrossalignError(
                f"{where + ': ' if where else ''}unknown option '{key}' in '{item}'"
                f"{did_you_mean(key, known)}; options: {', '.join(known)}"
            )
        apply_override(raw, item, cls)
    for key, value in raw.items():
        label = f"{where}: {key}" if where else key
        kwargs[key] = _coerce(fields[key], hints[key], value, label)
    return cls(**kwargs)


def command_line(
    prog: Sequence[str],
    obj: Any,
    fields: Sequence[str] | None = None,
    *,
    positional: Sequence[str] = (),
) -> str:
    """The shell command (``shlex``-quoted) that ``add_options`` parses back into ``obj``:
    ``prog``, the ``positional`` fields' values, then a flag per field in ``fields`` (default:
    every command-line field) whose value is not None (a False store_true flag is left out)."""
    by_name = {f.name: f for f in dataclasses.fields(obj)}
    names = list(fields) if fields is not None else list(by_name)
    names = [n for n in names if field_meta(by_name[n])["cli"]]
    words = [*prog]
    for name in positional:
        value = getattr(obj, name)
        words += [show_value(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    for name in names:
        if name in positional:
            continue
        f, value = by_name[name], getattr(obj, name)
        flag = flag_names(f)[0]
        if value is None:
            continue
        if isinstance(value, bool):
            on, _, off = flag.partition("/")
            if field_default(f) is True and not off:
                off = "--no-" + on[2:]
            words += [on] if value else ([off] if off else [])
        elif isinstance(value, (list, tuple)):
            if field_meta(f)["append"]:
                for v in value:
                    words += [flag, show_value(v)]
            elif value:
                words += [flag, *(show_value(v) for v in value)]
        else:
            words += [flag, show_value(value)]
    return shlex.join(words)


def _help(text: str, suffix: str) -> str:
    """Help text with its default ``suffix`` (unless it states its default), ``%`` escaped."""
    return (text if "(default" in text else text + suffix).strip().replace("%", "%%")


def _argument(f: dataclasses.Field, hint: Any) -> tuple[dict[str, Any], str]:
    """argparse keyword arguments of a field (action, type, nargs, choices, default; help from
    ``opt``) and the `` (default X)`` suffix of its help."""
    meta = field_meta(f)
    base, _ = optional_type(hint)
    default = field_default(f)
    kw: dict[str, Any] = {}
    origin, args = typing.get_origin(base), typing.get_args(base)
    if origin in (list, tuple) and (meta["parse"] is None or meta["append"]):
        item = args[0] if args else str
        if meta["append"]:
            kw["action"] = "append"
        elif origin is tuple and args and args[-1] is not Ellipsis:
            kw["nargs"] = len(args)
        else:
            kw["nargs"] = "+"
        base, origin, args = item, typing.get_origin(item), typing.get_args(item)
    if origin is typing.Literal:
        kw["choices"] = args
        base = type(args[0])
    if meta["choices"] is not None:
        kw["choices"] = meta["choices"]
    if meta["parse"] is not None:
        kw["type"] = meta["parse"]
    elif base is not bool and callable(base):
        kw["type"] = base
    if meta["nargs"] is not None:
        kw["nargs"] = meta["nargs"]
    if meta["const"] is not None:
        kw["const"] = meta["const"]
    if meta["metavar"]:
        kw["metavar"] = meta["metavar"]
    suffix = ""
    if base is bool and "action" not in kw and "nargs" not in kw:
        kw.pop("type", None)
        kw["action"] = argparse.BooleanOptionalAction if default is True else "store_true"
    elif default not in (MISSING, None, "", (), []):
        suffix = f" (default {show_value(default)})"
    if kw.get("action") == "append":
        default = MISSING  # argparse would append to the default; options_from fills it in
    kw["default"] = None if default is MISSING else default
    kw["help"] = _help(meta["help"], suffix)
    return kw, suffix


def add_options(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    exclude: Iterable[str] = (),
    positional: Iterable[str] = (),
) -> None:
    """Add one option per field of dataclass ``cls`` to ``parser`` (dest = field name). Fields
    in ``positional`` become positional arguments (optional when they have a default); fields
    without a default are required; ``exclude`` and ``opt(cli=False)`` fields are left out.
    Help from the string under a field is read (with ``ast``) now, or, for a parser with the
    ``LAZY_HELP`` attribute (the CLI's ``Parser``), only when it prints its help, so building
    the CLI parses no source."""
    hints = typing.get_type_hints(cls, include_extras=False)
    exclude, positional = set(exclude), list(positional)
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f in dataclasses.fields(cls):
        if f.name in exclude or not field_meta(f)["cli"]:
            continue
        kw, suffix = _argument(f, hints[f.name])
        required = field_default(f) is MISSING
        flag, exclusive = field_meta(f)["flag"], field_meta(f)["exclusive"]
        if f.name in positional:
            kw.setdefault("metavar", f.name.upper())
            if not required:
                kw["nargs"] = "*" if kw.get("nargs") == "+" else kw.get("nargs", "?")
            action = parser.add_argument(f.name, **kw)
        elif kw.get("action") == "store_true" and flag and "/" in flag:
            on, off = flag.split("/")
            group = parser.add_mutually_exclusive_group()
            action = group.add_argument(on, dest=f.name, **kw)
            default = " (the default)" if not kw["default"] else ""
            group.add_argument(off, dest=f.name, action="store_false", help=f"not {on}{default}")
        else:
            if exclusive and exclusive not in groups:
                groups[exclusive] = parser.add_mutually_exclusive_group()
            target = groups[exclusive] if exclusive else parser
            action = target.add_argument(*flag_names(f), dest=f.name, required=required, **kw)
        if not field_meta(f)["help"]:
            setattr(action, _DOC, (cls, f.name, suffix))
    if not getattr(parser, LAZY_HELP, False):
        fill_help(parser)


LAZY_HELP = "crossalign_lazy_help"
"""Attribute of a parser that reads its fields' docstrings only when it prints its help (it
calls ``fill_help`` then): building such a parser parses no source."""

_DOC = "crossalign_doc"
"""Attribute of an argparse action whose help is a field's docstring: (class, field, suffix)."""


def fill_help(parser: argparse.ArgumentParser) -> None:
    """Set the help of ``parser``'s actions that take a field's docstring."""
    for action in parser._actions:
        if source := getattr(action, _DOC, None):
            cls, name, suffix = source
            action.help = _help(field_docs(cls).get(name, ""), suffix)
            delattr(action, _DOC)
