"""Configuration: the change-stream options a shard pipeline is built from.

Mirrors the server's ``DocumentSourceChangeStreamSpec`` (document_source_change_stream.idl)
plus the few facts that pick version-dependent behaviour (``server_version``).
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError
from shardstream.resume_token import ResumeTokenData
from shardstream.transform.namespace_filter import NamespaceFilter, pattern_list, scope_filter

DEFAULT_SERVER_VERSION: Final = (8, 2)
OLDEST_SERVER_VERSION: Final = (6, 0)
FULL_DOCUMENT_MODES: Final = ("default", "updateLookup", "whenAvailable", "required")
FULL_DOCUMENT_BEFORE_CHANGE_MODES: Final = ("off", "whenAvailable", "required")


class StreamScope(Enum):
    """What a stream watches: one collection, one database, or the whole cluster."""

    COLLECTION = "collection"
    DATABASE = "database"
    CLUSTER = "cluster"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChangeStreamOptions:
    """The options of one change stream, validated on construction.

    Attributes:
        db: the watched database; None for a cluster-wide stream.
        coll: the watched collection (needs ``db``); None for a database stream.
        include / exclude: ``DB.COLL`` patterns (``*`` wildcards) narrowing the stream to
            the namespaces an include matches and no exclude does
            (:mod:`~shardstream.transform.namespace_filter`); include needs ``db`` unset.
        show_expanded_events: also emit DDL events, ``collectionUUID``, ``operationDescription``.
        show_system_events: internal: also ``system.*`` collections and system events.
        show_migration_events: internal, mongod only: also ``fromMigrate`` entries.
        show_raw_update_description: internal: ``rawUpdateDescription`` instead of the parsed one.
        show_commit_timestamp: internal, newest servers: ``commitTimestamp`` on prepared ops.
        full_document: ``default``, ``updateLookup``, ``whenAvailable`` or ``required``.
        full_document_before_change: ``off``, ``whenAvailable`` or ``required``.
        split_large_events: end the pipeline with ``$changeStreamSplitLargeEvent``.
        resume_after / start_after: decoded token data to resume from.
        start_at_operation_time: the cluster time to start at.
        server_version: (major, minor) whose behaviour to reproduce, 6.0 or newer; a
            release line stands for its newest patch release (backports included).
        token_version: resume-token version of new events; default: the server's default.
        merged_by_router: the pipeline is a shard's half of a mongos-merged stream, so
            the internal new-shard events are kept for the merger.
    """

    db: str | None = None
    coll: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    show_expanded_events: bool = False
    show_system_events: bool = False
    show_migration_events: bool = False
    show_raw_update_description: bool = False
    show_commit_timestamp: bool = False
    full_document: str = "default"
    full_document_before_change: str = "off"
    split_large_events: bool = False
    resume_after: ResumeTokenData | None = None
    start_after: ResumeTokenData | None = None
    start_at_operation_time: Timestamp | None = None
    server_version: tuple[int, int] = DEFAULT_SERVER_VERSION
    token_version: int | None = None
    merged_by_router: bool = False

    def __post_init__(self) -> None:
        if self.coll is not None and self.db is None:
            raise ConfigurationError(f"a collection stream needs db, got coll={self.coll!r} only")
        for name in ("db", "coll"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigurationError(f"expected {name} to be a non-empty string, got {value!r}")
        # Lists become tuples (a frozen value), checked once here: every stage reads them.
        object.__setattr__(self, "include", pattern_list(self.include, "include"))
        object.__setattr__(self, "exclude", pattern_list(self.exclude, "exclude"))
        scope_filter(self.db, self.coll, self.include, self.exclude)
        starts = [
            name
            for name in ("resume_after", "start_after", "start_at_operation_time")
            if getattr(self, name) is not None
        ]
        if len(starts) > 1:
            raise ConfigurationError(f"expected at most one start option, got {starts}")
        if self.full_document not in FULL_DOCUMENT_MODES:
            raise ConfigurationError(
                f"expected full_document in {FULL_DOCUMENT_MODES}, got {self.full_document!r}"
            )
        if self.full_document_before_change not in FULL_DOCUMENT_BEFORE_CHANGE_MODES:
            raise ConfigurationError(
                f"expected full_document_before_change in {FULL_DOCUMENT_BEFORE_CHANGE_MODES}, "
                f"got {self.full_document_before_change!r}"
            )
        _check_server_version(self.server_version)
        if isinstance(self.token_version, bool) or self.token_version not in (None, 1, 2):
            raise ConfigurationError(f"expected token_version 1 or 2, got {self.token_version!r}")
        _check_start_types(self)
        if self.resume_after is not None and self.resume_after.from_invalidate:
            # The server refuses this with InvalidResumeToken (260); startAfter is the way.
            raise ConfigurationError(
                "Attempting to resume a change stream using 'resumeAfter' is not allowed from an "
                "invalidate notification (server error 260); use start_after instead"
            )
        if self.show_migration_events and self.merged_by_router:
            raise ConfigurationError(
                "Change streams on mongos may not show migration events (server error 31123): "
                "show_migration_events needs a single shard"
            )

    @property
    def scope(self) -> StreamScope:
        """Collection, database or cluster, from ``db`` and ``coll``."""
        if self.db is None:
            return StreamScope.CLUSTER
        return StreamScope.DATABASE if self.coll is None else StreamScope.COLLECTION

    @property
    def namespace_filter(self) -> NamespaceFilter | None:
        """The include / exclude patterns, parsed; None when there are none."""
        if not self.include and not self.exclude:
            return None
        return NamespaceFilter.parse(self.include, self.exclude)

    @property
    def resume_token(self) -> ResumeTokenData | None:
        """The token the stream resumes from (``resume_after`` or ``start_after``)."""
        return self.resume_after if self.resume_after is not None else self.start_after

    @property
    def default_token_version(self) -> int:
        """The version of new tokens: as requested, else 1 on 6.0 and 2 from 6.1 on."""
        if self.token_version is not None:
            return self.token_version
        return 1 if tuple(self.server_version) < (6, 1) else 2

    @property
    def wants_pre_image(self) -> bool:
        """Whether events carry ``fullDocumentBeforeChange`` (read from a lookup)."""
        return self.full_document_before_change != "off"

    @property
    def wants_post_image(self) -> bool:
        """Whether update events carry a looked-up ``fullDocument``."""
        return self.full_document != "default"

    @property
    def wants_images(self) -> bool:
        """Whether the stream reads documents besides the oplog (either image option)."""
        return self.wants_pre_image or self.wants_post_image

    def at_least(self, major: int, minor: int) -> bool:
        """Whether the emulated server is version ``major.minor`` or newer."""
        return tuple(self.server_version) >= (major, minor)

    def with_options(self, **changes: Any) -> ChangeStreamOptions:
        """Return a copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)


