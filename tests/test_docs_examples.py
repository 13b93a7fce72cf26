"""The documentation's examples run, and its relative links resolve.

A fenced ``bash`` block right after a line ``<!-- runnable -->`` in README.md or a page under
docs/ is run with bash in an empty temporary directory holding links to the repository's
``configs/`` and ``tests/``, with ``crossalign`` the command of this interpreter (see
docs/contributing.md, "Runnable examples"). Only the command line is exercised, so the
examples hold whatever the package's modules are called.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = "<!-- runnable -->"
LINKED = ("configs", "tests")  # what a runnable block may read, as from the repository root


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
    """(line number, info string, body) of every top-level fenced code block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        match = re.match(r"(`{3,}|~{3,})(.*)$", lines[i])
        if not match:
            i += 1
            continue
        fence, start, body = match.group(1), i, []
        i += 1
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        blocks.append((start + 1, match.group(2).strip(), "\n".join(body)))
        i += 1
    return blocks


def runnable_blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for line_no, info, body in fenced_blocks(text):
            before = [x for x in lines[: line_no - 1] if x.strip()]
            if before and before[-1].strip() == MARKER:
                assert info == "bash", f"{path}:{line_no}: a runnable block must be ```bash"
                found.append((f"{path.relative_to(ROOT)}:{line_no}", body))
    return found


RUNNABLE = runnable_blocks()


def test_there_are_runnable_examples():
    assert RUNNABLE, f"no block marked {MARKER} in README.md or docs/"


@pytest.mark.parametrize("body", [b for _, b in RUNNABLE], ids=[w for w, _ in RUNNABLE])
def test_runnable_example(body: str, tmp_path: Path):
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    script = f'crossalign() {{ "$CROSSALIGN_PYTHON" -m crossalign "$@"; }}\n{body}\n'
    env = {
        **os.environ,
        "CROSSALIGN_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "CROSSALIGN_CACHE": str(tmp_path / ".cache"),
        "OMP_NUM_THREADS": "1",
    }
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


# --- links ------------------------------------------------------------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str, code_spans: bool = False) -> str:
    """The text outside fenced and indented code blocks, and outside inline code spans unless
    ``code_spans``."""
    out, fence = [], None
    for line in text.splitlines():
        match = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None and not line.startswith("    "):
            out.append(line if code_spans else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def anchors(path: Path) -> set[str]:
    """Heading ids as GitHub and MkDocs (Python-Markdown's toc) write them."""
    ids = set()
    for line in prose(path.read_text(encoding="utf-8"), code_spans=True).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).replace("`", "").strip()
        ids.add(re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"))  # GitHub
        ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
        ids.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_title).strip().lower()))
    return ids


def relative_links() -> list[tuple[Path, str]]:
    links = []
    for path in DOCS:
        for target in LINK.findall(prose(path.read_text(encoding="utf-8"))):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto:, ...
                links.append((path, target))
    return links


def test_relative_links_resolve():
    broken = []
    for path, target in relative_links():
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}: {target}"
        if not dest.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where} (no heading with this id)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_is_a_landing_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250
