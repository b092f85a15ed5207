"""ResumeTokenData: the decoded fields of a change-stream resume token.

Mirrors the server's ``ResumeTokenData`` (resume_token.h).  The field order is
the token's sort order: clusterTime, version, tokenType, txnOpIndex,
fromInvalidate, uuid, documentKey / eventIdentifier, fragmentNum.
"""

from __future__ import annotations

import dataclasses
import uuid as uuid_module
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Final

from bson.timestamp import Timestamp

DEFAULT_TOKEN_VERSION: Final = 2  # what 6.1+ servers emit

# Events whose v0/v1 token holds the bare documentKey (change_stream_helpers_legacy.h);
# every other ("expanded") event, and every v2 event, carries an eventIdentifier document.
CLASSIC_OPERATION_TYPES: Final = frozenset(
    {
        "insert",
        "update",
        "replace",
        "delete",
        "drop",
        "rename",
        "dropDatabase",
        "invalidate",
        "reshardBegin",
        "reshardBlockingWrites",
        "reshardDoneCatchUp",
        "kNewShardDetected",
    }
)


class TokenType(IntEnum):
    """What a token marks: a point in time, or one event."""

    HIGH_WATER_MARK = 0
    EVENT = 128


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResumeTokenData:
    """The fields of a resume token, as the server's ``ResumeTokenData``.

    Attributes:
        cluster_time: the event's (or point's) cluster time.
        version: token format 0, 1 or 2.
        token_type: ``TokenType.EVENT`` (128) or ``TokenType.HIGH_WATER_MARK`` (0).
        txn_op_index: 0-based position of the op within its transaction, else 0.
        from_invalidate: true for the token of an ``invalidate`` event.
        uuid: the collection UUID, or None (dropDatabase, HWM tokens, ...).
        document_key: v0/v1 only: the documentKey slot (for expanded events, the
            ``{operationType, operationDescription}`` document); None when absent.
        event_identifier: v2 only: ``{operationType, documentKey | operationDescription}``.
        fragment_num: v2 only: 0-based fragment of a split large event, or None.

    >>> high_water_mark(Timestamp(1700000000, 7)).token_type
    <TokenType.HIGH_WATER_MARK: 0>
    """

    cluster_time: Timestamp
    version: int = DEFAULT_TOKEN_VERSION
    token_type: int = TokenType.EVENT
    txn_op_index: int = 0
    from_invalidate: bool = False
    uuid: uuid_module.UUID | None = None
    document_key: Any = None
    event_identifier: Mapping[str, Any] | None = None
    fragment_num: int | None = None

    @property
    def is_high_water_mark(self) -> bool:
        """Whether this is a high-water-mark (point-in-time) token."""
        return self.token_type == TokenType.HIGH_WATER_MARK

    @property
    def event_slot(self) -> Any:
        """The value in the documentKey / eventIdentifier slot (None when absent)."""
        return self.event_identifier if self.version >= 2 else self.document_key


def high_water_mark(
    cluster_time: Timestamp, version: int = DEFAULT_TOKEN_VERSION
) -> ResumeTokenData:
    """Return the data of a high-water-mark token at ``cluster_time``.

    Such a token marks a point with no event: it is the ``postBatchResumeToken``
    of an idle stream and what ``startAtOperationTime`` resumes from.
    """
    return ResumeTokenData(
        cluster_time=cluster_time, version=version, token_type=TokenType.HIGH_WATER_MARK
    )


def invalidate_of(invalidating_event: ResumeTokenData) -> ResumeTokenData:
    """Return the token data of the ``invalidate`` that follows ``invalidating_event``.

    The server copies the drop/rename/dropDatabase token and sets only
    ``fromInvalidate``; the operationType inside stays the invalidating one.
    """
    return dataclasses.replace(invalidating_event, from_invalidate=True)


def event_token_data(
    *,
    cluster_time: Timestamp,
    operation_type: str,
    version: int = DEFAULT_TOKEN_VERSION,
    txn_op_index: int = 0,
    uuid: uuid_module.UUID | None = None,
    document_key: Any = None,
    operation_description: Any = None,
) -> ResumeTokenData:
    """Return the token data of an event, choosing its identifier as the server does.

    A v0/v1 classic event carries the bare documentKey (possibly none); every
    other event carries ``{operationType, documentKey}`` when there is a
    documentKey, otherwise ``{operationType, operationDescription}`` (left out
    when there is none either).
    """
    if version <= 1 and operation_type in CLASSIC_OPERATION_TYPES:
        return ResumeTokenData(
            cluster_time=cluster_time,
            version=version,
            txn_op_index=txn_op_index,
            uuid=uuid,
            document_key=document_key,
        )
    identifier: dict[str, Any] = {"operationType": operation_type}
    if document_key is not None:
        identifier["documentKey"] = document_key
    elif operation_description is not None:
        identifier["operationDescription"] = operation_description
    if version <= 1:
        return ResumeTokenData(
            cluster_time=cluster_time,
            version=version,
            txn_op_index=txn_op_index,
            uuid=uuid,
            document_key=identifier,
        )
    return ResumeTokenData(
        cluster_time=cluster_time,
        version=version,
        txn_op_index=txn_op_index,
        uuid=uuid,
        event_identifier=identifier,
    )
