"""Configuration: the ``--include`` / ``--exclude`` namespace filter every command shares.

A pattern is ``DB.COLL``, split at the first dot (a database name holds none, a collection
name may), where ``*`` stands for any run of characters: ``shop.*`` is every collection of
``shop``, ``*.orders`` every ``orders``, ``shop.orders_*`` a prefix. A namespace is selected
when no include is given or one matches, and no exclude matches: an exclude always wins,
as in mongosync's filters. The literal names of ``--db`` / ``--coll`` become patterns that
match only themselves (:meth:`NamespacePattern.literal`), since a name may hold a ``*``.

Events that name no single collection follow :meth:`NamespaceFilter.selects_event`:

- a rename is selected when its old name or its new name is: the server's own rule for a
  database or collection stream (``change_stream_filter_helpers.cpp`` matches ``o.to``
  as well as ``o.renameCollection``), so a reader learns that a collection left, or
  where one came from;
- a dropDatabase (``ns`` without ``coll``) is selected when the filter can select some
  collection of that database; the drops of its collections, which the server logs
  before it, are each filtered on their own;
- an event without ``ns`` (invalidate) always is.

Pure: the transform pushes the same rules into the shards' oplog filter
(:mod:`~shardstream.transform.stages.oplog_match`), so an excluded namespace's entries are
neither transformed nor written.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from shardstream.errors import ConfigurationError

_DB_FORBIDDEN: Final = frozenset('/\\ "$\0')
_CACHE_LIMIT: Final = 4096  # namespaces remembered per filter (a cluster holds few)
_FORM: Final = (
    "DB.COLL (a database, a dot, a collection; * matches any characters, e.g. shop.* or *.orders)"
)


def _wildcard_regex(text: str, any_char: str) -> re.Pattern[str]:
    return re.compile(any_char.join(re.escape(part) for part in text.split("*")))


@dataclasses.dataclass(frozen=True, slots=True)
class NamespacePattern:
    """One parsed pattern: its text, and a regex for each of its two parts."""

    text: str
    db: re.Pattern[str]
    coll: re.Pattern[str]
    every_collection: bool  # the collection part is "*": the whole database

    @classmethod
    def parse(cls, text: Any, option: str = "include") -> NamespacePattern:
        """Parse ``DB.COLL`` with ``*`` wildcards.

        Raises:
            ConfigurationError: not a string, no dot, an empty part, a database part
                holding ``/\\ "$`` or NUL, a collection part holding ``$`` or NUL.
        """
        if not isinstance(text, str):
            raise ConfigurationError(
                f"expected {option} as {_FORM}, got {type(text).__name__} {text!r:.60}"
            )
        db, dot, coll = text.partition(".")
        problem = None
        if not dot or not db or not coll:
            problem = "a database and a collection, joined by a dot"
        elif any(c in _DB_FORBIDDEN for c in db):
            problem = 'no /\\ "$ or NUL in the database part'
        elif "$" in coll or "\0" in coll:
            problem = "no $ or NUL in the collection part"
        if problem is not None:
            raise ConfigurationError(f"expected {option} as {_FORM}, got {text!r:.80}: {problem}")
        # A database name holds no dot, so a * there never reaches into the collection.
        return cls(text, _wildcard_regex(db, "[^.]*"), _wildcard_regex(coll, ".*"), coll == "*")

    @classmethod
    def literal(cls, db: str, coll: str | None = None) -> NamespacePattern:
        """The pattern of ``--db`` (and ``--coll``): exactly that database (collection)."""
        text = f"{db}.{coll if coll is not None else '*'}"
        coll_regex = re.compile(".*" if coll is None else re.escape(coll))
        return cls(text, re.compile(re.escape(db)), coll_regex, coll is None)

    def matches(self, db: str, coll: str) -> bool:
        """Whether ``db.coll`` matches."""
        return self.db.fullmatch(db) is not None and self.coll.fullmatch(coll) is not None

    def matches_database(self, db: str) -> bool:
        """Whether some collection of ``db`` could match."""
        return self.db.fullmatch(db) is not None


class NamespaceFilter:
    """Include and exclude patterns; an exclude wins. ``selects`` is O(1) once cached.

    Args:
        include: the patterns a namespace must match one of (none: every namespace).
        exclude: the patterns a namespace must match none of.

    >>> selection = NamespaceFilter.parse(["shop.*", "*.orders"], ["shop.tmp_*"])
    >>> [selection.selects_namespace(ns) for ns in ("shop.users", "crm.orders", "shop.tmp_1")]
    [True, True, False]
    """

    __slots__ = ("_cache", "exclude", "include")

    def __init__(
        self, include: Iterable[NamespacePattern] = (), exclude: Iterable[NamespacePattern] = ()
    ) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)
        self._cache: dict[tuple[str, str], bool] = {}

    @classmethod
    def parse(
        cls,
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        *,
        names: tuple[str, str] = ("include", "exclude"),
    ) -> NamespaceFilter:
        """Parse pattern lists (``names``: what to call them in errors, e.g. the flags)."""
        return cls(
            [NamespacePattern.parse(text, names[0]) for text in pattern_list(include, names[0])],
            [NamespacePattern.parse(text, names[1]) for text in pattern_list(exclude, names[1])],
        )

    def __repr__(self) -> str:
        include = [p.text for p in self.include]
        return f"NamespaceFilter(include={include}, exclude={[p.text for p in self.exclude]})"

    def selects(self, db: str, coll: str) -> bool:
        """Whether namespace ``db.coll`` is selected."""
        key = (db, coll)
        found = self._cache.get(key)
        if found is None:
            found = (
                not self.include or any(p.matches(db, coll) for p in self.include)
            ) and not any(p.matches(db, coll) for p in self.exclude)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()  # an oplog naming endless namespaces: stay bounded
            self._cache[key] = found
        return found

    def selects_namespace(self, namespace: str) -> bool:
        """:meth:`selects` for ``"db.coll"`` text (an oplog entry's ``ns``)."""
        db, _, coll = namespace.partition(".")
        return self.selects(db, coll)

    def may_select_database(self, db: str) -> bool:
        """Whether some collection of ``db`` may be selected (a dropDatabase is shown)."""
        if self.include and not any(p.matches_database(db) for p in self.include):
            return False
        return not any(p.every_collection and p.matches_database(db) for p in self.exclude)

    def selects_whole_database(self, db: str) -> bool:
        """Whether every collection of ``db`` is selected, whatever its name."""
        if self.include and not any(
            p.every_collection and p.matches_database(db) for p in self.include
        ):
            return False
        return not any(p.matches_database(db) for p in self.exclude)

    def selects_event(self, event: Mapping[str, Any]) -> bool:
        """Whether a change event is selected (the rules in the module docstring)."""
        ns = event.get("ns")
        if not isinstance(ns, Mapping):
            return True  # invalidate: the end of the stream is never filtered
        db, coll = ns.get("db"), ns.get("coll")
        if not isinstance(db, str):
            return True  # malformed: not ours to hide
        if not isinstance(coll, str):
            return self.may_select_database(db)
        if self.selects(db, coll):
            return True
        to = event.get("to") if event.get("operationType") == "rename" else None
        if isinstance(to, Mapping) and isinstance(to.get("db"), str):
            return isinstance(to.get("coll"), str) and self.selects(to["db"], to["coll"])
        return False


def pattern_list(patterns: Iterable[str], option: str) -> tuple[str, ...]:
    """``patterns`` as a tuple, refusing one string (a list of its characters otherwise).

    Raises:
        ConfigurationError: ``patterns`` is a string, or not iterable.
    """
    if isinstance(patterns, str | bytes):
        raise ConfigurationError(
            f"expected {option} as a list of patterns, got the string {patterns!r:.60} "
            f"(write [{patterns!r:.60}])"
        )
    try:
        return tuple(patterns)
    except TypeError:
        raise ConfigurationError(
            f"expected {option} as a list of patterns, got {type(patterns).__name__}"
        ) from None


def scope_filter(
    db: str | None,
    coll: str | None,
    include: Iterable[str],
    exclude: Iterable[str],
    *,
    names: tuple[str, str, str] = ("db/coll", "include", "exclude"),
) -> NamespaceFilter:
    """The filter of a command's whole scope: ``db``/``coll`` as an include, or the includes.

    ``db`` and include patterns together are refused: a reader could take them for a union
    or for an intersection, and either guess would be wrong half the time.

    Raises:
        ConfigurationError: both given, or a malformed pattern.
    """
    parsed = NamespaceFilter.parse(include, exclude, names=names[1:])
    if db is None:
        return parsed
    if parsed.include:
        texts = [p.text for p in parsed.include]
        raise ConfigurationError(
            f"expected {names[0]} or {names[1]} patterns, not both: got {db!r} and {texts} "
            f"(for both, write each as a pattern: {names[1]} {db}.{coll or '*'})"
        )
    return NamespaceFilter([NamespacePattern.literal(db, coll)], parsed.exclude)
