"""A Markdown page's fenced code blocks, and the runnable examples among them.

The convention (tests/docs/test_examples.py states it for page writers): ``console`` blocks
hold ``$ `` commands with their shown output, ``python`` blocks are scripts (their shown
output in a following ``text`` block that starts with ``# output``), a line
``<!-- example: skip REASON -->`` right before a fence skips that example, and the
shell-ish info strings are refused so that no example silently goes unrun.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

# Info strings that look runnable but are not run: each must become console, python or text.
REFUSED_INFO: Final = frozenset({"", "sh", "bash", "shell", "shell-session", "pycon"})
OUTPUT_HEADER: Final = "# output"
_FENCE: Final = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DIRECTIVE: Final = re.compile(r"^<!--\s*example:(?P<body>.*?)-->$")
_SKIP: Final = re.compile(r"^skip(?:\s+(?P<reason>.*))?$")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced code block: where it opens and closes, its language, its content."""

    line: int  # the opening fence's line, 1-based
    end: int  # the closing fence's line (the page's last line when the fence never closes)
    info: str  # the info string's first word, lower case ("" when it has none)
    body: tuple[str, ...]  # the content lines, the fence's indentation removed
    before: str  # the line just above the opening fence, stripped ("" on the first line)
    closed: bool


@dataclass(frozen=True)
class Step:
    """One thing a page runs: a console command or a python script, with its shown output."""

    where: str  # "README.md:42": the command's line, or the python block's fence
    kind: Literal["console", "python"]
    source: str  # the command for bash, or the script
    shown: tuple[str, ...] | None  # None: the output is not checked


@dataclass
class PageExamples:
    """What a page's blocks amount to: steps in page order, skipped examples, mistakes."""

    steps: list[Step] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (where, reason)
    refusals: list[str] = field(default_factory=list)


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced code block of ``text`` (backticks or tildes, indented ones in lists too)."""
    lines = text.splitlines()
    blocks: list[CodeBlock] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        # A backtick fence's info string may not hold a backtick (that is inline code).
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        closed = end < len(lines)
        words = opening["info"].split()
        blocks.append(
            CodeBlock(
                line=index + 1,
                end=min(end, len(lines) - 1) + 1,
                info=words[0].lower() if words else "",
                body=tuple(_dedent(line, indent) for line in lines[index + 1 : end]),
                before=lines[index - 1].strip() if index else "",
                closed=closed,
            )
        )
        index = end + 1
    return blocks


def page_examples(text: str, name: str) -> PageExamples:
    """The steps, skips and refused blocks of the page ``name`` holding ``text``."""
    page = PageExamples()
    blocks = code_blocks(text)
    lines = text.splitlines()
    outputs = _output_blocks(blocks, lines)
    for position, block in enumerate(blocks):
        where = f"{name}:{block.line}"
        if not block.closed:
            page.refusals.append(f"{where}: the fence never closes")
        skip = _skip_reason(block, where, page.refusals)
        if block.info in REFUSED_INFO:
            shown_as = f"```{block.info}" if block.info else "a fence without an info string"
            page.refusals.append(
                f"{where}: {shown_as} is not run; write ```console (commands) or ```python "
                "(a script) for an example, ```text (or the data's language) for anything else"
            )
        elif block.info == "console":
            if skip is None:
                page.steps += _console_steps(block, name, page.refusals)
            else:
                page.skipped.append((where, skip))
        elif block.info == "python":
            output = outputs.get(position + 1)
            if skip is None:
                shown = None if output is None else _shown(output.body[1:])
                page.steps.append(Step(where, "python", "\n".join(block.body) + "\n", shown))
            else:
                page.skipped.append((where, skip))
        elif _is_output_block(block) and position not in outputs:
            page.refusals.append(f"{where}: a `{OUTPUT_HEADER}` block must follow a python block")
        elif skip is not None:
            page.refusals.append(f"{where}: the skip marker is on a block that is not an example")
    return page


def _dedent(line: str, indent: int) -> str:
    # As CommonMark: up to the opening fence's indentation is removed from each line.
    return line[min(indent, len(line) - len(line.lstrip(" "))) :]


def _is_output_block(block: CodeBlock) -> bool:
    return block.info == "text" and bool(block.body) and block.body[0].strip() == OUTPUT_HEADER


def _output_blocks(blocks: list[CodeBlock], lines: list[str]) -> dict[int, CodeBlock]:
    """The ``# output`` blocks that follow a python block with only blank lines between."""
    found: dict[int, CodeBlock] = {}
    for position, (block, after) in enumerate(itertools.pairwise(blocks)):
        between = lines[block.end : after.line - 1]
        if block.info == "python" and _is_output_block(after) and not any(map(str.strip, between)):
            found[position + 1] = after
    return found


def _skip_reason(block: CodeBlock, where: str, refusals: list[str]) -> str | None:
    """The reason of the skip marker above ``block``, if it has a valid one."""
    directive = _DIRECTIVE.match(block.before)
    if directive is None:
        return None
    skip = _SKIP.match(directive["body"].strip())
    if skip is None:
        refusals.append(
            f"{where}: expected `<!-- example: skip REASON -->` above the fence, "
            f"got {block.before!r}"
        )
        return None
    reason = (skip["reason"] or "").strip()
    if not reason:
        refusals.append(f"{where}: the skip marker gives no reason (`<!-- example: skip WHY -->`)")
        return None
    return reason


def _console_steps(block: CodeBlock, name: str, refusals: list[str]) -> list[Step]:
    """One step per ``$ `` command; the lines up to the next command are its shown output."""
    steps: list[Step] = []
    body = list(block.body)
    index = next((i for i, line in enumerate(body) if line.startswith("$ ")), len(body))
    if not index < len(body):
        refusals.append(f"{name}:{block.line}: a console block without a `$ ` command")
    elif any(map(str.strip, body[:index])):
        refusals.append(f"{name}:{block.line}: expected a `$ ` command first, got text before it")
    while index < len(body):
        where = f"{name}:{block.line + 1 + index}"
        line = body[index]
        command = [line[2:]]
        while command[-1].endswith("\\") and index + 1 < len(body):
            index += 1
            command.append(body[index])
        index += 1
        shown: list[str] = []
        while index < len(body) and not body[index].startswith("$ "):
            shown.append(body[index])
            index += 1
        steps.append(Step(where, "console", "\n".join(command), _shown(shown)))
    return steps


def _shown(lines: Sequence[str]) -> tuple[str, ...] | None:
    """The shown output, or None when there is none to check (no line, or blank ones)."""
    return tuple(lines) if any(map(str.strip, lines)) else None
