"""A 2-shard MongoDB cluster in one container, addressable from the host (or a replica set).

Recipe (see shared/docs/testing.md §3): config server, two shard replica sets and
mongos run inside one ``mongo:<version>`` container, each on a host port chosen
first and published 1:1, so ``localhost:P`` means the same inside and outside and
``config.shards`` holds addresses the tests can reach.  Periodic no-ops every
second keep idle shards' promises moving.  :func:`replica_set` starts a lone
one-member replica set the same way (a sync's target).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from testcontainers.core.container import DockerContainer
from testcontainers.core.waiting_utils import wait_for_logs

READY = "SHARDED CLUSTER READY"
_MONGOD = (
    "mongod --bind_ip_all --fork --logpath /tmp/{name}.log --dbpath /data/{name} "
    "--port {port} --replSet {name} --wiredTigerCacheSizeGB 0.25 --oplogSize 64 "
    "--setParameter periodicNoopIntervalSecs=1 {role}"
)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _script(config_port: int, shard_ports: list[int], mongos_port: int, spare: int) -> str:
    sets = [("cfg", config_port, "--configsvr")]
    sets += [(f"shard{i}", port, "--shardsvr") for i, port in enumerate(shard_ports)]
    added = len(shard_ports) - spare  # the last `spare` replica sets run but are not added
    lines = ["set -e"]
    for name, port, role in sets:
        lines.append(f"mkdir -p /data/{name}")
        lines.append(_MONGOD.format(name=name, port=port, role=role))
        extra = ", configsvr: true" if role == "--configsvr" else ""
        member = f"{{_id: 0, host: 'localhost:{port}'}}"
        initiate = f"rs.initiate({{_id: '{name}'{extra}, members: [{member}]}})"
        lines.append(f'mongosh --quiet --port {port} --eval "{initiate}"')
        wait = "while (!db.hello().isWritablePrimary) { sleep(200) }"
        lines.append(f'mongosh --quiet --port {port} --eval "{wait}"')
    lines.append(
        f"mongos --bind_ip_all --fork --logpath /tmp/mongos.log --port {mongos_port} "
        f"--configdb cfg/localhost:{config_port}"
    )
    for i, port in enumerate(shard_ports[:added]):
        add = f"sh.addShard('shard{i}/localhost:{port}')"
        lines.append(f'mongosh --quiet --port {mongos_port} --eval "{add}"')
    lines.append(f"echo '{READY}'")
    lines.append("sleep infinity")
    return "\n".join(lines)


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its mongos URI, and replica sets ready to be added as shards."""

    uri: str
    spare_shards: tuple[str, ...]  # "shardN/localhost:port" host strings for addShard
    shard_uris: tuple[str, ...]  # a direct URI per replica set, added or spare
    config_uri: str


@contextmanager
def sharded_cluster(image: str, shards: int = 2, spare: int = 0) -> Iterator[Cluster]:
    """Start the cluster; yield it; remove the container afterwards.

    Args:
        image: e.g. ``mongo:8.0``.
        shards: replica sets added as shards at start.
        spare: further replica sets started but not added (a test adds them).
    """
    config_port, mongos_port, *shard_ports = _free_ports(2 + shards + spare)
    container = DockerContainer(image).with_kwargs(entrypoint=["bash", "-c"])
    script = _script(config_port, shard_ports, mongos_port, spare)
    container = container.with_command([script])
    for port in (config_port, mongos_port, *shard_ports):
        container = container.with_bind_ports(port, port)
    with container:
        wait_for_logs(container, READY, timeout=180)
        yield Cluster(
            uri=f"mongodb://localhost:{mongos_port}/?directConnection=false",
            spare_shards=tuple(
                f"shard{i}/localhost:{port}" for i, port in enumerate(shard_ports) if i >= shards
            ),
            shard_uris=tuple(
                f"mongodb://localhost:{port}/?directConnection=true" for port in shard_ports
            ),
            config_uri=f"mongodb://localhost:{config_port}/?directConnection=true",
        )


@contextmanager
def replica_set(image: str, name: str = "rs0") -> Iterator[str]:
    """Start a one-member replica set in its own container; yield its URI; remove it after."""
    (port,) = _free_ports(1)
    member = f"{{_id: 0, host: 'localhost:{port}'}}"
    initiate = f"rs.initiate({{_id: '{name}', members: [{member}]}})"
    wait = "while (!db.hello().isWritablePrimary) { sleep(200) }"
    script = "\n".join(
        [
            "set -e",
            f"mkdir -p /data/{name}",
            _MONGOD.format(name=name, port=port, role=""),
            f'mongosh --quiet --port {port} --eval "{initiate}"',
            f'mongosh --quiet --port {port} --eval "{wait}"',
            f"echo '{READY}'",
            "sleep infinity",
        ]
    )
    container = DockerContainer(image).with_kwargs(entrypoint=["bash", "-c"])
    container = container.with_command([script]).with_bind_ports(port, port)
    with container:
        wait_for_logs(container, READY, timeout=120)
        yield f"mongodb://localhost:{port}/?replicaSet={name}"
