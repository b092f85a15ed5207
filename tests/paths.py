"""The one oracle of the two implementations: run the same input on either path.

shardstream has two implementations of one behaviour: the reference path (dict entries
through :class:`ShardPipeline`, :class:`ShardReader` and the merge) and the fast path
(the server's BSON through :class:`FastShardPipeline`, :class:`FastShardReader` and
encoded events).  A test that takes the ``path`` fixture (tests/conftest.py) gets an
:class:`OnPath` and runs its input through ``path.transform``, ``path.merge`` or
``path.watch``: written once against the reference's expected values, it checks the
fast path too.

Where the fast path does not apply (options it leaves to the reference, see
``fast_path_applies``), the fast run still runs what a user of the fast path runs:
the :class:`FastShardPipeline` that hands every entry to the reference, or the
reference readers that ``watch()`` picks; its output is then equal by construction.

The helpers below :class:`OnPath` compare the two paths directly, byte for byte
(one shard's run) or step by step (a stream's events and resume tokens).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import bson
from bson.timestamp import Timestamp

import shardstream
from shardstream.change_stream import ChangeStream
from shardstream.errors import ShardstreamError
from shardstream.merger import MergedStream, TopologyBatch
from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.raw.shard_reader import reads_fast
from shardstream.merger.topology import TopologySource
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS, RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.source import OplogBatch, OplogSource
from shardstream.resume_token import decode_token_document
from shardstream.transform import ChangeEvent, ChangeStreamOptions, DocumentLookup, transform_oplog
from shardstream.transform.field_list import FieldList
from shardstream.transform.raw.event_writer import encode_event_document
from shardstream.transform.raw.pipeline import FastShardPipeline
from shardstream.transform.stages.unwind_transaction import TransactionHistory

REFERENCE: Final = "reference"
FAST: Final = "fast"


@dataclasses.dataclass(frozen=True)
class OnPath:
    """One of the two paths, as the ``path`` fixture hands it to a test."""

    name: str

    @property
    def fast(self) -> bool:
        """True on the fast path."""
        return self.name == FAST

    def transform(
        self,
        entries: Iterable[Mapping[str, Any]],
        options: ChangeStreamOptions,
        *,
        history: TransactionHistory | None = None,
        lookup: DocumentLookup | None = None,
    ) -> list[ChangeEvent]:
        """One shard's (or replica set's) stream of ``entries``, as ``transform_oplog`` gives it.

        The fast path reads the entries as an oplog.bson file holds them, as a BSON replay
        does (:class:`FastShardPipeline`, ``single_shard``), and its events are decoded as
        the live merge decodes them (:class:`EncodedEvent`).  It takes no lookup: a stream
        with images is the reference's alone (``watch()`` and the replay pick it).

        Raises what the path raises (the events before the error are lost, as they are
        from ``list(transform_oplog(...))``).
        """
        if not self.fast or lookup is not None:
            return list(transform_oplog(entries, options, history=history, lookup=lookup))
        pipeline = FastShardPipeline(options, history=history)
        keys: list[bytes] = []
        raws: list[bytes] = []
        pipeline.process_batch(as_read_from_file(entries), keys, raws)
        events: list[ChangeEvent] = []
        for key, raw in zip(keys, raws, strict=True):
            event = EncodedEvent(raw, key, "")
            event.shard = None  # as transform_oplog's: no merged stream, no shard
            events.append(event)
        return events

    def source(self, source: OplogSource, options: ChangeStreamOptions) -> OplogSource:
        """``source`` as a merge on this path reads it for a stream with ``options``.

        On the fast path: its entries as the server's BSON (:class:`RoundTrip`), when the
        options let a :class:`FastShardReader` read them; else the source as it is.
        """
        if self.fast and reads_fast(options):
            return RoundTrip(source, raw=True)
        return source

    def merge(
        self,
        sources: Mapping[str, OplogSource],
        options: ChangeStreamOptions,
        *,
        topology: TopologySource | None = None,
        **kwargs: Any,
    ) -> MergedStream:
        """``MergedStream(sources, options, ...)`` on this path.

        Shards added through ``topology`` are opened on this path too.
        """
        on_path = {name: self.source(source, options) for name, source in sources.items()}
        if topology is not None and self.fast:
            topology = _OpenedOnPath(topology, lambda source: self.source(source, options))
        return MergedStream(on_path, options, topology=topology, **kwargs)

    def watch(self, source: Any, **kwargs: Any) -> ChangeStream:
        """``shardstream.watch(source, ...)`` on this path.

        A cluster (URI or client): ``fast_path`` says which.  Shard sources (files, the
        simulator): on the fast path they deliver raw entries when the stream's options
        let the fast readers read them, as a live cluster's tailers would.
        """
        if isinstance(source, Mapping):
            if self.fast and reads_fast(_watch_options(kwargs)):
                source = {name: RoundTrip(shard, raw=True) for name, shard in source.items()}
            return shardstream.watch(source, **kwargs)
        return shardstream.watch(source, fast_path=self.fast, **kwargs)


PATHS: Final = (OnPath(REFERENCE), OnPath(FAST))


class RoundTrip:
    """``source`` with its entries re-read from their BSON, as a tailer decodes them.

    ``raw``: as ``RawBSONDocument`` s, which the fast path reads (``raw_entries``).
    """

    def __init__(self, source: OplogSource, *, raw: bool = False) -> None:
        self.source = source
        self.raw_entries = raw
        self.verifies_history = getattr(source, "verifies_history", False)

    @property
    def name(self) -> str:
        return self.source.name

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        batch = self.source.next_batch(max_entries)
        if batch is None:
            return None
        options = RAW_OPLOG_CODEC_OPTIONS if self.raw_entries else OPLOG_CODEC_OPTIONS
        entries = [bson.decode(bson.encode(entry), options) for entry in batch.entries]
        return OplogBatch(entries, batch.promise, batch.exhausted)

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        entry = self.source.fetch_entry(ts)
        return None if entry is None else bson.decode(bson.encode(entry), OPLOG_CODEC_OPTIONS)

    def close(self) -> None:
        self.source.close()


class _OpenedOnPath:
    """``topology`` with the shards it adds opened through ``on_path``."""

    def __init__(
        self, topology: TopologySource, on_path: Callable[[OplogSource], OplogSource]
    ) -> None:
        self._topology = topology
        self._on_path = on_path

    def next_batch(self) -> TopologyBatch | None:
        batch = self._topology.next_batch()
        if batch is None:
            return None
        changes = [
            change
            if change.open_source is None
            else dataclasses.replace(change, open_source=self._opener(change.open_source))
            for change in batch.changes
        ]
        return dataclasses.replace(batch, changes=changes)

    def _opener(self, open_source: Callable[[], OplogSource]) -> Callable[[], OplogSource]:
        return lambda: self._on_path(open_source())

    def close(self) -> None:
        close = getattr(self._topology, "close", None)
        if close is not None:
            close()


class _NoEntries:
    """A shard that is never read: for :func:`_watch_options`."""

    name = "options"

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        raise AssertionError("never read")

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        raise AssertionError("never read")

    def close(self) -> None:
        pass


def _watch_options(kwargs: Mapping[str, Any]) -> ChangeStreamOptions:
    """The options ``watch(..., **kwargs)`` gives its merge (its errors, if they are wrong)."""
    stream = shardstream.watch({"options": _NoEntries()}, **kwargs)
    options: ChangeStreamOptions = stream._merged._options
    return options


# One shard's run, byte for byte: (sort keys, events, "Error: message" or None).
Run = tuple[list[bytes], list[bytes], str | None]


def as_read_from_file(entries: Iterable[Mapping[str, Any]]) -> list[bytes]:
    """The entries as an oplog.bson file holds them."""
    return [bson.encode(entry) for entry in entries]


def reference_run(docs: Sequence[bytes], options: ChangeStreamOptions) -> Run:
    """The reference pipeline's events as BSON, with their sort keys and any error.

    The entries are decoded as the file reader decodes them.
    """
    entries = (bson.decode(doc, codec_options=OPLOG_CODEC_OPTIONS) for doc in docs)
    keys: list[bytes] = []
    events: list[bytes] = []
    try:
        for event in transform_oplog(entries, options):
            keys.append(event.token.data.encode())
            events.append(encode_event_document(event.document))
    except ShardstreamError as exc:
        return keys, events, f"{type(exc).__name__}: {exc}"
    return keys, events, None


def fast_run(docs: Sequence[bytes], options: ChangeStreamOptions) -> tuple[Run, FastShardPipeline]:
    """The fast path's output for the same entries, and its pipeline (for its counters)."""
    pipeline = FastShardPipeline(options)
    keys: list[bytes] = []
    events: list[bytes] = []
    try:
        pipeline.process_batch(list(docs), keys, events)
    except ShardstreamError as exc:
        return (keys, events, f"{type(exc).__name__}: {exc}"), pipeline
    return (keys, events, None), pipeline


