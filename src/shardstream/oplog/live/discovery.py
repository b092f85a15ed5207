"""Find a sharded cluster's shards and current time through mongos.

``listShards`` (or, for users without that privilege, a ``find`` on ``config.shards``)
gives each shard's ``host`` string, ``rsName/h1:p1,h2:p2`` or a bare ``h:p``. Each becomes a
connection URI that keeps the user's credentials, ``authSource``, TLS and other options,
because the tailers connect to the shards directly with the same identity they used for
mongos. The cluster's current time (``operationTime`` of a ``ping``) is the default start
point for every shard, as mongos uses its own clusterTime for a new change stream
(merger.md §12). Nothing here logs or raises a URI without redacting it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError
from pymongo.uri_parser import parse_uri

from shardstream.errors import ConfigurationError, OplogError
from shardstream.oplog.redaction import redact_text, redact_uri

# Options that describe how to reach mongos, not a shard: the shard URI sets its own.
_HOST_OPTIONS: Final = frozenset(
    {"replicaset", "directconnection", "loadbalanced", "srvservicename", "srvmaxhosts"}
)
_TLS_OPTIONS: Final = frozenset({"tls", "ssl"})


@dataclasses.dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard as mongos lists it.

    Attributes:
        name: The shard's ``_id`` (e.g. ``shard01``).
        host: The raw ``host`` string from ``config.shards``.
        set_name: The replica-set name (None for a bare ``h:p`` host).
        hosts: The member addresses, ``host:port`` each.
        uri: A connection URI for the shard, with the user's credentials and options.
            It may contain a password: pass it through :func:`redact_uri` before showing it.
    """

    name: str
    host: str
    set_name: str | None
    hosts: tuple[str, ...]
    uri: str = dataclasses.field(repr=False)

    @property
    def redacted_uri(self) -> str:
        """The URI without its password, for messages."""
        return redact_uri(self.uri)


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What discovery found: the shards (in listing order) and the cluster's time.

    Attributes:
        shards: the data shards.
        cluster_time: the cluster's time when the shards were listed.
        config: the config server replica set (``getShardMap``'s ``config`` entry),
            whose oplog records shards added and removed; None if mongos refused.
        base_uri: the URI shard URIs are built from (credentials and options).
    """

    shards: tuple[ShardInfo, ...]
    cluster_time: Timestamp
    config: ShardInfo | None = None
    base_uri: str = dataclasses.field(default="", repr=False)

    def shard_from_host(self, name: str, host: str) -> ShardInfo:
        """A shard named ``name`` at ``host`` (a ``config.shards`` host string).

        Raises:
            OplogError: the host string is malformed.
        """
        set_name, hosts = parse_shard_host(host)
        return ShardInfo(name, host, set_name, hosts, shard_uri(self.base_uri, set_name, hosts))


def parse_shard_host(host: str) -> tuple[str | None, tuple[str, ...]]:
    """Split a ``config.shards`` host string into (replica-set name, member addresses).

    >>> parse_shard_host("rs1/a:27018,b:27018")
    ('rs1', ('a:27018', 'b:27018'))
    >>> parse_shard_host("a:27018")
    (None, ('a:27018',))

    Raises:
        OplogError: the string has no hosts.
    """
    set_name, slash, members = host.partition("/")
    if not slash:
        set_name, members = "", host
    addresses = tuple(part.strip() for part in members.split(",") if part.strip())
    if not addresses or (slash and not set_name):
        raise OplogError(f"expected a shard host 'rsName/h:p,...' or 'h:p', got {host!r}")
    return (set_name or None), addresses


def _raw_query(uri: str) -> list[tuple[str, str]]:
    # Keep the user's own spelling of each option (values are re-sent verbatim). As in the
    # driver, userinfo ends at the last "@" before the first "/" or "?" after the hosts.
    rest = uri.split("://", 1)[-1]
    netloc = re.split(r"[/?]", rest, maxsplit=1)[0]
    if "@" in netloc:
        rest = rest[len(netloc.rpartition("@")[0]) + 1 :]
    query = rest.partition("?")[2]
    pairs = []
    for item in query.split("&"):
        key, _, value = item.partition("=")
        if key:
            pairs.append((key, value))
    return pairs


def shard_uri(base_uri: str, set_name: str | None, hosts: Sequence[str]) -> str:
    """Build a shard's URI from the mongos URI ``base_uri``.

    Credentials, the database (the default ``authSource``) and every option except the
    ones that say how to reach mongos are carried over. A replica-set shard gets
    ``replicaSet=<name>``; a bare host gets ``directConnection=true``. A ``mongodb+srv``
    base implies TLS and may carry ``authSource`` in DNS, so both are made explicit.

    Raises:
        ConfigurationError: ``base_uri`` is not a valid MongoDB URI.
    """
    try:
        parsed = parse_uri(base_uri)
    except (PyMongoError, ValueError) as exc:
        raise ConfigurationError(
            f"invalid mongos URI {redact_uri(base_uri)!r}: {redact_text(str(exc))}"
        ) from None
    userinfo = ""
    if parsed["username"] is not None:
        userinfo = quote(parsed["username"], safe="")
        if parsed["password"] is not None:
            userinfo += ":" + quote(parsed["password"], safe="")
        userinfo += "@"
    options = [(k, v) for k, v in _raw_query(base_uri) if k.lower() not in _HOST_OPTIONS]
    names = {k.lower() for k, _ in options}
    if base_uri.lower().startswith("mongodb+srv://"):
        if not names & _TLS_OPTIONS:
            options.append(("tls", "true"))
        auth_source = parsed["options"].get("authSource")
        if auth_source and "authsource" not in names:
            options.append(("authSource", quote(str(auth_source), safe="")))
    if set_name is not None:
        options.append(("replicaSet", quote(set_name, safe="")))
    else:
        options.append(("directConnection", "true"))
    database = quote(parsed["database"], safe="") if parsed["database"] else ""
    query = "&".join(f"{k}={v}" for k, v in options)
    return f"mongodb://{userinfo}{','.join(hosts)}/{database}?{query}"


def _list_shard_documents(client: MongoClient[Any]) -> list[Mapping[str, Any]]:
    """The shard documents from ``listShards``, or from ``config.shards`` if refused.

    Raises:
        OplogError: neither source can be read (the message is redacted).
    """
    try:
        reply = client.admin.command("listShards")
        return list(reply["shards"])
    except OperationFailure:
        pass  # e.g. Unauthorized: a read-only user may still read config.shards
    except PyMongoError as exc:
        raise OplogError(f"listShards failed on mongos: {redact_text(str(exc))}") from None
    try:
        return list(client["config"]["shards"].find({}))
    except PyMongoError as exc:
        raise OplogError(
            f"cannot list shards (listShards and config.shards both failed): "
            f"{redact_text(str(exc))}"
        ) from None


def _read_cluster_time(client: MongoClient[Any]) -> Timestamp:
    """The cluster's current time: ``operationTime`` (or ``$clusterTime``) of a ``ping``.

    Raises:
        OplogError: the reply carries no timestamp, or the ping failed.
    """
    try:
        reply = client.admin.command("ping")
    except PyMongoError as exc:
        raise OplogError(f"ping to mongos failed: {redact_text(str(exc))}") from None
    candidate = reply.get("operationTime")
    if not isinstance(candidate, Timestamp):
        candidate = (reply.get("$clusterTime") or {}).get("clusterTime")
    if not isinstance(candidate, Timestamp):
        raise OplogError(f"expected a Timestamp clusterTime from mongos, got {candidate!r:.80}")
    return candidate


def discover_cluster(
    mongos: str | MongoClient[Any],
    *,
    uri: str | None = None,
    client_options: Mapping[str, Any] | None = None,
) -> ClusterInfo:
    """List the shards behind ``mongos`` and read the cluster's current time.

    Args:
        mongos: A mongos URI, or an open client to mongos (left open).
        uri: The URI whose credentials and options the shard URIs copy; defaults to
            ``mongos`` when that is a string. With a client and no ``uri``, shard URIs
            carry no credentials (a client does not expose its password, by design).
        client_options: Extra ``MongoClient`` keyword arguments when ``mongos`` is a URI.

    Raises:
        ConfigurationError: the URI is invalid.
        OplogError: mongos cannot be reached or its shard list is malformed.
    """
    if isinstance(mongos, str):
        base = uri or mongos
        try:
            client: MongoClient[Any] = MongoClient(mongos, **dict(client_options or {}))
        except (PyMongoError, ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"cannot create a client for {redact_uri(mongos)!r}: {redact_text(str(exc))}"
            ) from None
        try:
            return _discover(client, base)
        finally:
            client.close()
    return _discover(mongos, uri)


def _discover(client: MongoClient[Any], base_uri: str | None) -> ClusterInfo:
    cluster_time = _read_cluster_time(client)
    if base_uri is None:  # the client knows its addresses only once it has connected
        address = ",".join(f"{host}:{port}" for host, port in sorted(client.nodes))
        base_uri = f"mongodb://{address or 'localhost'}/"
    info = ClusterInfo((), cluster_time, base_uri=base_uri)
    shards = []
    for doc in _list_shard_documents(client):
        name, host = doc.get("_id"), doc.get("host")
        if not isinstance(name, str) or not isinstance(host, str):
            raise OplogError(f"expected shard documents with string _id and host, got {doc!r:.120}")
        shards.append(info.shard_from_host(name, host))
    config_host = _config_server_host(client)
    config = None if config_host is None else info.shard_from_host("config", config_host)
    return dataclasses.replace(info, shards=tuple(shards), config=config)


def _config_server_host(client: MongoClient[Any]) -> str | None:
    """The config server's host string from ``getShardMap``; None if refused."""
    try:
        reply = client.admin.command("getShardMap")
    except OperationFailure:
        return None  # e.g. Unauthorized: the caller decides whether it can do without
    except PyMongoError as exc:
        raise OplogError(f"getShardMap failed on mongos: {redact_text(str(exc))}") from None
    host = (reply.get("map") or {}).get("config")
    if not isinstance(host, str):
        raise OplogError(f"expected getShardMap to name the config server, got {reply!r:.160}")
    return host
