"""Running one shard's oplog through the fast path and through the reference pipeline."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import bson

from shardstream.errors import ShardstreamError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.transform import ChangeStreamOptions, transform_oplog
from shardstream.transform.fast_path import FastShardPipeline
from shardstream.transform.raw_event_writer import encode_event_document

Run = tuple[list[bytes], list[bytes], str | None]  # sort keys, events, "Error: message"


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
    """The fast path's output for the same entries."""
    pipeline = FastShardPipeline(options)
    keys: list[bytes] = []
    events: list[bytes] = []
    try:
        pipeline.process_batch(list(docs), keys, events)
    except ShardstreamError as exc:
        return (keys, events, f"{type(exc).__name__}: {exc}"), pipeline
    return (keys, events, None), pipeline
