"""Models and tokenizers by Hugging Face hub id as well as by local directory.

A ``--model`` / ``model.path`` / ``tokenizer.path`` value that names an existing directory is
that directory; one that looks like a hub id (``name`` or ``org/name``: no leading ``.``, ``~``
or ``/``, at most one ``/``) is passed to ``from_pretrained`` as an id, which reads the local
Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``) and, unless ``HF_HUB_OFFLINE=1``, the hub.
"""

from __future__ import annotations

import os
from pathlib import Path

from crossalign.errors import CrossalignError


def is_hub_id(text: str) -> bool:
    """Whether ``text`` reads as a hub id rather than a path (``xlm-roberta-base``,
    ``FacebookAI/xlm-roberta-base``), whatever exists on disk."""
    parts = text.replace(os.sep, "/").split("/")
    return bool(text) and not text.startswith((".", "~", "/", os.sep)) and len(parts) <= 2


def pretrained_source(path: str | os.PathLike, key: str) -> str:
    """``path`` as ``from_pretrained`` should get it: an existing local directory, else a hub
    id. A file, or a path-like value that does not exist, is a CrossalignError naming
    ``key``."""
    text = str(path)
    local = Path(text).expanduser()
    if local.is_dir():
        return str(local)
    if local.exists():
        raise CrossalignError(f"{key} {text} is a file; give the directory save_pretrained wrote")
    if not is_hub_id(text):
        raise CrossalignError(f"{key} {text} does not exist")
    return text


def offline() -> bool:
    """Whether the hub may not be reached (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_load_error(key: str, name: str, reason: str) -> CrossalignError:
    """The one-line error for a hub id that did not load (``reason``: the library's first
    line), with the fix for working offline."""
    where = "not in the local Hugging Face cache" + (" (HF_HUB_OFFLINE=1)" if offline() else "")
    return CrossalignError(
        f"{key} {name} is not a local directory, and as a hub id it is {where} or does not load "
        f"({reason}); download it where there is network (huggingface-cli download {name}) or "
        f"give a save_pretrained directory"
    )


def cached_file(name: str, filename: str) -> Path | None:
    """The cached copy of ``filename`` of the hub model ``name`` (None when not cached)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(name, filename)
    return Path(found) if isinstance(found, str) else None
