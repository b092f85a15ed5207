"""Whether an example's actual output shows what its page says it shows.

A page shows the lines a reader should look for, not every byte: the shown non-empty lines
must appear among the actual lines in the same order, other lines may come between them,
surrounding whitespace does not count, and ``...`` inside a line stands for any text. A
line that is just ``...`` (any run of lines) is what the in-order rule already allows, so
it is only there for the reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

ELLIPSIS: Final = "..."


def line_pattern(shown: str) -> re.Pattern[str]:
    """The pattern a shown line stands for: its text, each ``...`` matching any text."""
    return re.compile(".*".join(re.escape(part) for part in shown.strip().split(ELLIPSIS)))


def first_missing_line(shown: Iterable[str], actual: str) -> str | None:
    """The first shown line not found in ``actual`` after the lines before it; None if all are.

    Matching each shown line at the first actual line it fits is enough: a later fit
    never leaves more room for the lines after it.
    """
    remaining = iter(line.strip() for line in actual.splitlines())
    for line in shown:
        if not line.strip() or line.strip() == ELLIPSIS:
            continue
        pattern = line_pattern(line)
        if not any(pattern.fullmatch(candidate) for candidate in remaining):
            return line.strip()
    return None
