"""Sync: the first contact with each cluster, and which cluster it is.

A sync that cannot reach a cluster says so in one line naming the (redacted) address and
the time it waited, instead of the driver's topology dump after its 30 s default.

A cluster's identity is what the server generates once, when the cluster is made:

- a sharded cluster's ``clusterId``, in the config server's ``config.version`` document
  (``ShardingCatalogManager::_initConfigVersion`` writes it; read through mongos);
- a replica set's ``settings.replicaSetId`` (``replSetGetConfig``), generated at
  ``replSetInitiate`` (``ReplSetConfig``'s ``replicaSetId``).

A target with the source's identity is the source, whatever the URIs look like (another
mongos, another seed list, a DNS alias): the sync would write its copy and checkpoints
into the cluster it reads. The identity is also stored with the checkpoint, so a rerun
against another source is told so rather than "the oplog no longer reaches the
checkpoint".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pymongo
from pymongo import MongoClient
from pymongo.errors import ConfigurationError as DriverConfigurationError
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.uri_parser import parse_uri

from shardstream.errors import ConfigurationError, ShardstreamError
from shardstream.oplog.redaction import redact_text, redact_uri


class SyncRefused(ConfigurationError):
    """The sync will not start as told: nothing was written (the message says why)."""


class ClusterUnreachable(ShardstreamError, ConnectionError):
    """A cluster did not answer the first contact within the connect timeout."""


def open_cluster(uri: str, role: str, timeout_s: float) -> MongoClient[Any]:
    """A client on ``uri`` that has answered a ``ping`` within ``timeout_s``.

    Args:
        uri: the cluster's URI.
        role: ``source`` or ``target``, for the message.
        timeout_s: how long the first contact may take (server selection included).

    Raises:
        ConfigurationError: ``uri`` is not a MongoDB URI the driver accepts.
        ClusterUnreachable: nothing answered in time.
        SyncRefused: the cluster answered but refused the ping (e.g. the login).
    """
    shown = redact_uri(uri)
    try:
        client: MongoClient[Any] = MongoClient(uri)
    except (PyMongoError, ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"expected a MongoDB URI for the {role}, got {shown!r}: {_first_line(exc, uri)}"
        ) from None
    try:
        with pymongo.timeout(timeout_s):
            client.admin.command("ping")
    except OperationFailure as exc:
        client.close()
        raise SyncRefused(
            f"the {role} {shown} refused the first command: {_first_line(exc, uri)}"
        ) from None
    except PyMongoError:
        # The URI's own serverSelectionTimeoutMS may be the shorter wait.
        waited = min(timeout_s, client.options.server_selection_timeout)
        client.close()
        # The driver's message is a topology dump of every member's last error: the
        # address and the time waited say what to check.
        raise ClusterUnreachable(
            f"cannot reach the {role} at {shown}: no server answered within {waited:g} s "
            "(--connect-timeout)"
        ) from None
    return client


def cluster_identity(client: MongoClient[Any]) -> str | None:
    """``cluster <clusterId>`` or ``replica set <name> <replicaSetId>``; None if unreadable.

    Unreadable means neither answer was allowed or present (a standalone, or a user
    without the privileges): the caller then compares addresses only.
    """
    try:
        version = client["config"]["version"].find_one({"_id": 1})
    except OperationFailure:
        version = None
    if isinstance(version, Mapping) and version.get("clusterId") is not None:
        return f"cluster {version['clusterId']}"
    try:
        reply = client.admin.command("replSetGetConfig")
    except OperationFailure:
        return None
    config = reply.get("config") or {}
    replica_set_id = (config.get("settings") or {}).get("replicaSetId")
    if replica_set_id is None:
        return None
    return f"replica set {config.get('_id')} {replica_set_id}"


def refuse_same_cluster(
    source: MongoClient[Any], target: MongoClient[Any], source_uri: str, target_uri: str
) -> str | None:
    """Refuse a target that is the source; return the source's identity (None: unread).

    Raises:
        SyncRefused: both report the same identity, or (identities unread) the URIs
            name the same hosts.
    """
    source_id, target_id = cluster_identity(source), cluster_identity(target)
    if source_id is not None and source_id == target_id:
        raise SyncRefused(
            f"expected a target other than the source, got --target {redact_uri(target_uri)} "
            f"which is the source's {source_id} (--source {redact_uri(source_uri)})"
        )
    if source_id is None or target_id is None:
        same_hosts = _hosts(source_uri) & _hosts(target_uri)
        if same_hosts:
            raise SyncRefused(
                f"expected a target other than the source, got --target "
                f"{redact_uri(target_uri)} naming the source's host "
                f"{', '.join(sorted(same_hosts))}"
            )
    return source_id


def _hosts(uri: str) -> set[str]:
    if not uri.lower().startswith("mongodb://"):
        return set()  # an SRV name is resolved by the driver, not here
    try:
        return {f"{host}:{port}" for host, port in parse_uri(uri, warn=True)["nodelist"]}
    except (PyMongoError, DriverConfigurationError, ValueError):
        return set()  # an SRV name or an odd URI: the client already connected with it


def _first_line(exc: BaseException, uri: str) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    password = uri.partition("://")[2].rpartition("@")[0].partition(":")[2]
    return redact_text(text[:200], password)
