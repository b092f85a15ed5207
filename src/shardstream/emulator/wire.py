"""Emulator: MongoDB wire-protocol framing (OP_MSG, legacy OP_QUERY and OP_REPLY).

Only what pymongo 4.x sends is parsed: OP_MSG (2013) with kind-0 bodies, kind-1 document
sequences and an optional CRC-32C checksum (which is skipped, not verified), and the legacy
OP_QUERY (2004) that pymongo up to 4.13 uses for the first ``isMaster`` on a connection.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import bson
from bson.codec_options import CodecOptions, DatetimeConversion

OP_REPLY = 1
OP_QUERY = 2004
OP_MSG = 2013

CHECKSUM_PRESENT = 1 << 0
MORE_TO_COME = 1 << 1
EXHAUST_ALLOWED = 1 << 16

_HEADER = struct.Struct("<iiii")
# A message larger than this is a framing error rather than a real request (the server
# default maxMessageSizeBytes is 48,000,000).
MAX_MESSAGE_SIZE = 48_000_000
# How request bodies (and stored documents) are decoded: a datetime outside what Python's
# datetime holds (before year 1 or after 9999) comes back as ``DatetimeMS`` instead of
# failing, so every BSON value a client writes re-encodes to the same bytes.
CODEC_OPTIONS: CodecOptions[dict[str, Any]] = CodecOptions(
    datetime_conversion=DatetimeConversion.DATETIME_AUTO
)


class ProtocolError(Exception):
    """A message that cannot be parsed; the connection is closed."""


@dataclass
class Request:
    """One decoded client request.

    Attributes:
        request_id: The client's requestID, echoed as the reply's responseTo.
        opcode: ``OP_MSG`` or ``OP_QUERY``.
        flags: The OP_MSG flagBits (0 for OP_QUERY).
        body: The command document, with any kind-1 sequences merged in as lists.
    """

    request_id: int
    opcode: int
    flags: int
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def command(self) -> str:
        """The command name: the body's first key (empty for an empty body)."""
        return next(iter(self.body), "")

    @property
    def exhaust_allowed(self) -> bool:
        """Whether the client accepts several ``moreToCome`` replies to this request."""
        return bool(self.flags & EXHAUST_ALLOWED)

    @property
    def more_to_come(self) -> bool:
        """Whether the client expects no reply (an unacknowledged message)."""
        return bool(self.flags & MORE_TO_COME)


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    """Read exactly ``size`` bytes, or return None if the peer closed first."""
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:  # bounded: each pass consumes at least one byte or returns
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _cstring(data: bytes, offset: int) -> tuple[str, int]:
    end = data.index(b"\x00", offset)
    return data[offset:end].decode(), end + 1


def _parse_op_msg(data: bytes, flags: int) -> dict[str, Any]:
    end = len(data) - 4 if flags & CHECKSUM_PRESENT else len(data)
    body: dict[str, Any] = {}
    sequences: dict[str, list[Any]] = {}
    offset = 0
    while offset < end:  # bounded: every section advances the offset
        kind = data[offset]
        offset += 1
        if kind == 0:
            (size,) = struct.unpack_from("<i", data, offset)
            body = bson.decode(data[offset : offset + size], CODEC_OPTIONS)
            offset += size
        elif kind == 1:
            (size,) = struct.unpack_from("<i", data, offset)
            name, docs_at = _cstring(data, offset + 4)
            sequences[name] = list(bson.decode_all(data[docs_at : offset + size], CODEC_OPTIONS))
            offset += size
        else:
            raise ProtocolError(f"unknown OP_MSG section kind {kind}")
    body.update(sequences)
    return body


def _parse_op_query(data: bytes) -> dict[str, Any]:
    # flags (int32), fullCollectionName (cstring), numberToSkip, numberToReturn, query doc.
    _, offset = _cstring(data, 4)
    offset += 8
    (size,) = struct.unpack_from("<i", data, offset)
    query = bson.decode(data[offset : offset + size], CODEC_OPTIONS)
    # A legacy command may be wrapped as {$query: {...}, $readPreference: ...}.
    inner = query.get("$query")
    return dict(inner) if isinstance(inner, dict) else query


def read_request(sock: socket.socket) -> Request | None:
    """Read and decode one request.

    Args:
        sock: A connected client socket.

    Returns:
        The request, or None when the peer closed the connection.

    Raises:
        ProtocolError: On an opcode other than OP_MSG or OP_QUERY, or a bad length.
    """
    header = _recv_exact(sock, _HEADER.size)
    if header is None:
        return None
    length, request_id, _, opcode = _HEADER.unpack(header)
    if not _HEADER.size < length <= MAX_MESSAGE_SIZE:
        raise ProtocolError(f"bad message length {length}")
    data = _recv_exact(sock, length - _HEADER.size)
    if data is None:
        return None
    if opcode == OP_MSG:
        (flags,) = struct.unpack_from("<I", data, 0)
        return Request(request_id, opcode, flags, _parse_op_msg(data[4:], flags))
    if opcode == OP_QUERY:
        return Request(request_id, opcode, 0, _parse_op_query(data))
    raise ProtocolError(f"unsupported opcode {opcode}")


def encode_op_msg(doc: Any, request_id: int, response_to: int, *, more_to_come: bool) -> bytes:
    """Encode a reply as OP_MSG with one kind-0 section.

    Args:
        doc: The reply document (a mapping; ``RawBSONDocument`` values stay byte-identical).
        request_id: This message's requestID.
        response_to: The requestID being answered.
        more_to_come: Set the moreToCome flag (a streaming reply; more will follow).
    """
    payload = struct.pack("<I", MORE_TO_COME if more_to_come else 0) + b"\x00" + bson.encode(doc)
    return _HEADER.pack(_HEADER.size + len(payload), request_id, response_to, OP_MSG) + payload


def encode_op_reply(doc: Any, request_id: int, response_to: int) -> bytes:
    """Encode a reply to a legacy OP_QUERY as OP_REPLY with one document.

    Args:
        doc: The reply document.
        request_id: This message's requestID.
        response_to: The requestID being answered.
    """
    # responseFlags 0 (AwaitCapable is only meaningful for legacy cursors), cursorID 0,
    # startingFrom 0, numberReturned 1.
    payload = struct.pack("<iqii", 0, 0, 0, 1) + bson.encode(doc)
    return _HEADER.pack(_HEADER.size + len(payload), request_id, response_to, OP_REPLY) + payload
