"""Encoded batches from a worker process to the parent, through shared memory.

A worker's output is the whole replay's output (hundreds of MB), so what the transport
costs per event matters more than anything else in the parent.  Pickling lists of
``bytes`` copies every event twice more and makes a new object of each; a pipe alone
copies through the kernel and, at 1 MiB at most, lets the worker run only a batch ahead
before it blocks -- while the parent, busy with its own shards, does not read.

So a batch goes into a ring of memory shared with the parent (an anonymous ``mmap``,
inherited across ``fork``), and only its header goes down the pipe.  The parent hands
the events on as memoryview slices of the ring: no copy until the output is written.
The parent gives space back through a second pipe once the events are written (see
:meth:`BatchReader.take`); the worker waits for space only when it is a whole ring ahead.

A batch in the ring: the keys joined by ``\\n`` (upper-case hex, never ``\\n``), the
invalidate key (empty when none), the events' end offsets (``array('Q')``), the events.
A batch larger than the ring follows its header down the pipe instead.
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
from array import array
from collections import deque
from itertools import accumulate
from typing import Final

from shardstream.errors import ShardstreamError
from shardstream.transform.raw.encoded_stream import EncodedBatch

# kind, event count, bytes of keys, invalidate key, events; where the batch starts in the
# ring and the ring's position after it (the position counts bytes ever used, so it only
# grows: the offset in the ring is position % size).
HEADER: Final = struct.Struct("<cQQQQQQ")
IN_RING: Final = b"R"
IN_PIPE: Final = b"P"
END: Final = b"E"
ERROR: Final = b"X"  # keys part: the exception's class name; events part: it, pickled
# The ring's first bytes: the position up to which the parent has written the events out
# (an aligned 8-byte word, stored and loaded whole on the 64-bit machines we run on).  The
# parent also rings a doorbell (a byte down a pipe) each time, to wake a waiting worker.
RELEASED: Final = struct.Struct("<Q")
DATA: Final = 64  # where the ring's data starts

RING_SIZE: Final = 32 << 20  # ~50,000 events of look-ahead: tens of ms of a worker's work

_IOV_MAX: Final = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16


def new_ring(size: int = RING_SIZE) -> mmap.mmap:
    """Memory the parent and the workers it forks after this call all see."""
    return mmap.mmap(-1, DATA + size)


class BatchWriter:
    """The worker's end: :meth:`write` puts a batch in the ring (waiting for space)."""

    def __init__(self, fd: int, doorbell_fd: int, ring: mmap.mmap) -> None:
        self._fd = fd
        self._doorbell_fd = doorbell_fd
        self._ring = ring
        self._size = len(ring) - DATA
        self._position = 0  # bytes of the ring ever used

    def write(self, batch: EncodedBatch) -> None:
        """Send ``batch`` (its events in the same order)."""
        keys = b"\n".join(batch.keys)
        invalidate = batch.invalidate_key or b""
        offsets = array("Q", accumulate(map(len, batch.events)))
        events_size = offsets[-1] if offsets else 0
        ends = offsets.tobytes()  # in this machine's byte order: the reader is on it too
        parts = [keys, invalidate, ends, *batch.events]
        size = len(keys) + len(invalidate) + len(ends) + events_size
        ring_size = self._size
        # A batch over a quarter of the ring goes down the pipe: so the batch the parent may
        # still hold, this one and the space lost to wrapping each always fit.
        if size > ring_size // 4:
            header = HEADER.pack(
                IN_PIPE, len(batch.events), len(keys), len(invalidate), events_size, 0, 0
            )
            write_all(self._fd, [header, *parts])
            return
        start = self._position
        if start % ring_size + size > ring_size:  # no wrapping inside a batch
            start += ring_size - start % ring_size
        end = start + size
        # Wait while the parent still holds what this batch would overwrite.
        while end - RELEASED.unpack_from(self._ring)[0] > ring_size:
            if not os.read(self._doorbell_fd, 4096):
                raise BrokenPipeError("the parent has gone")  # it stopped reading: early end
        at = DATA + start % ring_size
        self._ring[at : at + size] = b"".join(parts)
        self._position = end
        header = HEADER.pack(
            IN_RING, len(batch.events), len(keys), len(invalidate), events_size, start, end
        )
        write_all(self._fd, [header])

    def end(self) -> None:
        """Tell the reader the stream has ended."""
        write_all(self._fd, [HEADER.pack(END, 0, 0, 0, 0, 0, 0)])

    def error(self, exc: ShardstreamError) -> None:
        """Send ``exc`` to be raised again in the reader: the same class, message and
        attributes (a TransformError's ``ts`` and ``code``), pickled -- the reader is this
        worker's own parent."""
        kind = type(exc).__name__.encode()
        try:
            text = pickle.dumps(exc)
        except Exception:  # an attribute that does not pickle: the class and message only
            text = pickle.dumps(type(exc)(str(exc)))
        write_all(self._fd, [HEADER.pack(ERROR, 0, len(kind), 0, len(text), 0, 0), kind, text])


