"""Emulator: the command dispatcher and commands shared by emulated mongod and mongos.

Every reply carries ``$clusterTime`` (a Timestamp with a zeroed signature; pymongo fails
on anything but a Timestamp) and ``operationTime``. A ``hello`` carrying
``topologyVersion`` and ``maxAwaitTimeMS`` is answered in streaming form: one reply per
``maxAwaitTimeMS`` or per topology change, flagged ``moreToCome`` when the client allowed
exhaust, so pymongo's streaming monitor neither busy-loops nor times out.
"""

from __future__ import annotations

import datetime
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.emulator.aggregate_commands import aggregate_handler
from shardstream.emulator.cursor_table import CursorTable
from shardstream.emulator.cursors import ListCursor, ServerCursor, select
from shardstream.emulator.document_store import DocumentStore
from shardstream.emulator.faults import (
    CommandError,
    ErrorReply,
    FaultMethods,
    FaultQueue,
    Hangup,
    SilentDeath,
    Stall,
)
from shardstream.emulator.loading import LoadMethods
from shardstream.emulator.projection import projector
from shardstream.emulator.server import HOST, Connection, WireServer
from shardstream.emulator.wire import OP_QUERY, Request

_VERSIONS = {17: "6.0.0", 21: "7.0.0", 25: "8.0.0"}
Body = dict[str, Any]
Handler = Callable[[Body], Body]