def _check_server_version(version: Any) -> None:
    # A release line we reproduce: behaviour after the newest one is unknown, and emulating
    # it under another number would be a silent guess.
    parts = tuple(version) if isinstance(version, tuple | list) else ()
    if len(parts) != 2 or any(isinstance(p, bool) or not isinstance(p, int) for p in parts):
        raise ConfigurationError(
            f"expected server_version as (major, minor) integers, got {version!r:.60}"
        )
    if not OLDEST_SERVER_VERSION <= parts <= DEFAULT_SERVER_VERSION:
        raise ConfigurationError(
            f"expected server_version from {_dotted(OLDEST_SERVER_VERSION)} to "
            f"{_dotted(DEFAULT_SERVER_VERSION)} (the releases reproduced), got {version!r}"
        )


def _dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _check_start_types(options: ChangeStreamOptions) -> None:
    # Decoded values only: a token document or "T,I" text here would fail later, deep in
    # the pipeline, with another library's error.
    for name in ("resume_after", "start_after"):
        value = getattr(options, name)
        if value is not None and not isinstance(value, ResumeTokenData):
            raise ConfigurationError(
                f"expected {name} as decoded ResumeTokenData (decode_token_document), got "
                f"{type(value).__name__} {value!r:.60}"
            )
    start = options.start_at_operation_time
    if start is not None and not isinstance(start, Timestamp):
        raise ConfigurationError(
            f"expected start_at_operation_time as a bson Timestamp, got "
            f"{type(start).__name__} {start!r:.60}"
        )
