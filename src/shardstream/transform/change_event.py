"""Value type: one change event with its resume token.

The event document is what a client sees (fields in server order); the token and
its decoded data travel beside it so later stages (invalidate, resumability,
split, merge) never decode ``_id`` again.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from shardstream.resume_token import ResumeToken, ResumeTokenData, decode_token


@dataclasses.dataclass(slots=True)
class ChangeEvent:
    """A change event as the shard pipeline produces it.

    Attributes:
        document: the event, an ordered dict of BSON values; ``document["_id"]`` is
            ``token.to_document()``.
        token: the event's resume token; ``token.sort_key`` orders the merge.
        token_data: the decoded fields of ``token``.
        pre_image_id: (collection UUID, ts, applyOpsIndex) of the entry, the key of
            its pre-image in ``config.system.preimages``; set when images are requested.
        raw_update: the update entry's ``o``, from which a post-image is computed.
        fragment_of: for a fragment of a split event, the whole event's operationType
            (a fragment need not carry the field itself).
        shard: the shard the event came from, in a merged stream.
        encoded: the event's BSON, kept by the size check that encoded it (see
            ``event_bson.event_bson``); None until then.  The document is final by then.
    """

    document: dict[str, Any]
    token: ResumeToken
    token_data: ResumeTokenData
    pre_image_id: tuple[Any, Any, int] | None = None
    raw_update: Any = None
    fragment_of: str | None = None
    shard: str | None = None
    encoded: bytes | None = None

    @classmethod
    def from_document(cls, document: dict[str, Any], fragment_of: str | None = None) -> ChangeEvent:
        """Wrap an event document whose ``_id`` is a token document (decodes it once)."""
        token = ResumeToken.from_document(document["_id"])
        return cls(document, token, decode_token(token), fragment_of=fragment_of)

    @property
    def operation_type(self) -> str:
        """The event's ``operationType``."""
        if self.fragment_of is not None:
            return self.fragment_of
        value: str = self.document["operationType"]
        return value

    @property
    def sort_key(self) -> str:
        """The merge key: the token's ``_data``."""
        return self.token.data
