"""Where a collection's tables live: ``<root>/mirror/<db>/<coll>`` and ``<root>/history/...``.

Database and collection names become one path segment each.  Bytes other than ASCII letters,
digits, ``-`` and ``_`` are percent-encoded as UTF-8 (``%2E`` for a dot, ``%25`` for ``%``),
so every name maps to exactly one directory and back on any file system, a dot can never make
``.`` or ``..`` or a hidden directory, and a collection ``a.b`` stays one segment:
``orders.2024`` -> ``orders%2E2024``, ``système`` -> ``syst%C3%A8me``.

A name whose encoding would pass :data:`MAX_SEGMENT` characters (file systems allow 255
bytes; a 100-byte name of emoji encodes to 300) becomes ``~`` and a hash of it instead; the
table then says whose it is in its Delta metadata ``name`` (``<db>.<coll>``), which
:func:`collections_of` reads back.  Case-insensitive file systems would put ``A`` and ``a``
in one directory: keep such tables on a case-sensitive one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import quote, unquote

MIRROR_DIR: Final = "mirror"
HISTORY_DIR: Final = "history"
STATE_TABLE: Final = "_mirror_state"
"""The per-collection layout's document state (the one-table mirror's rows, internal)."""
_SAFE: Final = "-_"
MAX_SEGMENT: Final = 200
_HASHED: Final = "~"  # never the start of an encoded name: quote's "~" is escaped below


def segment(name: str) -> str:
    """One database or collection name as a path segment (see the module).

    >>> segment("orders.2024"), segment("a b%"), segment("~x")
    ('orders%2E2024', 'a%20b%25', '%7Ex')
    """
    encoded = quote(name, safe=_SAFE).replace(".", "%2E").replace("~", "%7E")
    if len(encoded) <= MAX_SEGMENT:
        return encoded
    return _HASHED + hashlib.sha256(name.encode()).hexdigest()[:40]


def name_of(segment_text: str) -> str | None:
    """The name a path segment stands for (None: a hashed one, named in its table)."""
    if segment_text.startswith(_HASHED):
        return None
    return unquote(segment_text)


def full_name(db: str, coll: str) -> str:
    """The ``name`` a collection's tables carry in their Delta metadata."""
    return f"{db}.{coll}"


def table_path(root: str | Path, kind: str, db: str, coll: str) -> Path:
    """The directory of collection ``db.coll``'s table of ``kind`` (MIRROR_DIR, HISTORY_DIR)."""
    return Path(root) / kind / segment(db) / segment(coll)


def table_name(kind: str, db: str, coll: str) -> str:
    """The table's name in its commits' app transaction: its path below the root."""
    return f"{kind}/{segment(db)}/{segment(coll)}"


def collections_of(root: str | Path, kind: str, db: str | None = None) -> Iterator[tuple[str, str]]:
    """The ``(db, coll)`` of every table of ``kind`` under ``root`` (of ``db`` only if given),
    in path order."""
    base = Path(root) / kind
    databases = [base / segment(db)] if db is not None else sorted(base.glob("*"))
    for database in databases:
        if not database.is_dir():
            continue
        for collection in sorted(database.iterdir()):
            if not (collection / "_delta_log").is_dir():
                continue
            db_name, coll_name = name_of(database.name), name_of(collection.name)
            if db_name is None or coll_name is None:  # a hashed segment: the table names it
                from deltalake import DeltaTable

                named = DeltaTable(str(collection)).metadata().name or ""
                db_name, _, coll_name = named.partition(".")
            yield db_name, coll_name


def state_table(root: str | Path) -> str:
    """The table holding the documents' state under ``root``: ``_mirror_state`` in the
    per-collection layout, ``mirror`` (the one-table mirror itself) in the single one."""
    return STATE_TABLE if (Path(root) / STATE_TABLE / "_delta_log").is_dir() else MIRROR_DIR
