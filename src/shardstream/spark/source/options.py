"""The ``shardstream`` data source's options, parsed once into a picklable spec.

Spark hands a data source its options as a case-insensitive mapping of strings.  They are
checked here, before any query starts, so a typo fails with the expected form and what was
given, never halfway through a batch.  The spec travels (pickled) to the driver's source
runner and to every executor, so it holds plain values only: no clients, no open files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import Enum
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError
from shardstream.match.evaluator import compile_pipeline
from shardstream.oplog.file_reader import InputFormat
from shardstream.oplog.redaction import redact_uri
from shardstream.resume_token.json_input import EXTENDED_JSON_ERRORS
from shardstream.resume_token.token_json import loads
from shardstream.sim import SimulationConfig
from shardstream.spark.source.option_values import (
    byte_size_value,
    flag_value,
    integer_value,
    pattern_values,
    positive_value,
    timestamp_value,
    token_value,
)
from shardstream.transform import ChangeStreamOptions

DEFAULT_SIMULATED_SHARDS: Final = 3
DEFAULT_SIMULATED_ENTRIES: Final = 1000
DEFAULT_SIMULATED_SEED: Final = 7
DEFAULT_EVENTS_PER_PARTITION: Final = 100_000


class SourceKind(Enum):
    """Where the shards' oplogs come from."""

    LIVE = "uri"
    OPLOG = "oplog"
    SIMULATE = "simulate"


class PartitionMode(Enum):
    """How a batch is split into Spark tasks."""

    MERGED = "merged"
    PER_SHARD = "pershard"


