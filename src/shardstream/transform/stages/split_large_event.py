"""Last shard stage: emulates document_source_change_stream_split_large_event.cpp.

That is ``$changeStreamSplitLargeEvent`` and its helper ``splitChangeEvent``
(change_stream_split_event_helpers.cpp), as of mongodb/mongo @1c287af4. The stage runs on each
shard, after the pre-/post-image stages:

* An event is left whole when its BSON size plus its token's size is at most
  ``MAX_CHANGE_EVENT_SIZE`` (16 MiB + 8 KiB). On a sharded cluster the shard cursor needs merging,
  so the size includes the ``$sortKey: [token]`` metadata the shard sends to mongos.
* Otherwise every field except ``_id`` goes, smallest BSON element first (ties by field name),
  greedily into fragments of at most ``MAX_CHANGE_EVENT_SIZE - token size`` bytes. Each fragment
  is ``{_id: <token with fragmentNum = i>, splitEvent: {fragment: i + 1, of: n}, <fields...>}``.
* When resuming from a fragment token, the first event the stage sees is compared with it; if it
  is the resumed event, the fragments *before* the resumed one are skipped. The resumed fragment
  itself is regenerated so that mongos's EnsureResumeTokenPresent can find and swallow it.

Complexity: O(size of the event), each field is BSON-encoded once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.binary import UuidRepresentation
from bson.codec_options import CodecOptions

from shardstream.errors import ConfigurationError, TransformError
from shardstream.resume_token import ResumeTokenData, encode_token
from shardstream.transform.event_size_limit import BSON_OBJ_MAX_INTERNAL_SIZE
from shardstream.transform.stages.check_resumability import ResumeStatus, compare_with_resume_token

# kBSONObjMaxChangeEventSize: the stage's limit, leaving 8 KiB of the internal size for the reply.
MAX_CHANGE_EVENT_SIZE: Final = BSON_OBJ_MAX_INTERNAL_SIZE - 8 * 1024

CHANGE_STREAM_FATAL_ERROR: Final = 280
ID_FIELD: Final = "_id"
SPLIT_EVENT_FIELD: Final = "splitEvent"
SORT_KEY_FIELD: Final = "$sortKey"

_EMPTY_DOCUMENT_SIZE: Final = 5  # int32 length + terminating NUL
# Native UUIDs encode as subtype 4, the same size as Binary(..., 4); only sizes matter here.
_CODEC: Final[CodecOptions[dict[str, Any]]] = CodecOptions(
    uuid_representation=UuidRepresentation.STANDARD
)


def _element_size(name: str, value: Any) -> int:
    """BSON size of one element (type byte, name, NUL, value): ``BSONElement::size()``."""
    return len(bson.encode({name: value}, codec_options=_CODEC)) - _EMPTY_DOCUMENT_SIZE


def _sort_key_size(token_document: Mapping[str, Any]) -> int:
    # Metadata serialises a single-element sort key as an array: $sortKey: [token].
    return _element_size(SORT_KEY_FIELD, [token_document])


def _event_bson_size(event: Mapping[str, Any], sort_key: Mapping[str, Any] | None) -> int:
    """Return the event's serialised size, as ``processChangeEventBeforeSplit``.

    Args:
        event: the change event.
        sort_key: the token document the shard sends as ``$sortKey`` metadata when its cursor
            needs merging (always on a sharded cluster), or None when no metadata is sent.
    """
    size = _EMPTY_DOCUMENT_SIZE + sum(_element_size(name, value) for name, value in event.items())
    if sort_key is not None:
        size += _sort_key_size(sort_key)
    return size


def split_event(
    event: Mapping[str, Any],
    token_data: ResumeTokenData,
    max_fragment_size: int,
    *,
    skip_first_fragments: int = 0,
) -> list[dict[str, Any]]:
    """Split ``event`` into fragments of at most ``max_fragment_size`` bytes: ``splitChangeEvent``.

    A fragment's size is counted with its ``$sortKey`` metadata, so the BSON a client receives
    is smaller still. The first ``skip_first_fragments`` fragments are built but not returned.

    Raises:
        TransformError: 7182502 when the event has no field but ``_id``; 7182500 when a field is
            too large to fit in a fragment even alone; 7182504 for a v0/v1 token.
    """
    # Smallest first, ties by the field name's bytes (std::map over (size, std::string)), so the
    # first fragment takes as many fields as possible.
    fields = sorted(
        (
            (_element_size(name, value), name.encode(), name, value)
            for name, value in event.items()
            if name != ID_FIELD
        ),
        key=lambda field: (field[0], field[1]),
    )
    if not fields:
        raise TransformError(
            "Cannot split an empty event or an event containing solely '_id' field", code=7182502
        )
    if token_data.version < 2:
        raise TransformError(
            f"Tokens of version {token_data.version} cannot have a fragmentNum", code=7182504
        )
    fragments: list[dict[str, Any]] = []
    index = 0
    while index < len(fields):
        token = encode_token(dataclasses.replace(token_data, fragment_num=len(fragments)))
        token_document = token.to_document()
        # "of" is 0 until the count is known; both are int32, so the size does not change.
        fragment: dict[str, Any] = {
            ID_FIELD: token_document,
            SPLIT_EVENT_FIELD: {"fragment": len(fragments) + 1, "of": 0},
        }
        size = len(bson.encode(fragment, codec_options=_CODEC)) + _sort_key_size(token_document)
        # Always take at least one field, then more while the next one still fits.
        while True:
            field_size, _, name, value = fields[index]
            fragment[name] = value
            size += field_size
            index += 1
            if index == len(fields) or size + fields[index][0] > max_fragment_size:
                break
        if size > max_fragment_size:
            raise TransformError(
                f"Splitting change event failed: fragment size {size} is greater than maximum "
                f"allowed fragment size {max_fragment_size}",
                code=7182500,
            )
        fragments.append(fragment)
    for fragment in fragments:
        fragment[SPLIT_EVENT_FIELD]["of"] = len(fragments)
    return fragments[skip_first_fragments:]


class SplitLargeEventStage:
    """One stream's ``$changeStreamSplitLargeEvent``, with its resume-from-fragment handling.

    Feed it every event the shard produces, in order; it returns what the stage passes on.

    Args:
        resume_after_split: the client's resume token when it carries a ``fragmentNum``.
        max_size: the stage's limit (``kBSONObjMaxChangeEventSize``).
        with_metadata: count ``$sortKey`` in the event's size (true on a shard of a cluster).
        reserve_token_size: add the token's size to the event's before comparing, as master
            (1c287af4) does; the 7.0 line (0127ea7f) compares the bare event size.
        swallow_resume_point: also drop the resumed fragment itself, which mongos's
            EnsureResumeTokenPresent would swallow, giving what the client finally sees.
    """

    def __init__(
        self,
        resume_after_split: ResumeTokenData | None = None,
        *,
        max_size: int = MAX_CHANGE_EVENT_SIZE,
        with_metadata: bool = True,
        reserve_token_size: bool = True,
        swallow_resume_point: bool = False,
    ) -> None:
        if resume_after_split is not None and resume_after_split.fragment_num is None:
            raise ConfigurationError(
                "expected a split event resume token (with a fragmentNum), got one without"
            )
        self._resume_after_split = resume_after_split
        self._max_size = max_size
        self._with_metadata = with_metadata
        self._reserve_token_size = reserve_token_size
        self._swallow_resume_point = swallow_resume_point

    def process(self, event: dict[str, Any], token_data: ResumeTokenData) -> list[dict[str, Any]]:
        """Return ``[event]`` when it fits, else its fragments (minus any skipped on resume).

        Raises:
            TransformError: ChangeStreamFatalError (280) when the resumed event no longer splits
                as it did (too small now, or fewer fragments); 7182805 when the first event
                sorts before the resume point; the splitting errors of :func:`split_event`.
        """
        sort_key = encode_token(token_data).to_document()
        token_size = len(bson.encode(sort_key, codec_options=_CODEC))
        size = _event_bson_size(event, sort_key if self._with_metadata else None)
        if self._reserve_token_size:
            size += token_size
        resumed = self._resumed_fragment(token_data, fits=size <= self._max_size)
        skip = resumed or 0
        if size <= self._max_size:
            return [event]
        fragments = split_event(
            event, token_data, self._max_size - token_size, skip_first_fragments=skip
        )
        if skip > 0 and not fragments:
            raise TransformError(
                "Attempted to resume from a split event, but the resumed stream produced a "
                "different split. Ensure that the pipeline used to resume is the same as the "
                "original",
                code=CHANGE_STREAM_FATAL_ERROR,
            )
        if self._swallow_resume_point and resumed is not None:
            return fragments[1:]
        return fragments

    def _resumed_fragment(self, token_data: ResumeTokenData, *, fits: bool) -> int | None:
        """The resumed fragment's number if this is its event, else None.

        As ``_handleResumeAfterSplit``: the server skips that many fragments, those before the
        resumed one.
        """
        client = self._resume_after_split
        if client is None:
            return None
        # Only the first event is checked: CheckResumability already dropped the older ones.
        self._resume_after_split = None
        status = compare_with_resume_token(token_data, client)
        if status is ResumeStatus.CHECK_NEXT:
            raise TransformError("Observed unexpected event before resume point", code=7182805)
        if status is not ResumeStatus.NEEDS_SPLIT:
            return None  # already past the resume point: it may have been on another shard
        if fits:
            raise TransformError(
                "Attempted to resume from a split event fragment, but the event in the resumed "
                "stream was not large enough to be split",
                code=CHANGE_STREAM_FATAL_ERROR,
            )
        assert client.fragment_num is not None  # checked in __init__
        return client.fragment_num


def split_large_event(
    event: dict[str, Any],
    token_data: ResumeTokenData,
    *,
    max_size: int = MAX_CHANGE_EVENT_SIZE,
    with_metadata: bool = True,
) -> list[dict[str, Any]]:
    """Return ``[event]`` unchanged when it fits, else its fragments, as the server emits them.

    Args:
        event: the change event, an ordered dict of BSON values (``_id`` is its token document).
        token_data: the decoded data of the event's token (must be v2 to split).
        max_size: the stage's limit; tests pass small values.
        with_metadata: count the ``$sortKey`` metadata a shard sends (true on a shard).

    Raises:
        TransformError: see :func:`split_event`.
    """
    stage = SplitLargeEventStage(max_size=max_size, with_metadata=with_metadata)
    return stage.process(event, token_data)