def write_all(fd: int, buffers: list[bytes]) -> None:
    """Write ``buffers`` one after another to ``fd``, a few system calls for all of them."""
    for at in range(0, len(buffers), _IOV_MAX):
        chunk = buffers[at : at + _IOV_MAX]
        written = os.writev(fd, chunk)
        total = sum(map(len, chunk))
        if written < total:  # a blocking file only stops short on a signal: rare, so simple
            rest = memoryview(b"".join(chunk))[written:]
            while rest:
                rest = rest[os.write(fd, rest) :]


class BatchReader:
    """The parent's end, non-blocking: :meth:`pump` reads the headers the pipe holds now.

    Complete messages go to :attr:`received`, in order: an :class:`EncodedBatch`, the
    writer's error (raised by whoever takes it, at its place in the stream, as a one-process
    replay would raise it there) and, last, None for the end of the stream.

    A batch's events are views of the ring, valid until the next :meth:`take`: taking a
    batch gives the previous one's space back to the worker.
    """

    def __init__(self, fd: int, doorbell_fd: int, ring: mmap.mmap, source: str) -> None:
        os.set_blocking(fd, False)
        os.set_blocking(doorbell_fd, False)  # a full doorbell pipe has rung already
        self.fd = fd
        self.received: deque[tuple[EncodedBatch, int] | ShardstreamError | None] = deque()
        self.ended = False
        self._doorbell_fd = doorbell_fd
        self._ring = ring
        self._view = memoryview(ring)
        self._size = len(ring) - DATA
        self._file = os.fdopen(fd, "rb", buffering=0, closefd=False)
        self._source = source  # for the error if the writer dies: e.g. "shards 'a', 'b'"
        self._header: tuple[bytes, int, int, int, int, int, int] | None = None
        self._buffer = bytearray(HEADER.size)
        self._got = 0
        self._held = 0  # the ring position after the batch taken last

    def pump(self) -> None:
        """Read until the pipe is empty (or the stream has ended); never blocks."""
        while not self.ended:
            if self._got == len(self._buffer):
                self._complete()
                continue
            n = self._file.readinto(memoryview(self._buffer)[self._got :])
            if n is None:
                return
            if n == 0:
                self.received.append(
                    ShardstreamError(f"the worker process reading {self._source} ended early")
                )
                self.ended = True
                return
            self._got += n

    def take(self) -> EncodedBatch | None:
        """The oldest message received (there must be one); raises a received error."""
        self.release()
        message = self.received.popleft()
        if isinstance(message, ShardstreamError):
            raise message
        if message is None:
            return None
        batch, self._held = message
        return batch

    def release(self) -> None:
        """Give the worker back the space of the batch taken last (its events are written)."""
        if not self._held:
            return
        RELEASED.pack_into(self._ring, 0, self._held)
        self._held = 0
        try:
            os.write(self._doorbell_fd, b"!")
        except BlockingIOError:
            pass  # the pipe is full of rings the worker has not read yet
        except BrokenPipeError:
            pass  # the worker has finished

    def _complete(self) -> None:
        self._got = 0
        if self._header is None:
            header: tuple[bytes, int, int, int, int, int, int] = HEADER.unpack(self._buffer)
            kind, count, keys_size, invalidate_size, events_size, start, end = header
            if kind == END:
                self.received.append(None)
                self.ended = True
            elif kind == IN_RING:
                at = DATA + start % self._size
                self._add(self._view[at : at + end - start], header, end)
            else:  # the batch, or the error, follows in the pipe
                self._header = header
                self._buffer = bytearray(keys_size + invalidate_size + 8 * count + events_size)
            return
        kind, count, keys_size, invalidate_size, events_size, start, end = self._header
        payload = memoryview(self._buffer)
        self._header = None
        self._buffer = bytearray(HEADER.size)
        if kind == ERROR:
            self.received.append(_rebuilt_error(bytes(payload[:keys_size]), payload[keys_size:]))
            self.ended = True
            return
        self._add(payload, (kind, count, keys_size, invalidate_size, events_size, 0, 0), 0)

    def _add(
        self, payload: memoryview, header: tuple[bytes, int, int, int, int, int, int], end: int
    ) -> None:
        _, count, keys_size, invalidate_size, _, _, _ = header
        at = keys_size + invalidate_size
        keys = bytes(payload[:keys_size]).split(b"\n") if count else []
        invalidate = bytes(payload[keys_size:at]) or None
        ends = array("Q")
        ends.frombytes(payload[at : at + 8 * count])
        events = payload[at + 8 * count :]
        starts = [0, *ends]
        # memoryview slices: the events stay where they are until the output is written.
        slices = [events[start:stop] for start, stop in zip(starts, ends, strict=False)]
        batch = EncodedBatch(keys, slices, invalidate)  # type: ignore[arg-type]
        self.received.append((batch, end))


def _rebuilt_error(kind: bytes, pickled: memoryview) -> ShardstreamError:
    """The worker's exception as it raised it; failing that, its class name in a message."""
    try:
        error = pickle.loads(pickled)
    except Exception as exc:
        return ShardstreamError(f"a worker failed with {kind.decode(errors='replace')} ({exc})")
    if isinstance(error, ShardstreamError):
        return error
    return ShardstreamError(f"a worker failed: {error!r}")
