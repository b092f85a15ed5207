"""Stage 7a: ``fullDocumentBeforeChange`` for update, replace and delete events.

Emulates ``DocumentSourceChangeStreamAddPreImage``
(document_source_change_stream_add_pre_image.cpp): the pre-image is read from the
shard's ``config.system.preimages`` by (collection UUID, ts, applyOps index) and
appended as the event's last field; ``null`` when missing, an error under
``required``.
"""

from __future__ import annotations

from shardstream.errors import TransformError
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.lookup import DocumentLookup

_IMAGE_OPERATIONS = frozenset({f.UPDATE, f.REPLACE, f.DELETE})
_NO_MATCHING_DOCUMENT = 47


class AddPreImage:
    """Appends ``fullDocumentBeforeChange`` from a :class:`DocumentLookup`."""

    __slots__ = ("_lookup", "_mode")

    def __init__(self, mode: str, lookup: DocumentLookup) -> None:
        self._mode = mode
        self._lookup = lookup

    def __call__(self, event: ChangeEvent) -> ChangeEvent:
        """Return ``event`` with ``fullDocumentBeforeChange`` appended (CRUD changes only)."""
        if event.operation_type not in _IMAGE_OPERATIONS or event.pre_image_id is None:
            return event
        image = self._lookup.pre_image(*event.pre_image_id)
        if image is None and self._mode == "required":
            raise TransformError(
                "Change stream was configured to require a pre-image for all update, delete and "
                f"replace events, but the pre-image was not found for event: "
                f"{event.document[f.ID]!r}",
                ts=event.document[f.CLUSTER_TIME],
                code=_NO_MATCHING_DOCUMENT,
            )
        event.document[f.FULL_DOCUMENT_BEFORE_CHANGE] = image
        return event
