"""Sync: a run of planned writes sent to the target as ordered ``update`` / ``delete`` commands.

Each write already is its command's statement in BSON (:mod:`.write_statements`), so a run
goes out as ``{update: coll, updates: [statement, ...], ordered: true}`` (``delete`` /
``deletes`` for deletes) through pymongo's ``Database.command``, each statement copied into
the command as its bytes.  pymongo's bulk API would take a model per write, check it, batch
it and encode it, which cost the sync more CPU than reading the event
(``benchmarks/README.md``, "Write statements from the events' bytes").

What the bulk API did that matters here is done the same way:

* a command holds at most :data:`MAX_STATEMENTS` statements and :data:`MAX_COMMAND_BYTES`
  of them, under the server's limits on a command (``maxWriteBatchSize``, and
  ``BSONObjMaxInternalSize``: 16 MiB + 16 KiB for a command's body); a statement too big to
  share a command body goes alone through the bulk API, whose document sequence carries it;
* the first refused write stops the run (ordered) and raises
  :class:`~pymongo.errors.BulkWriteError` with the bulk API's ``details`` shape (its
  ``writeErrors[0].index`` counts in the writes passed); a write concern error alone raises
  :class:`~pymongo.errors.WriteConcernError` with its code, which the retry judges;
* outside a transaction the command carries the writers' write concern (majority); inside
  one the commit does.

Connection errors are not retried here: the writes are idempotent, and the caller's retry
(:mod:`.target_retry`) sends the run again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import bson
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo.client_session import ClientSession
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, WriteConcernError

from shardstream.cluster_sync.apply_rules import CrudWrite
from shardstream.cluster_sync.write_statements import DELETE, RawStatement

# The server's default maxWriteBatchSize (src/mongo/s/write_ops/batched_command_request.h:
# write_ops::kMaxWriteBatchSize); a batch of the sync is far smaller by default.
MAX_STATEMENTS: Final = 100_000
# A command's body may hold BSONObjMaxInternalSize = 16 MiB + 16 KiB: the statements get
# 16 MiB less 64 KiB, which leaves the command's own fields (session, cluster time,
# write concern: well under 1 KiB) room to spare. Each statement costs its bytes plus its
# array key and type byte (at most 8 bytes below MAX_STATEMENTS).
MAX_COMMAND_BYTES: Final = 16 * 1024 * 1024 - 64 * 1024
_KEY_BYTES: Final = 8
_MAJORITY: Final = {"w": "majority"}
# Replies read lazily: a real server lists every upsert's _id, which nobody here reads.
_RAW_REPLY: Final[CodecOptions[RawBSONDocument]] = CodecOptions(document_class=RawBSONDocument)


def send_statements(
    collection: Collection[Any],
    writes: Sequence[CrudWrite],
    session: ClientSession | None = None,
) -> None:
    """Apply ``writes`` to ``collection`` in order, as ordered write commands.

    ``session``: the transaction to write in (None: none, with majority write concern).

    Raises:
        BulkWriteError: the first write the target refused (``details["writeErrors"][0]``,
            its ``index`` in ``writes``; nothing after it was sent).
        WriteConcernError: the writes were applied but not acknowledged as asked.
        pymongo.errors.PyMongoError: the command failed as a whole (a lost connection, say).
    """
    start = 0
    while start < len(writes):
        end = _run_end(writes, start)
        if end == start:  # one statement above a command body's share: the bulk API's
            _send_alone(collection, writes[start], start, session)
            start += 1
            continue
        deletes = writes[start].deletes
        statements = [RawStatement(write.statement) for write in writes[start:end]]
        command: dict[str, Any] = {
            "delete" if deletes else "update": collection.name,
            "deletes" if deletes else "updates": statements,
            "ordered": True,
        }
        if session is None or not session.in_transaction:
            command["writeConcern"] = _MAJORITY
        reply = collection.database.command(command, session=session, codec_options=_RAW_REPLY)
        _check(reply, start)
        start = end


def _run_end(writes: Sequence[CrudWrite], start: int) -> int:
    """The end of the command starting at ``start``: writes of one kind, within the limits
    (``start`` itself when its statement alone is over them)."""
    kind = writes[start].kind
    deletes = kind == DELETE
    end, size = start, 0
    stop = min(len(writes), start + MAX_STATEMENTS)
    while end < stop:
        write = writes[end]
        if (write.kind == DELETE) is not deletes:
            break
        size += len(write.statement) + _KEY_BYTES
        if size > MAX_COMMAND_BYTES:
            break
        end += 1
    return end


def _send_alone(
    collection: Collection[Any], write: CrudWrite, index: int, session: ClientSession | None
) -> None:
    try:
        collection.bulk_write([write.model], ordered=True, session=session)
    except BulkWriteError as exc:
        details = dict(exc.details)
        if not details.get("writeErrors"):  # as _check gives it on the commands' path
            raise _concern_error(details["writeConcernErrors"][0]) from None
        raise _offset(details, index) from None


def _check(reply: Mapping[str, Any], offset: int) -> None:
    """Raise the bulk API's error for a reply with a refused write; a write concern error
    alone as :class:`~pymongo.errors.WriteConcernError`, which the caller's retry sends again
    when its code says the target is away (a stepped-down primary, say), as the tailers'
    classification does."""
    errors = reply.get("writeErrors")
    concern = reply.get("writeConcernError")
    if not errors and not concern:
        return
    if not errors:
        raise _concern_error(_decoded(concern))
    raise _offset(
        {
            "writeErrors": [_decoded(error) for error in errors][:1],
            "writeConcernErrors": [_decoded(concern)] if concern else [],
            "nInserted": 0,
            "nUpserted": 0,
            "nMatched": 0,
            "nModified": 0,
            "nRemoved": 0,
            "upserted": [],
        },
        offset,
    )


def _concern_error(details: Mapping[str, Any]) -> WriteConcernError:
    return WriteConcernError(str(details.get("errmsg")), details.get("code"), details)


def _offset(details: dict[str, Any], offset: int) -> BulkWriteError:
    for error in details["writeErrors"]:
        error["index"] = int(error["index"]) + offset
    return BulkWriteError(details)


def _decoded(document: Any) -> dict[str, Any]:
    return bson.decode(document.raw) if isinstance(document, RawBSONDocument) else dict(document)
