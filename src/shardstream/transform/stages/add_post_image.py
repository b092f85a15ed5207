"""Stage 7b: ``fullDocument`` for update events (``fullDocument`` option).

Emulates ``DocumentSourceChangeStreamAddPostImage``
(document_source_change_stream_add_post_image.cpp).  ``updateLookup`` reads the
current document; ``whenAvailable`` / ``required`` apply the update to the stored
pre-image, as the server does.  The value fills the slot reserved after
``wallTime``; a missing image is ``null``, or an error under ``required``.
"""

from __future__ import annotations

from shardstream.errors import TransformError
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.lookup import DocumentLookup
from shardstream.transform.update.apply_update import apply_update

_NO_MATCHING_DOCUMENT = 47


class AddPostImage:
    """Fills ``fullDocument`` of update events from a :class:`DocumentLookup`."""

    __slots__ = ("_lookup", "_mode")

    def __init__(self, mode: str, lookup: DocumentLookup) -> None:
        self._mode = mode
        self._lookup = lookup

    def __call__(self, event: ChangeEvent) -> ChangeEvent:
        """Return ``event`` with its post-image in place (updates only)."""
        if event.operation_type != f.UPDATE:
            return event
        document = event.document
        if self._mode == "updateLookup":
            ns = document[f.NS]
            image = self._lookup.current_document(
                ns["db"], ns.get("coll", ""), document[f.DOCUMENT_KEY]
            )
        else:
            image = None
            if event.pre_image_id is not None:
                pre_image = self._lookup.pre_image(*event.pre_image_id)
                if pre_image is not None:
                    image = apply_update(pre_image, event.raw_update)
            if image is None and self._mode == "required":
                raise TransformError(
                    "Change stream was configured to require a post-image for all update events, "
                    f"but the post-image was not found for event: {document[f.ID]!r}",
                    ts=document[f.CLUSTER_TIME],
                    code=_NO_MATCHING_DOCUMENT,
                )
        document[f.FULL_DOCUMENT] = image
        return event
