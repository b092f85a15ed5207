"""The server's change-stream stages, one module each, named after the server's stage.

In the order :mod:`shardstream.transform.pipeline` runs them: ``oplog_match`` (1),
``unwind_transaction`` (2), ``event_transform`` (3, with its parts ``ddl_description``,
``view_event`` and ``legacy_formats``), ``check_invalidate`` (4), ``check_resumability``
(5), ``add_pre_image`` / ``add_post_image`` (7), ``split_large_event`` (last on a shard) and
``ensure_resume_token_present`` (9, on mongos after the merge). Server:
src/mongo/db/pipeline/document_source_change_stream_*.cpp.
"""

from __future__ import annotations
