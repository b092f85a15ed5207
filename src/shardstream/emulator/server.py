"""Emulator: a threaded loopback TCP server that frames requests and replies.

One thread accepts; one thread serves each connection. The server knows nothing about
commands: it hands each decoded request to a :class:`RequestHandler` together with the
:class:`Connection`, which the handler uses to reply (possibly several times, for a
streaming ``hello``) or to hang up.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from typing import Any, Protocol

from shardstream.emulator.wire import (
    OP_QUERY,
    ProtocolError,
    Request,
    encode_op_msg,
    encode_op_reply,
    read_request,
)

HOST = "127.0.0.1"
# How often the accept loop looks at the stop flag; also bounds how long stop() waits for it.
_ACCEPT_POLL_S = 0.05
_JOIN_TIMEOUT_S = 5.0
_request_ids = itertools.count(1)


class RequestHandler(Protocol):
    """What a server delegates requests to."""

    def serve(self, request: Request, conn: Connection) -> bool:
        """Answer ``request`` through ``conn``; return False to close the connection."""
        ...


class Connection:
    """One accepted client connection."""

    def __init__(self, sock: socket.socket, connection_id: int) -> None:
        """Wrap an accepted socket."""
        self.sock = sock
        self.id = connection_id
        self._last_reply_id: int | None = None
        self._send_lock = threading.Lock()

    def reply(self, request: Request, doc: Any, *, more_to_come: bool = False) -> None:
        """Send ``doc`` as the reply to ``request``.

        A streaming (``moreToCome``) sequence chains each reply to the previous one, as the
        exhaust protocol requires: the first answers the request, later ones answer the
        reply before them.

        Args:
            request: The request being answered.
            doc: The reply document.
            more_to_come: Set the moreToCome flag (OP_MSG only).

        Raises:
            OSError: If the client has gone.
        """
        request_id = next(_request_ids)
        if request.opcode == OP_QUERY:
            data = encode_op_reply(doc, request_id, request.request_id)
        else:
            response_to = self._last_reply_id if self._last_reply_id else request.request_id
            data = encode_op_msg(doc, request_id, response_to, more_to_come=more_to_come)
        self._last_reply_id = request_id if more_to_come else None
        with self._send_lock:
            self.sock.sendall(data)

    def close(self) -> None:
        """Shut the socket down (waking a blocked recv) and close it."""
        with contextlib.suppress(OSError):  # already closed by the peer
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class WireServer:
    """A TCP server on 127.0.0.1 with an ephemeral port."""

    def __init__(self, handler: RequestHandler, stopping: threading.Event) -> None:
        """Create a stopped server.

        Args:
            handler: Receives every request.
            stopping: Set by :meth:`stop`; handlers wait on it so stop ends their waits.
        """
        self._handler = handler
        self._stopping = stopping
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._connections: dict[Connection, threading.Thread] = {}
        self._ids = itertools.count(1)
        self.port = 0

    def start(self) -> None:
        """Bind an ephemeral loopback port and start accepting."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((HOST, 0))
        listener.listen(64)
        listener.settimeout(_ACCEPT_POLL_S)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"emulator-accept-{self.port}", daemon=True
        )
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():  # bounded by stop()
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(sock, next(self._ids))
            thread = threading.Thread(
                target=self._serve, args=(conn,), name=f"emulator-conn-{self.port}", daemon=True
            )
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    return
                self._connections[conn] = thread
            thread.start()

    def _serve(self, conn: Connection) -> None:
        try:
            while not self._stopping.is_set():  # bounded: ends on EOF, error, or stop
                request = read_request(conn.sock)
                if request is None or not self._handler.serve(request, conn):
                    break
        except (OSError, ProtocolError):
            pass  # the client went away or sent garbage: drop the connection
        finally:
            conn.close()
            with self._lock:
                self._connections.pop(conn, None)

    def drop_connections(self) -> int:
        """Close every client connection (they reconnect on their next operation)."""
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            conn.close()
        return len(conns)

    @property
    def connection_count(self) -> int:
        """How many client connections are open."""
        with self._lock:
            return len(self._connections)

    def stop(self) -> None:
        """Stop accepting, close all connections and join every thread."""
        self._stopping.set()
        if self._accept_thread is not None:
            self._accept_thread.join(_JOIN_TIMEOUT_S)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            items = list(self._connections.items())
        for conn, _ in items:
            conn.close()
        for _, thread in items:
            thread.join(_JOIN_TIMEOUT_S)
