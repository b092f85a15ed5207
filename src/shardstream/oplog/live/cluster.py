"""Open a live sharded cluster as one :class:`LiveOplogSource` per shard.

From a mongos URI (or a connected ``MongoClient``): discover the shards, pick the
start point as mongos would when none is given (its current cluster time plus one
tick, the same point on every shard), and start a tailer per shard, plus one on the
config server's oplog, where shards added and removed are recorded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.errors import ConfigurationError
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS as RAW_OPTIONS
from shardstream.oplog.live.discovery import ClusterInfo, discover_cluster
from shardstream.oplog.live.lookup import LiveDocumentLookup
from shardstream.oplog.live.process_tailer import ProcessOplogSource
from shardstream.oplog.live.tailer import LiveOplogSource
from shardstream.oplog.read_preference import check_read_preference
from shardstream.oplog.source import OplogSource

# Opens the oplog of a shard added mid-stream: (name, config.shards host, start) -> source.
ShardOpener = Callable[[str, str, Timestamp], OplogSource]
# How each shard is tailed: a thread in this process, or a child process (see design.md).
TAILERS: Final[dict[str, Callable[..., OplogSource]]] = {
    "thread": LiveOplogSource,
    "process": ProcessOplogSource,
}


@dataclasses.dataclass(slots=True)
class LiveCluster:
    """What :func:`connect_live_cluster` opened.

    Attributes:
        sources: a tailer per shard, all from ``start``.
        start: where every shard starts.
        lookup: the document lookup, when asked for.
        config_source: a tailer on the config server's oplog from ``start`` (None when
            not asked for, or when mongos would not name the config server).
        open_shard: opens a shard that joins later, with the same options.
    """

    sources: dict[str, OplogSource]
    start: Timestamp
    lookup: LiveDocumentLookup | None
    config_source: OplogSource | None
    open_shard: ShardOpener

    def close(self) -> None:
        """Close every tailer and the lookup."""
        for source in self.sources.values():
            source.close()
        if self.config_source is not None:
            self.config_source.close()
        if self.lookup is not None:
            self.lookup.close()


def connect_live_cluster(
    cluster: str | MongoClient[Any],
    *,
    start: Timestamp | None = None,
    await_ms: int = 1000,
    read_preference: str = "primary",
    client_options: Mapping[str, Any] | None = None,
    with_lookup: bool = False,
    with_config: bool = False,
    tailer: str = "thread",
    raw_entries: bool = False,
) -> LiveCluster:
    """Discover the cluster and start tailing it.

    Args:
        cluster: a mongos URI, or a MongoClient connected to mongos.
        start: where every shard starts; default: the cluster's time + 1 tick.
        await_ms: how long each tailer's getMore waits for new entries.
        read_preference: which member each tailer reads (secondaries offload primaries).
        client_options: extra MongoClient options for the shard connections.
        with_lookup: also build the lookup the image options (``fullDocument``,
            ``fullDocumentBeforeChange``) need.
        with_config: also tail the config server's oplog (the ``config.shards`` monitor).
        tailer: ``thread`` or ``process``: how each shard is tailed. The config server's
            oplog, which carries a few entries, is always tailed by a thread.
        raw_entries: the shards' tailers (not the config server's) hand out entries as
            ``RawBSONDocument`` s, for the merge's fast path.

    Raises:
        ConfigurationError: an unknown ``tailer`` or read preference.
        OplogError: the cluster cannot be reached or listed (the URI is redacted).
    """
    if tailer not in TAILERS:
        raise ConfigurationError(f"expected tailer 'thread' or 'process', got {tailer!r}")
    check_read_preference(read_preference)  # before any connection is made
    info = discover_cluster(cluster, client_options=dict(client_options or {}))
    if start is None:
        now = info.cluster_time
        start = Timestamp(now.time, now.inc + 1)

    def open_shard(
        name: str, host: str, at: Timestamp, kind: str = tailer, raw: bool = raw_entries
    ) -> OplogSource:
        uri = info.shard_from_host(name, host).uri
        if opened.lookup is not None:
            opened.lookup.add_shard(name, uri)
        raw_option: dict[str, Any] = {}
        if raw:
            raw_option = (
                {"raw_entries": True} if kind == "process" else {"codec_options": RAW_OPTIONS}
            )
        return TAILERS[kind](
            name,
            uri,
            start=at,
            await_ms=await_ms,
            read_preference=read_preference,
            client_options=client_options,
            **raw_option,
        )

    opened = LiveCluster({}, start, None, None, open_shard)
    try:
        for shard in info.shards:
            opened.sources[shard.name] = open_shard(shard.name, shard.host, start)
        if with_config and info.config is not None:
            opened.config_source = open_shard("config", info.config.host, start, "thread", False)
        if with_lookup:
            opened.lookup = _lookup(cluster, info, client_options)
    except BaseException:
        opened.close()
        raise
    return opened


def _lookup(
    cluster: str | MongoClient[Any], info: ClusterInfo, client_options: Mapping[str, Any] | None
) -> LiveDocumentLookup:
    owns = isinstance(cluster, str)
    if isinstance(cluster, str):
        mongos: MongoClient[Any] = MongoClient(cluster, **dict(client_options or {}))
    else:
        mongos = cluster
    uris = {shard.name: shard.uri for shard in info.shards}
    return LiveDocumentLookup(mongos, uris, client_options, owns_mongos=owns)
