"""Update entries: ``$v:2`` diffs and ``$v:1`` modifiers, read and applied as mongod does.

``update_description`` turns an entry's ``o.diff`` into the event's ``updateDescription``
(change_stream_document_diff_parser.cpp), ``legacy_update_description`` a pre-5.0 modifier
update's ``o`` (change_stream_event_transform.cpp); ``apply_update`` / ``apply_update_v1`` apply it
to a document (post images, the simulator, the mirror), as update/ in the server does;
``apply_update_bson`` does it on BSON bytes in C where that gives the same bytes.
"""

from __future__ import annotations

from shardstream.transform.update.apply_update import apply_update
from shardstream.transform.update.legacy_update_description import legacy_update_description
from shardstream.transform.update.update_description import parse_update_diff

__all__ = ["apply_update", "legacy_update_description", "parse_update_diff"]
