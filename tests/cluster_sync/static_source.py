"""An emulated source cluster with exactly the contents a test loads, for sync tests.

Unlike the simulated source, nothing happens on it unless the test does it: each shard's
oplog starts with one no-op at ``START`` (so a stream from T0 has history to begin at), and
collections are loaded without logging.  :func:`settle` closes everything written since
with a no-op on every shard, so the merged stream releases it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from bson.codec_options import CodecOptions, DatetimeConversion
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.emulator import EmulatedCluster
from shardstream.sim.documents import id_key

START = Timestamp(100, 1)
RAW = CodecOptions(
    document_class=RawBSONDocument, datetime_conversion=DatetimeConversion.DATETIME_AUTO
)


@contextlib.contextmanager
def static_source(shards: int = 2) -> Iterator[EmulatedCluster]:
    """A started emulated cluster whose shards' oplogs hold one no-op at ``START``."""
    with EmulatedCluster(shards=shards) as cluster:
        for shard in cluster.shards:
            shard.append({"ts": START, "op": "n", "ns": "", "o": {"msg": "initiating set"}})
            shard.set_majority(START)
        yield cluster


def settle(cluster: EmulatedCluster) -> Timestamp:
    """Append a no-op after the newest entry to every shard, committed; return its time."""
    return cluster.noop_on_every_shard(floor=START)


def contents(client: MongoClient[Any], db: str, name: str) -> dict[bytes, bytes]:
    """The raw documents of ``db.name`` read through ``client``, by ``_id`` key."""
    collection = client[db].get_collection(name, codec_options=RAW)
    return {id_key(doc["_id"]): doc.raw for doc in collection.find()}