# Every option the source accepts, as documented (Spark matches option keys case-insensitively).
OPTION_NAMES: Final = (
    "uri",
    "oplog",
    "inputFormat",
    "simulate",
    "shards",
    "entries",
    "seed",
    "db",
    "coll",
    "include",
    "exclude",
    "showExpandedEvents",
    "startAtOperationTime",
    "resumeAfter",
    "startAfter",
    "endAtOperationTime",
    "fullDocument",
    "fullDocumentBeforeChange",
    "pipeline",
    "serverVersion",
    "tokenVersion",
    "maxEventsPerTrigger",
    "maxBytesPerTrigger",
    "jsonFormat",
    "partitionMode",
    "eventsPerPartition",
)
_KNOWN: Final = frozenset(name.lower() for name in OPTION_NAMES)
# The options that say where the stream starts (lower case), and the ingest flag of each.
START_OPTION_FLAGS: Final = {
    "startatoperationtime": "--start-at-operation-time",
    "resumeafter": "--resume-after",
    "startafter": "--start-after",
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SourceSpec:
    """Everything a reader needs, parsed and validated.

    Attributes:
        kind: live cluster, oplog files or simulated cluster.
        uri: the mongos URI (live only; never printed: see :attr:`display`).
        oplog_paths: (shard name, path) per shard (oplog files only).
        input_format: bson or ejson (None: by file extension).
        simulation: the simulated cluster's configuration (simulate only).
        stream: the change-stream options: scope, start point and watch flags.
        pipeline: the user's ``$match`` stages (already checked to compile).
        end_at: events at or after this cluster time are not read (exclusive bound).
        max_events_per_trigger: the default read limit; None: all available.
        max_bytes_per_trigger: about how many bytes of events a batch holds at most, beside
            the events limit (:mod:`~shardstream.spark.source.option_values`); None: no cap.
        relaxed_json: documents as relaxed Extended JSON rather than canonical.
        partition_mode: merged (one task) or per shard.
        events_per_partition: per-shard mode: a shard's range is split every this many events.
    """

    kind: SourceKind
    uri: str | None = dataclasses.field(default=None, repr=False)
    oplog_paths: tuple[tuple[str, str], ...] = ()
    input_format: InputFormat | None = None
    simulation: SimulationConfig | None = None
    stream: ChangeStreamOptions = dataclasses.field(default_factory=ChangeStreamOptions)
    pipeline: tuple[Mapping[str, Any], ...] = ()
    end_at: Timestamp | None = None
    max_events_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    relaxed_json: bool = False
    partition_mode: PartitionMode = PartitionMode.MERGED
    events_per_partition: int = DEFAULT_EVENTS_PER_PARTITION

    @property
    def bounded(self) -> bool:
        """Whether the input ends by itself (files, a simulated run) rather than growing."""
        return self.kind is not SourceKind.LIVE

    @property
    def display(self) -> str:
        """What the source reads, for messages (credentials redacted)."""
        if self.kind is SourceKind.LIVE:
            return f"cluster {redact_uri(self.uri or '')}"
        if self.kind is SourceKind.OPLOG:
            return "oplog files " + ",".join(f"{name}={path}" for name, path in self.oplog_paths)
        config = self.simulation
        assert config is not None  # parse_options sets it for a simulated cluster
        return (
            f"simulated cluster (shards={config.shards}, entries={config.operations}, "
            f"seed={config.seed})"
        )


def parse_options(options: Mapping[str, str]) -> SourceSpec:
    """Parse the data source's options.

    Raises:
        ConfigurationError: an unknown option, a missing or conflicting input, or a
            value of the wrong form (the message names the expected form and the value).
        ResumeTokenError: a malformed ``resumeAfter`` / ``startAfter`` token.
    """
    given = {str(key).lower(): str(value) for key, value in options.items()}
    unknown = sorted(set(given) - _KNOWN)
    if unknown:
        raise ConfigurationError(
            f"expected shardstream options among {list(OPTION_NAMES)}, got unknown {unknown}"
        )
    inputs = [kind for kind in SourceKind if kind.value in given]
    if len(inputs) != 1:
        raise ConfigurationError(
            "expected exactly one of the options uri, oplog, simulate; got "
            f"{[kind.value for kind in inputs] or 'none'}"
        )
    kind = inputs[0]
    stream = _stream_options(given)
    if stream.wants_images and kind is not SourceKind.LIVE:
        raise ConfigurationError(
            "expected fullDocument / fullDocumentBeforeChange only with uri (they read documents "
            f"from a live cluster), got them with {kind.value}"
        )
    mode_text = given.get("partitionmode", "merged").lower()
    modes = {mode.value: mode for mode in PartitionMode}
    if mode_text not in modes:
        raise ConfigurationError(f"expected partitionMode merged or perShard, got {mode_text!r}")
    mode = modes[mode_text]
    if mode is PartitionMode.PER_SHARD and stream.wants_images:
        raise ConfigurationError(
            "partitionMode perShard cannot honour fullDocument / fullDocumentBeforeChange "
            "(lookups are read at read time, so shard tasks would not agree); use merged"
        )
    json_format = given.get("jsonformat", "canonical").lower()
    if json_format not in ("canonical", "relaxed"):
        raise ConfigurationError(f"expected jsonFormat canonical or relaxed, got {json_format!r}")
    pipeline = _pipeline(given.get("pipeline"))
    return SourceSpec(
        kind=kind,
        uri=_uri(given) if kind is SourceKind.LIVE else None,
        oplog_paths=_oplog_paths(given["oplog"]) if kind is SourceKind.OPLOG else (),
        input_format=_input_format(given.get("inputformat")),
        simulation=_simulation(given) if kind is SourceKind.SIMULATE else None,
        stream=stream,
        pipeline=pipeline,
        end_at=timestamp_value("endAtOperationTime", given.get("endatoperationtime")),
        max_events_per_trigger=positive_value(
            "maxEventsPerTrigger", given.get("maxeventspertrigger")
        ),
        max_bytes_per_trigger=byte_size_value(
            "maxBytesPerTrigger", given.get("maxbytespertrigger")
        ),
        relaxed_json=json_format == "relaxed",
        partition_mode=mode,
        events_per_partition=positive_value("eventsPerPartition", given.get("eventsperpartition"))
        or DEFAULT_EVENTS_PER_PARTITION,
    )


def _stream_options(given: Mapping[str, str]) -> ChangeStreamOptions:
    server_version = given.get("serverversion", "8.2")
    major, sep, minor = server_version.partition(".")
    if not sep or not major.isdigit() or not minor.isdigit():
        raise ConfigurationError(
            f"expected serverVersion as X.Y (e.g. 7.0), got {server_version!r}"
        )
    token_version = given.get("tokenversion")
    if token_version is not None and token_version not in ("1", "2"):
        raise ConfigurationError(f"expected tokenVersion 1 or 2, got {token_version!r}")
    return ChangeStreamOptions(
        db=given.get("db"),
        coll=given.get("coll"),
        include=pattern_values("include", given.get("include")),
        exclude=pattern_values("exclude", given.get("exclude")),
        show_expanded_events=flag_value("showExpandedEvents", given.get("showexpandedevents")),
        full_document=given.get("fulldocument", "default"),
        full_document_before_change=given.get("fulldocumentbeforechange", "off"),
        start_at_operation_time=timestamp_value(
            "startAtOperationTime", given.get("startatoperationtime")
        ),
        resume_after=token_value("resumeAfter", given.get("resumeafter")),
        start_after=token_value("startAfter", given.get("startafter")),
        server_version=(int(major), int(minor)),
        token_version=int(token_version) if token_version is not None else None,
    )


def _uri(given: Mapping[str, str]) -> str:
    uri = given["uri"]
    if not uri.lower().startswith(("mongodb://", "mongodb+srv://")):
        # Only the scheme is shown: redaction knows MongoDB URIs, not what else was typed.
        scheme = uri.partition("://")[0] if "://" in uri else "no scheme"
        raise ConfigurationError(
            f"expected uri to be a mongos URI (mongodb:// or mongodb+srv://), got {scheme!r:.20}"
        )
    return uri


def _oplog_paths(text: str) -> tuple[tuple[str, str], ...]:
    paths: list[tuple[str, str]] = []
    for item in text.split(","):
        name, sep, path = item.strip().partition("=")
        if not sep or not name or not path:
            raise ConfigurationError(f"expected oplog as NAME=PATH[,NAME=PATH...], got {text!r}")
        paths.append((name, path))
    names = [name for name, _ in paths]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"expected distinct shard names in oplog, got {names}")
    return tuple(paths)


def _input_format(text: str | None) -> InputFormat | None:
    if text is None:
        return None
    try:
        return InputFormat(text.lower())
    except ValueError:
        raise ConfigurationError(f"expected inputFormat bson or ejson, got {text!r}") from None


def _simulation(given: Mapping[str, str]) -> SimulationConfig:
    if not flag_value("simulate", given["simulate"]):
        raise ConfigurationError("expected simulate=true (or one of uri, oplog), got false")
    return SimulationConfig(
        shards=positive_value("shards", given.get("shards")) or DEFAULT_SIMULATED_SHARDS,
        operations=positive_value("entries", given.get("entries")) or DEFAULT_SIMULATED_ENTRIES,
        seed=integer_value("seed", given.get("seed"), DEFAULT_SIMULATED_SEED),
    )


def _pipeline(text: str | None) -> tuple[Mapping[str, Any], ...]:
    if text is None:
        return ()
    try:
        stages = loads(text)
    except EXTENDED_JSON_ERRORS as exc:  # a bad $oid, an overflowing $date... too
        raise ConfigurationError(
            f"expected pipeline as an Extended JSON array of $match stages, got {text!r:.120}"
        ) from exc
    compile_pipeline(stages)  # raises ConfigurationError for what the matcher cannot do
    return tuple(stages)
