"""Sync: which source namespaces are copied, and where each one lands on the target.

Scope is ``db`` (and ``coll``), or ``--include`` / ``--exclude`` patterns, as for
``watch()`` (:mod:`~shardstream.transform.namespace_filter`: ``*`` wildcards, an exclude
wins); ``--map SRC=DST`` rules rename a whole database (``shop=shop_copy``) or one
collection (``shop.orders=archive.orders``); the most specific rule wins, and a namespace no
rule names keeps its name.  The server's own databases (admin, config, local) and the
sync's checkpoint database are never in scope.  The copy, the stream's writes and DDL, and
``verify`` all ask :meth:`NamespaceMap.in_scope`, so an excluded collection is neither
copied, written nor compared.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Final

from shardstream.errors import ConfigurationError
from shardstream.transform.namespace_filter import NamespaceFilter, pattern_list, scope_filter

CHECKPOINT_DB: Final = "shardstream_sync"
_INTERNAL_DBS: Final = frozenset({"admin", "config", "local", CHECKPOINT_DB})
_DB_NAME_FORBIDDEN: Final = frozenset('/\\. "$\0')

Namespace = tuple[str, str]


def parse_map_rule(rule: str) -> tuple[str, str]:
    """``"SRC=DST"`` as a pair, both whole databases or both ``db.coll``.

    Raises:
        ConfigurationError: the rule has no ``=`` or more than one, an empty side, a name
            the server would refuse, a side among the server's databases (or the
            checkpoint database), or mixes a database with a collection.
    """
    source, sep, target = rule.partition("=")
    if not sep or not source or not target or "=" in target:
        raise ConfigurationError(
            f"expected --map SRC=DST (db=db or db.coll=db.coll, one '='), got {rule!r}"
        )
    if ("." in source) != ("." in target):
        raise ConfigurationError(
            f"expected --map to map a database to a database or a collection to a "
            f"collection, got {rule!r}"
        )
    for side, name in (("source", source), ("target", target)):
        problem = _name_problem(name)
        if problem is not None:
            raise ConfigurationError(f"expected a valid {side} in --map {rule!r}: {problem}")
    for side, name in (("from", source), ("into", target)):
        db = name.partition(".")[0]
        if db in _INTERNAL_DBS:
            raise ConfigurationError(
                f"expected --map {side} a user database, got {rule!r}: {db} is "
                + ("the sync's checkpoint database" if db == CHECKPOINT_DB else "the server's")
            )
    return source, target


def _name_problem(name: str) -> str | None:
    """Why the server would refuse ``name`` (``db`` or ``db.coll``), or None.

    The server's rules: NamespaceString::validDBName (no ``/\\. "$`` or NUL, under 64
    bytes) and NamespaceString::validCollectionName (not empty, no ``$`` or NUL); names
    under ``system.`` are the server's own.
    """
    db, dot, coll = name.partition(".")
    if not db or any(c in _DB_NAME_FORBIDDEN for c in db) or len(db.encode()) >= 64:
        return f'database name {db!r} (no /\\. "$ or NUL, 1 to 63 bytes)'
    if dot and (not coll or "$" in coll or "\0" in coll):
        return f"collection name {coll!r} (not empty, no $ or NUL)"
    if dot and coll.startswith("system."):
        return f"collection name {coll!r} (system collections are never synced)"
    return None


def _refuse_colliding_rules(rules: tuple[tuple[str, str], ...]) -> None:
    """Two rules from one source, or onto one target, are refused: the first is ambiguous,
    the second would merge two collections (or databases) into one."""
    for index, (source, target) in enumerate(rules):
        for other_source, other_target in rules[:index]:
            if source == other_source:
                raise ConfigurationError(
                    f"expected one --map per source, got {other_source}={other_target} and "
                    f"{source}={target}"
                )
            if target == other_target:
                raise ConfigurationError(
                    f"expected --map rules onto different targets, got "
                    f"{other_source}={other_target} and {source}={target}: both would land in "
                    f"{target}"
                )


@dataclasses.dataclass(frozen=True, slots=True)
class NamespaceMap:
    """The sync's scope and renaming rules.

    Attributes:
        db: only this database (None: every user database).
        coll: only this collection of ``db``.
        rules: ``(source, target)`` pairs from :func:`parse_map_rule`.
        include / exclude: ``DB.COLL`` patterns (``include`` needs ``db`` unset).
    """

    db: str | None = None
    coll: str | None = None
    rules: tuple[tuple[str, str], ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    selection: NamespaceFilter = dataclasses.field(
        init=False, repr=False, compare=False, default_factory=NamespaceFilter
    )
    # (db, coll) -> its target, or None out of scope: asked once per change event.
    _crud_targets: dict[tuple[str, str], Namespace | None] = dataclasses.field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if self.coll is not None and self.db is None:
            raise ConfigurationError("expected --db with --coll, got only --coll")
        for flag, value in (("--db", self.db), ("--coll", self.coll)):
            if value is not None and not value:
                raise ConfigurationError(f"expected a name after {flag}, got an empty value")
        _refuse_colliding_rules(self.rules)
        include = pattern_list(self.include, "--include")
        exclude = pattern_list(self.exclude, "--exclude")
        names = ("--db", "--include", "--exclude")
        selection = scope_filter(self.db, self.coll, include, exclude, names=names)
        object.__setattr__(self, "include", include)
        object.__setattr__(self, "exclude", exclude)
        object.__setattr__(self, "selection", selection)

    @classmethod
    def from_options(
        cls,
        db: str | None = None,
        coll: str | None = None,
        rules: Iterable[str] = (),
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
    ) -> NamespaceMap:
        """Build from the CLI's / API's options (``rules`` as ``"SRC=DST"`` strings)."""
        rules = pattern_list(rules, "--map")
        return cls(
            db,
            coll,
            tuple(parse_map_rule(rule) for rule in rules),
            pattern_list(include, "--include"),
            pattern_list(exclude, "--exclude"),
        )

    def described(self) -> dict[str, Any]:
        """The scope as a checkpoint stores it: what a resumed sync must be run with again
        (patterns and rules sorted: their order changes nothing)."""
        return {
            "db": self.db,
            "coll": self.coll,
            "include": sorted(self.include),
            "exclude": sorted(self.exclude),
            "map": sorted(f"{source}={target}" for source, target in self.rules),
        }

    def in_scope(self, db: str, coll: str | None = None) -> bool:
        """Whether ``db`` (and ``coll``, when given) is synced: without ``coll``, whether
        some collection of ``db`` may be."""
        if db in _INTERNAL_DBS or (coll is not None and coll.startswith("system.")):
            return False
        if coll is None:
            return self.selection.may_select_database(db)
        return self.selection.selects(db, coll)

    def crud_target(self, db: str, coll: str) -> Namespace | None:
        """Where a document of ``db.coll`` is written, or None when it is out of scope
        (:meth:`in_scope` and :meth:`target`, remembered per collection)."""
        key = (db, coll)
        try:
            return self._crud_targets[key]
        except KeyError:
            target = self.target(db, coll) if self.in_scope(db, coll) else None
            self._crud_targets[key] = target
            return target

    def whole_database(self, db: str) -> bool:
        """Whether every collection of ``db`` is in scope (a dropDatabase may drop it whole
        on the target; otherwise the target holds collections the sync must not touch)."""
        return db not in _INTERNAL_DBS and self.selection.selects_whole_database(db)

    def target(self, db: str, coll: str) -> Namespace:
        """Where source ``db.coll`` lands."""
        for source, target in self.rules:
            if source == f"{db}.{coll}":
                target_db, _, target_coll = target.partition(".")
                return target_db, target_coll
        return self.target_db(db), coll

    def target_db(self, db: str) -> str:
        """Where a source database's collections land when no collection rule names them."""
        for source, target in self.rules:
            if source == db:
                return target
        return db

    def may_hold_image(self, db: str) -> bool:
        """Whether target database ``db`` may hold part of the image of the scope.

        A cheap filter before :meth:`source_of`, which decides per collection: it spares
        listing the collections of databases the sync never writes to (the server's own,
        which a restricted user may not be allowed to list, or, with ``--db``, every
        database but the ones that database and its rules map onto).
        """
        if db in _INTERNAL_DBS:
            return False
        if self.in_scope(db) and self.target_db(db) == db:
            return True  # the database's own name (no rule sends it elsewhere)
        for source, target in self.rules:
            source_db, dot, source_coll = source.partition(".")
            if target.partition(".")[0] != db:
                continue
            if self.in_scope(source_db, source_coll) if dot else self.in_scope(source_db):
                return True
        return False

    def source_of(self, db: str, coll: str) -> Namespace | None:
        """The in-scope source namespace that lands on target ``db.coll``, if any.

        None means the target namespace is outside the image of the scope: the sync never
        writes there, so ``verify`` leaves it alone.  Candidates are tried in the order
        :meth:`target` gives rules precedence (a collection rule, a database rule, the
        unchanged name) and each is checked by mapping it forward, so a name that a more
        specific rule sends elsewhere (``shop`` under ``shop=shop_copy``) is not an image.
        The server's databases and the checkpoint database are never images, whatever a
        rule says.
        """
        if db in _INTERNAL_DBS or coll.startswith("system."):
            return None
        candidates: list[Namespace] = []
        for source, target in self.rules:
            if target == f"{db}.{coll}":
                source_db, _, source_coll = source.partition(".")
                candidates.append((source_db, source_coll))
            elif target == db:
                candidates.append((source, coll))
        candidates.append((db, coll))
        for candidate in candidates:
            if self.in_scope(*candidate) and self.target(*candidate) == (db, coll):
                return candidate
        return None

    def target_collections_of(self, db: str, known: Iterable[str]) -> list[Namespace]:
        """The target namespaces of the source collections ``known`` of ``db`` (for drops)."""
        return [self.target(db, coll) for coll in known if self.in_scope(db, coll)]
