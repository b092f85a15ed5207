"""Where a collection's tables live: ``<root>/mirror/<db>/<coll>`` and ``<root>/history/...``.

Database and collection names become one path segment each.  Bytes other than ASCII letters,
digits, ``-`` and ``_`` are percent-encoded as UTF-8 (``%2E`` for a dot, ``%25`` for ``%``),
so every name maps to exactly one directory and back on any file system, a dot can never make
``.`` or ``..`` or a hidden directory, and a collection ``a.b`` stays one segment:
``orders.2024`` -> ``orders%2E2024``, ``système`` -> ``syst%C3%A8me``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote

MIRROR_DIR: Final = "mirror"
HISTORY_DIR: Final = "history"
STATE_TABLE: Final = "_mirror_state"
"""The per-collection layout's document state (the one-table mirror's rows, internal)."""
_SAFE: Final = "-_"


def segment(name: str) -> str:
    """One database or collection name as a path segment (see the module).

    >>> segment("orders.2024"), segment("a b%")
    ('orders%2E2024', 'a%20b%25')
    """
    return quote(name, safe=_SAFE).replace(".", "%2E")


def name_of(segment_text: str) -> str:
    """The name a path segment stands for (the inverse of :func:`segment`)."""
    return unquote(segment_text)


def table_path(root: str | Path, kind: str, db: str, coll: str) -> Path:
    """The directory of collection ``db.coll``'s table of ``kind`` (MIRROR_DIR, HISTORY_DIR)."""
    return Path(root) / kind / segment(db) / segment(coll)


def table_name(kind: str, db: str, coll: str) -> str:
    """The table's name in its commits' app transaction: its path below the root."""
    return f"{kind}/{segment(db)}/{segment(coll)}"


def collections_of(root: str | Path, kind: str, db: str | None = None) -> Iterator[tuple[str, str]]:
    """The ``(db, coll)`` of every table of ``kind`` under ``root`` (of ``db`` only if given),
    in name order."""
    base = Path(root) / kind
    databases = [base / segment(db)] if db is not None else sorted(base.glob("*"))
    for database in databases:
        if not database.is_dir():
            continue
        for collection in sorted(database.iterdir()):
            if (collection / "_delta_log").is_dir():
                yield name_of(database.name), name_of(collection.name)


def state_table(root: str | Path) -> str:
    """The table holding the documents' state under ``root``: ``_mirror_state`` in the
    per-collection layout, ``mirror`` (the one-table mirror itself) in the single one."""
    return STATE_TABLE if (Path(root) / STATE_TABLE / "_delta_log").is_dir() else MIRROR_DIR