class EmulatedNode(FaultMethods, LoadMethods, ABC):
    """One emulated server process: lifecycle, dispatch and common commands (its cursors:
    ``cursors``, a :class:`~shardstream.emulator.cursor_table.CursorTable`)."""

    def __init__(self, *, max_wire_version: int = 21) -> None:
        """Create a stopped node.

        Args:
            max_wire_version: The reported ``maxWireVersion`` (21 is 7.0, 25 is 8.0).
        """
        self.max_wire_version = max_wire_version
        self.faults = FaultQueue()
        self.commands_seen: list[str] = []  # lower-cased command names, for assertions
        self.last_bodies: dict[str, Body] = {}  # the latest body per command name, likewise
        self._stopping = threading.Event()
        self._server = WireServer(self, self._stopping)
        self._topology = threading.Condition()
        self._process_id = ObjectId()
        self._topology_counter = 0
        self.cursors = CursorTable(self._stopping)
        self.store = DocumentStore()  # user collections; writable on replica-set members
        self._commands: dict[str, Handler] = {
            "ping": lambda _body: {"ok": 1.0},
            "buildinfo": self._build_info,
            "endsessions": lambda _body: {"ok": 1.0},
            "find": self._find,
            "getmore": self.cursors.get_more,
            "killcursors": self.cursors.kill,
        }
        # Through the role's collection_docs: on mongos that is every shard's documents.
        self._commands["aggregate"] = aggregate_handler(
            self.collection_docs, self.cursors.first_batch
        )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Self:
        """Start listening on an ephemeral 127.0.0.1 port; return self."""
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving, end every wait, close connections and join all threads."""
        self._stopping.set()
        with self._topology:
            self._topology.notify_all()
        self._server.stop()

    def __enter__(self) -> Self:
        """Start the node."""
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the node."""
        self.stop()

    @property
    def port(self) -> int:
        """The listening port (0 before start)."""
        return self._server.port

    @property
    def host(self) -> str:
        """``127.0.0.1:port``."""
        return f"{HOST}:{self.port}"

    def drop_connections(self) -> int:
        """Close every client connection now; return how many were open."""
        return self._server.drop_connections()

    @property
    def open_cursor_count(self) -> int:
        """How many server-side cursors are open."""
        return len(self.cursors)

    def bump_topology(self) -> None:
        """Advance ``topologyVersion.counter`` and wake streaming hellos (a state change)."""
        with self._topology:
            self._topology_counter += 1
            self._topology.notify_all()

    def run_command(self, body: Body) -> Body:
        """Answer ``body`` in-process, as a shard answers what mongos forwards to it.

        No fault is consumed and the reply is not stamped; errors raise ``CommandError``.
        """
        name = next(iter(body), "").lower()
        self.commands_seen.append(name)
        self.last_bodies[name] = body
        self.observe_cluster_time(body)
        return self.dispatch(body)

    def dispatch(self, body: Body) -> Body:
        """Run ``body``'s handler alone: what a node sends itself (mongos's sharding catalog
        creating a collection) is neither seen as a client's command nor gossips time.

        Raises:
            CommandError: CommandNotFound for a command the node does not know.
        """
        name = next(iter(body), "").lower()
        handler = self._commands.get(name)
        if handler is None:
            raise CommandError(59, "CommandNotFound", f"no such command: '{name}'")
        return handler(body)

    # -- hooks for roles ---------------------------------------------------------------

    @abstractmethod
    def cluster_time(self) -> Timestamp:
        """The node's current cluster time."""

    @abstractmethod
    def role_fields(self) -> Body:
        """Role-specific ``hello`` fields (replica-set membership or ``msg: isdbgrid``)."""

    def observe_cluster_time(self, body: Body) -> None:
        """See a request's gossiped ``$clusterTime``; a writing role logs after it."""

    def collection_docs(self, ns: str) -> list[Any]:
        """The documents of collection ``ns`` (roles override for virtual ones)."""
        return self.store.documents(ns)

    def make_cursor(self, ns: str, body: Body) -> ServerCursor:
        """Build the cursor for a ``find`` on ``ns``; roles override for special namespaces."""
        projection = body.get("projection")
        shape = projector(projection)  # refused before any document is read, as mongod does
        docs = self.collection_docs(ns)
        query = body.get("filter") or {}
        found = select(docs, query, body.get("skip"), body.get("limit"), body.get("sort"))
        return ListCursor(ns, [shape(doc) for doc in found] if projection else found)

    # -- dispatch ----------------------------------------------------------------------

    def serve(self, request: Request, conn: Connection) -> bool:
        """Answer one request (see :class:`~shardstream.emulator.server.RequestHandler`)."""
        name = request.command.lower()
        self.commands_seen.append(name)
        self.last_bodies[name] = request.body
        fault = self.faults.take(name)
        if isinstance(fault, Hangup):
            return False
        if isinstance(fault, Stall) and self._stopping.wait(fault.seconds):
            return False
        body = request.body
        self.observe_cluster_time(body)
        try:
            if isinstance(fault, ErrorReply):
                if fault.kill_cursor:
                    self.cursors.forget(body.get(request.command))
                raise CommandError(fault.code, fault.code_name, fault.errmsg, fault.labels)
            if isinstance(fault, SilentDeath):
                cursor = self.cursors.forget(body.get(request.command))
                ns = cursor.ns if cursor else f"{body.get('$db')}.{body.get('collection')}"
                reply: Body = {"cursor": {"id": Int64(0), "ns": ns, "nextBatch": []}, "ok": 1.0}
            elif name in ("hello", "ismaster"):
                if self._awaitable(request):
                    return self._stream_hello(request, conn)
                reply = self._hello(body, conn)
            elif name in self._commands:
                reply = self._commands[name](body)
            else:
                raise CommandError(59, "CommandNotFound", f"no such command: '{request.command}'")
        except CommandError as err:
            reply = {"ok": 0.0, "errmsg": err.errmsg, "code": err.code, "codeName": err.code_name}
            if err.labels:
                reply["errorLabels"] = list(err.labels)
        if not request.more_to_come:
            conn.reply(request, self._stamp(reply))
        return True

    def _stamp(self, reply: Body) -> Body:
        now = self.cluster_time()
        signature = {"hash": Binary(bytes(20)), "keyId": Int64(0)}
        reply["$clusterTime"] = {"clusterTime": now, "signature": signature}
        reply["operationTime"] = now
        return reply

    # -- hello -------------------------------------------------------------------------

    def _topology_version(self) -> Body:
        with self._topology:
            return {"processId": self._process_id, "counter": Int64(self._topology_counter)}

    def _hello(self, body: Body, conn: Connection) -> Body:
        primary_key = "isWritablePrimary" if "hello" in body else "ismaster"
        fields = self.role_fields()
        reply: Body = {
            "helloOk": True,
            primary_key: fields.pop("isWritablePrimary", True),
            "topologyVersion": self._topology_version(),
            **fields,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000,
            "localTime": datetime.datetime.now(datetime.UTC),
            "logicalSessionTimeoutMinutes": 30,
            "connectionId": conn.id,
            "minWireVersion": 0,
            "maxWireVersion": self.max_wire_version,
            "readOnly": False,
            "ok": 1.0,
        }
        return reply

    @staticmethod
    def _awaitable(request: Request) -> bool:
        body = request.body
        return (
            request.opcode != OP_QUERY
            and isinstance(body.get("topologyVersion"), dict)
            and "maxAwaitTimeMS" in body
        )

    def _stream_hello(self, request: Request, conn: Connection) -> bool:
        body = request.body
        known = body["topologyVersion"]
        timeout = max(0, int(body["maxAwaitTimeMS"])) / 1000
        # Bounded: each pass waits at most maxAwaitTimeMS; the stream ends on stop or when
        # the client goes (sendall raises and the server closes the connection).
        while not self._stopping.is_set():
            with self._topology:
                if known == self._topology_version():
                    self._topology.wait(timeout)
            if self._stopping.is_set():
                return False
            reply = self._stamp(self._hello(body, conn))
            known = reply["topologyVersion"]
            conn.reply(request, reply, more_to_come=request.exhaust_allowed)
            if not request.exhaust_allowed:
                return True
        return False

    def _build_info(self, _body: Body) -> Body:
        version = _VERSIONS.get(self.max_wire_version, "7.0.0")
        parts = [int(p) for p in version.split(".")] + [0]
        return {
            "version": version,
            "versionArray": parts,
            "gitVersion": "shardstream-emulator",
            "bits": 64,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "ok": 1.0,
        }

    # -- cursors -----------------------------------------------------------------------

    def _find(self, body: Body) -> Body:
        ns = f"{body.get('$db')}.{body['find']}"
        cursor = self.make_cursor(ns, body)
        return self.cursors.first_batch(
            cursor, body.get("batchSize"), bool(body.get("singleBatch"))
        )
