"""``report.html``: the report's Markdown as one self-contained page (figures inlined as
base64 ``data:`` URIs, the style inline; nothing is fetched from elsewhere).

The Markdown (the report's, and any extra section's) is CommonMark with GitHub pipe tables,
parsed by markdown-it-py with raw HTML and links off (``<`` and ``[text](url)`` are text).
Every image must be a file under the report directory; an image alone in its paragraph
becomes a ``<figure>`` captioned by its alt text."""

from __future__ import annotations

import base64
import html
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em;
       color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
code, pre { background: #f3f3f3; font-size: 0.92em; }
pre { padding: 0.6em; overflow-x: auto; }
figure { margin: 0.5em 0 1.5em; }
img { max-width: 100%; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{body}
</body>
</html>
"""


def data_uri(src: str, base: Path) -> str:
    """The file ``src`` under ``base`` as a base64 ``data:`` URI; any other source is a
    programming error (the page fetches nothing)."""
    root = base.resolve()
    path = (root / unquote(src)).resolve()
    if not path.is_file() or not path.is_relative_to(root):
        raise ValueError(f"image {src!r} is not a file under {base}")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    """markdown-it's ``<img>``, followed by a ``<figcaption>`` for a figure's image."""
    img = self.image(tokens, idx, options, env)
    if not tokens[idx].meta.get("figure"):
        return img
    caption = self.renderInline(tokens[idx].children or [], options, env)
    return f"{img}<figcaption>{caption}</figcaption>"


MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["link", "autolink"])
MARKDOWN.add_render_rule("image", _image)


def body(markdown: str, base: Path) -> str:
    """The HTML of ``markdown``: markdown-it's rendering, each image's ``src`` replaced by
    the ``data:`` URI of its file under ``base``, a lone image in a paragraph a figure."""
    tokens = MARKDOWN.parse(markdown)
    for i, token in enumerate(tokens):
        for child in token.children or []:
            if child.type == "image":
                child.attrSet("src", data_uri(str(child.attrGet("src")), base))
        children, parent = token.children or [], tokens[i - 1]
        if [c.type for c in children] == ["image"] and parent.tag == "p" and not parent.hidden:
            parent.tag = tokens[i + 1].tag = "figure"
            children[0].meta["figure"] = True
    return MARKDOWN.renderer.render(tokens, MARKDOWN.options, {})


def render(markdown: str, base: Path, title: str) -> str:
    """The self-contained page for ``markdown`` (figures read from under ``base``)."""
    return TEMPLATE.format(title=html.escape(title), style=STYLE, body=body(markdown, base))
