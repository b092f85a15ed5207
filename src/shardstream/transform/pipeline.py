"""Assembly: one shard's change-stream pipeline, stage by stage in the server's order.

Mirrors ``buildPipeline`` (change_stream_pipeline_helpers.cpp).  Feed it every
oplog entry of one shard, oldest first; it returns the events that entry yields.
Entries that produce nothing still count: the caller uses their ``ts`` as the
shard's position.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from shardstream.errors import ConfigurationError, TransformError
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.event_size_limit import check_event
from shardstream.transform.lookup import DocumentLookup
from shardstream.transform.options import ChangeStreamOptions
from shardstream.transform.stages.add_post_image import AddPostImage
from shardstream.transform.stages.add_pre_image import AddPreImage
from shardstream.transform.stages.check_invalidate import CheckInvalidate
from shardstream.transform.stages.check_resumability import CheckResumability
from shardstream.transform.stages.ensure_resume_token_present import EnsureResumeTokenPresent
from shardstream.transform.stages.event_transform import EventTransform
from shardstream.transform.stages.oplog_match import OplogMatch
from shardstream.transform.stages.split_large_event import SplitLargeEventStage
from shardstream.transform.stages.unwind_transaction import TransactionHistory, UnwindTransaction


class ShardPipeline:
    """The stages one shard runs, plus the router-side ones when ``single_shard``.

    Args:
        options: the stream's options.
        history: reads transaction entries older than the stream's start.
        lookup: needed when ``full_document`` / ``full_document_before_change`` ask
            for images; without one those options raise ConfigurationError.
        single_shard: also run the stages mongos runs after the merge
            (EnsureResumeTokenPresent, the classic-event filter, split large events),
            for a stream of one shard or replica set.
    """

    def __init__(
        self,
        options: ChangeStreamOptions,
        *,
        history: TransactionHistory | None = None,
        lookup: DocumentLookup | None = None,
        single_shard: bool = True,
    ) -> None:
        if options.wants_images and lookup is None:
            raise ConfigurationError(
                f"full_document={options.full_document!r} / full_document_before_change="
                f"{options.full_document_before_change!r} need a document lookup (a live "
                "cluster); a replay of oplog files has none"
            )
        self.options = options
        # 1. Filter raw entries first: everything later only sees what a change stream can report.
        self._match = OplogMatch(options)
        # 2. Unwind transactions before the transform: each op becomes its own event.
        self._unwind = UnwindTransaction(
            self._match.matches_inner_op, history, reads_multi_op_type=options.at_least(8, 0)
        )
        # 3. Transform ops to events; tokens are built here, so every later stage can compare them.
        self._transform = EventTransform(options)
        # 3b. The namespace filter, exactly, on what stage 1 kept for it: events name their
        # namespaces plainly (a rename's two, a dropDatabase's database).
        self._namespaces = options.namespace_filter
        # 4. Invalidate right after the triggering event, before anything can filter it out.
        self._check_invalidate = CheckInvalidate(options)
        # 5. Resumability compares tokens, which exist only after the transform.
        self._check_resumability = CheckResumability(options.resume_token)
        # 7. Images only for events that survive the resume check (each costs a lookup).
        self._images: list[AddPreImage | AddPostImage] = []
        if lookup is not None and options.wants_pre_image:
            self._images.append(AddPreImage(options.full_document_before_change, lookup))
        if lookup is not None and options.wants_post_image:
            self._images.append(AddPostImage(options.full_document, lookup))
        self._single_shard = single_shard
        # 9. On mongos after the merge; here when this pipeline is the whole stream.
        self._ensure_token = EnsureResumeTokenPresent(options.resume_token)
        # 11. Split last: fragments must be cut from the final event.
        resume = options.resume_token
        self._split = (
            SplitLargeEventStage(
                resume if resume is not None and resume.fragment_num is not None else None,
                swallow_resume_point=single_shard,
            )
            if options.split_large_events
            else None
        )
        self.closed = False

    def process(self, entry: Mapping[str, Any]) -> list[ChangeEvent]:
        """Return the events ``entry`` yields (none once the stream is invalidated)."""
        if self.closed:
            return []
        self._unwind.remember(entry)
        if not self._match(entry):
            return []
        if self._unwind.is_unwindable(entry):
            try:
                inputs: Iterable[Mapping[str, Any]] = list(self._unwind.unwind(entry))
            except TransformError as exc:
                raise exc.at(entry.get("ts")) from None
        else:
            inputs = (entry,)
        events: list[ChangeEvent] = []
        for op in inputs:
            for event in self._check_invalidate(self._transform(op)):
                kept = self._after_transform(event)
                events.extend(kept)
            if self._check_invalidate.invalidated:
                self.closed = True
                break
        return events

    def _after_transform(self, event: ChangeEvent) -> list[ChangeEvent]:
        namespaces = self._namespaces
        if (
            namespaces is not None
            and not namespaces.selects_event(event.document)
            and event.operation_type not in f.NEW_SHARD_EVENTS  # the merger's, not the user's
        ):
            return []
        resumed = self._check_resumability(event)
        if resumed is None:
            return []
        for add_image in self._images:
            resumed = add_image(resumed)
        if not self._single_shard:
            # A shard sends the event with its $sortKey metadata (event_size_limit). Events
            # are not split here (split_large_events is emulated for one shard only), so
            # every event is checked: never one the server would not send whole.
            check_event(resumed, with_sort_key=True)
            return [resumed]
        present = self._ensure_token(resumed)
        if present is None:
            return []
        if not self.options.show_expanded_events and (
            present.operation_type not in f.CLASSIC_OPERATION_TYPES
        ):
            # 10. The final $match that hides expanded events when they were not asked for.
            return []
        if self._split is None:
            check_event(present, with_sort_key=False)
            return [present]
        return self._split_event(present)

    def _split_event(self, event: ChangeEvent) -> list[ChangeEvent]:
        assert self._split is not None
        pieces = self._split.process(event.document, event.token_data)
        if len(pieces) == 1 and pieces[0] is event.document:
            return [event]
        kind = event.operation_type
        return [ChangeEvent.from_document(piece, fragment_of=kind) for piece in pieces]


def transform_oplog(
    entries: Iterable[Mapping[str, Any]],
    options: ChangeStreamOptions,
    *,
    history: TransactionHistory | None = None,
    lookup: DocumentLookup | None = None,
) -> Iterator[ChangeEvent]:
    """Run one shard's (or replica set's) oplog through the whole change-stream pipeline.

    Stops after an invalidate.  Raises TransformError for an entry the server
    would fail on, and ResumeTokenNotFound when a resumed stream misses its token.
    The entries are taken in the order given, as the server's stages take them: an
    oplog's own order rule is checked by its readers (:mod:`shardstream.oplog.ts_order`).
    """
    pipeline = ShardPipeline(options, history=history, lookup=lookup)
    for entry in entries:
        yield from pipeline.process(entry)
        if pipeline.closed:
            return
