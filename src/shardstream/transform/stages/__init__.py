"""The server's change-stream stages, one module each, named after the server's stage.

In the order :mod:`shardstream.transform.pipeline` runs them: ``oplog_match`` (1),
``unwind_transaction`` (2), ``event_transform`` (3, with its parts ``ddl_description``,
``view_event`` and ``legacy_formats``), ``check_invalidate`` (4), ``check_resumability``
(5), ``add_pre_image`` / ``add_post_image`` (7), ``split_large_event`` (last on a shard) and
``ensure_resume_token_present`` (9, on mongos after the merge). Server:
src/mongo/db/pipeline/document_source_change_stream_*.cpp.
"""

from __future__ import annotations

from shardstream.transform.stages.add_post_image import AddPostImage
from shardstream.transform.stages.add_pre_image import AddPreImage
from shardstream.transform.stages.check_invalidate import CheckInvalidate
from shardstream.transform.stages.check_resumability import CheckResumability
from shardstream.transform.stages.ensure_resume_token_present import EnsureResumeTokenPresent
from shardstream.transform.stages.event_transform import EventTransform
from shardstream.transform.stages.oplog_match import OplogMatch
from shardstream.transform.stages.split_large_event import SplitLargeEventStage
from shardstream.transform.stages.unwind_transaction import UnwindTransaction

__all__ = [
    "AddPostImage",
    "AddPreImage",
    "CheckInvalidate",
    "CheckResumability",
    "EnsureResumeTokenPresent",
    "EventTransform",
    "OplogMatch",
    "SplitLargeEventStage",
    "UnwindTransaction",
]
