"""``report.html``: the report's Markdown as one self-contained page (figures inlined as
base64 ``data:`` URIs, the style inline; nothing is fetched from elsewhere).

It reads the Markdown the report writes, which is also what an extra section may use:
``#`` headings, paragraphs, pipe tables (with their alignment row), ``-`` lists, fenced code
blocks, an image alone on its line (a file under the report directory), ``**bold**``,
`` `code` `` and backslash escapes."""

from __future__ import annotations

import base64
import html
import mimetypes
import re
from pathlib import Path

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

_INLINE = re.compile(r"\\([\\`*|\[\]_#!-])|\*\*(.+?)\*\*|`([^`]+)`")
_HEADING = re.compile(r"(#{1,6})\s+(.*)")
_IMAGE = re.compile(r"!\[(.*)\]\(([^)\s]+)\)")
_ALIGN = {(True, False): "left", (False, True): "right", (True, True): "center"}


def inline(text: str) -> str:
    """One line of Markdown text as HTML: escapes, ``**bold**``, `` `code` ``."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos : m.start()]))
        if m.group(1) is not None:
            out.append(html.escape(m.group(1)))
        elif m.group(2) is not None:
            out.append(f"<strong>{inline(m.group(2))}</strong>")
        else:
            out.append(f"<code>{html.escape(m.group(3))}</code>")
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)]


def _table(lines: list[str]) -> str:
    rows = [_cells(line) for line in lines]
    aligns: list[str | None] = []
    if len(rows) > 1 and all(re.fullmatch(r":?-+:?", c) for c in rows[1]):
        aligns = [_ALIGN.get((c.startswith(":"), c.endswith(":"))) for c in rows[1]]
        rows = [rows[0]] + rows[2:]

    def row(cells: list[str], tag: str) -> str:
        out = []
        for i, cell in enumerate(cells):
            align = aligns[i] if i < len(aligns) else None
            style = f' style="text-align: {align}"' if align else ""
            out.append(f"<{tag}{style}>{inline(cell)}</{tag}>")
        return "<tr>" + "".join(out) + "</tr>"

    body = "\n".join(row(cells, "td") for cells in rows[1:])
    return f"<table>\n<thead>{row(rows[0], 'th')}</thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _figure(alt: str, src: str, base: Path) -> str:
    """An image file under ``base`` as an inlined ``<figure>``; any other source is a
    programming error (the page fetches nothing)."""
    root = base.resolve()
    path = (root / src).resolve()
    if not path.is_file() or not path.is_relative_to(root):
        raise ValueError(f"image {src!r} is not a file under {base}")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    caption = inline(alt)
    return (
        f'<figure><img src="data:{mime};base64,{data}" alt="{html.escape(alt)}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def _starts_block(line: str) -> bool:
    return (
        not line
        or line.startswith(("|", "- ", "```"))
        or bool(_HEADING.fullmatch(line) or _IMAGE.fullmatch(line))
    )


def body(markdown: str, base: Path) -> str:
    """The HTML of ``markdown``, images read from files under ``base``."""
    lines = [line.rstrip() for line in markdown.splitlines()]
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line:
            i += 1
            continue
        if line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
            end = len(lines) if end is None else end
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : end]))}</code></pre>")
            i = end + 1
            continue
        if heading := _HEADING.fullmatch(line):
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
            i += 1
            continue
        if image := _IMAGE.fullmatch(line):
            out.append(_figure(image.group(1), image.group(2), base))
            i += 1
            continue
        start = i
        if line.startswith(("|", "- ")):
            marker = "|" if line.startswith("|") else "- "
            while i < len(lines) and lines[i].strip().startswith(marker):
                i += 1
            block = [s.strip() for s in lines[start:i]]
            if marker == "|":
                out.append(_table(block))
            else:
                items = "".join(f"<li>{inline(s[2:])}</li>" for s in block)
                out.append(f"<ul>{items}</ul>")
            continue
        i += 1
        while i < len(lines) and not _starts_block(lines[i].strip()):
            i += 1
        out.append("<p>" + inline(" ".join(s.strip() for s in lines[start:i])) + "</p>")
    return "\n".join(out)


def render(markdown: str, base: Path, title: str) -> str:
    """The self-contained page for ``markdown`` (figures read from under ``base``)."""
    return TEMPLATE.format(title=html.escape(title), style=STYLE, body=body(markdown, base))
