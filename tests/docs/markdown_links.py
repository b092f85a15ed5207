"""Relative links in Markdown pages, and whether each one leads somewhere.

A link is ``[text](path)``, ``[text](path#anchor)`` or ``[text](#anchor)`` outside code
(fenced blocks and inline code spans hold examples, not links).  ``path`` is relative to
the page's directory (``/path`` to the repository's root) and must name a file or a
directory; an anchor into a Markdown page must be one of its headings' anchors, made as
GitHub makes them (:func:`github_slug`), or an ``<a id=...>``/``<a name=...>`` of the page.
Links with a scheme (``http:``, ``https:``, ``mailto:``) are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import unquote

from tests.docs.example_blocks import code_blocks

_EXTERNAL: Final = re.compile(r"^(?:https?://|mailto:)", re.IGNORECASE)
_INLINE_CODE: Final = re.compile(r"(`+)(?:.+?)\1")
_INLINE_CODE_PARTS: Final = re.compile(r"`+(.+?)`+")  # split() keeps each span's content
# [text](target "title"): the text may hold one level of brackets (an image's [alt]).
_LINK: Final = re.compile(
    r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?(?P<target>[^()\s<>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_HEADING: Final = re.compile(r"^ {0,3}#{1,6}(?:\s+(?P<text>.*?))?(?:\s+#+)?\s*$")
_HTML_ANCHOR: Final = re.compile(r"<a\s[^>]*?\b(?:id|name)=\"(?P<anchor>[^\"]+)\"")
_SLUG_DROPPED: Final = re.compile(r"[^\w\- ]")  # \w keeps letters, digits and "_"


@dataclass(frozen=True)
class Link:
    """One link of a page: its line (1-based) and its target as written."""

    line: int
    target: str


def prose_lines(text: str) -> list[tuple[int, str]]:
    """Each line outside fenced code blocks, numbered from 1."""
    in_code: set[int] = set()
    for block in code_blocks(text):
        in_code.update(range(block.line, block.end + 1))
    return [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if number not in in_code
    ]


def page_links(text: str) -> list[Link]:
    """The links of a page that point into the repository (no scheme), in page order."""
    return [
        Link(number, match["target"])
        for number, line in prose_lines(text)
        for match in _LINK.finditer(_INLINE_CODE.sub(" ", line))
        if match["target"] and not _EXTERNAL.match(match["target"])
    ]


def github_slug(heading: str, seen: dict[str, int]) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-``/``_`` dropped,
    each space a ``-``; a repeat gets ``-1``, ``-2``, ... (``seen`` counts per page)."""
    base = _SLUG_DROPPED.sub("", heading.strip().lower()).replace(" ", "-")
    slug = base
    while slug in seen:
        seen[base] += 1
        slug = f"{base}-{seen[base]}"
    seen[slug] = 0
    return slug


def page_anchors(text: str) -> set[str]:
    """Every anchor a page has: its headings' slugs and its HTML anchors."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for _number, line in prose_lines(text):
        heading = _HEADING.match(line)
        if heading is not None:
            anchors.add(github_slug(_rendered(heading["text"] or ""), seen))
        anchors.update(match["anchor"] for match in _HTML_ANCHOR.finditer(line))
    return anchors


def broken_links(pages: Iterable[Path], root: Path) -> list[str]:
    """``page:line -> target (why)`` for each link of ``pages`` that leads nowhere."""
    broken: list[str] = []
    anchors: dict[Path, set[str]] = {}
    for page in pages:
        name = page.relative_to(root).as_posix()
        for link in page_links(page.read_text()):
            path, _, anchor = link.target.partition("#")
            target = page if not path else _resolve(unquote(path), page, root)
            why = None
            if not target.exists():
                why = "no such file or directory"
            elif anchor and target.suffix == ".md" and target.is_file():
                if target not in anchors:
                    anchors[target] = page_anchors(target.read_text())
                if unquote(anchor) not in anchors[target]:
                    why = f"no heading with the anchor #{anchor}"
            if why is not None:
                broken.append(f"{name}:{link.line} -> {link.target} ({why})")
    return broken


def _resolve(path: str, page: Path, root: Path) -> Path:
    return root / path.lstrip("/") if path.startswith("/") else page.parent / path


def _rendered(heading: str) -> str:
    """A heading's text as shown: a link or image by its text, HTML tags left out (but
    not from inline code, which shows them as written)."""
    shown: list[str] = []
    for position, part in enumerate(_INLINE_CODE_PARTS.split(heading)):
        if position % 2:  # inside a code span
            shown.append(part)
        else:
            part = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", part)
            shown.append(re.sub(r"<[^>]+>", "", part))
    return "".join(shown)