def strict(value: Any) -> Any:
    """``value`` with every type spelled out, so == also compares types and field order."""
    if isinstance(value, FieldList):
        return ("FieldList", [(name, strict(item)) for name, item in value.items()])
    if isinstance(value, Mapping):
        return (type(value).__name__, [(name, strict(item)) for name, item in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [strict(item) for item in value])
    return (type(value).__name__, repr(value))


def drain(stream: ChangeStream, until: Timestamp, timeout: float = 20.0) -> list[Any]:
    """Every event, with the stream's resume token after it, until the stream is past ``until``.

    Ends when a try_next finds nothing and the resume token's time is at least ``until``,
    or when the stream ends (an invalidate).
    """
    steps: list[Any] = []
    deadline = time.monotonic() + timeout
    while stream.alive:
        assert time.monotonic() < deadline, f"only {len(steps)} events before the deadline"
        event = stream.try_next()
        token = stream.resume_token
        if event is not None:
            steps.append((event, token))
            continue
        if token is not None and decode_token_document(token).cluster_time >= until:
            break
    return steps


def assert_same_steps(fast: list[Any], reference: list[Any]) -> None:
    """Same events (types, order, BSON bytes) and the same resume token after each."""
    assert len(fast) == len(reference)
    for (event, token), (expected, expected_token) in zip(fast, reference, strict=True):
        assert strict(event) == strict(expected)
        assert encode_event_document(event) == encode_event_document(expected)
        assert token == expected_token
