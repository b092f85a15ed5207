"""What the bench modes share: the URI helpers and the end-of-run fence.

Kept apart so that the live modes' modules import downward only: ``live`` -> ``latency_report``
-> ``common`` and ``latency`` -> ``tail`` -> ``common``, with no circle among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError

from shardstream.errors import ShardstreamError
from shardstream.oplog.redaction import password_of, redact_text


@dataclass(frozen=True)
class Fence:
    """The end of a run: the cluster time after the last write, and the write window."""

    cluster_time: Timestamp
    t_open: float
    t_end: float
    expected: int  # documents written with t_open <= sent < t_end


def error_text(exc: BaseException, uri: str) -> str:
    """A one-line, redacted message for ``exc`` (a server error: its code and errmsg)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OperationFailure) and exc.details:
        text = f"{exc.details.get('codeName')} ({exc.code}): {exc.details.get('errmsg')}"
    return redact_text(text, password_of(uri))


def open_client(uri: str) -> MongoClient[Any]:
    """A client of ``uri``; a URI pymongo refuses is a redacted ShardstreamError."""
    try:
        return MongoClient(uri)
    except PyMongoError as exc:
        raise ShardstreamError(f"bad --uri: {error_text(exc, uri)}") from exc


def cluster_time(client: MongoClient[Any]) -> Timestamp:
    """The cluster's time now, as mongos reports it (``operationTime`` of a ``hello``)."""
    reply = client.admin.command("hello")
    now = reply.get("operationTime") or reply.get("$clusterTime", {}).get("clusterTime")
    if not isinstance(now, Timestamp):
        raise ShardstreamError(f"expected mongos to report operationTime, got {now!r:.80}")
    return now
