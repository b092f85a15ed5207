"""Stage 3: one oplog entry (or unwound transaction op) becomes one change event.

Emulates ``ChangeStreamDefaultEventTransformation`` (change_stream_event_transform.cpp)
and routes writes to ``system.views`` to :mod:`view_event`, as ``getBuilder`` does.
The event is built field by field in the server's order (``makeChangeStreamDocument``);
a few fields (``to``, ``reshardingUUID``, ``txnNumber``, ``lsid``) come before ``_id``.
Payload documents are copied as they are, never re-ordered or re-typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import TransformError
from shardstream.resume_token import ResumeTokenData, encode_token, event_token_data
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.options import ChangeStreamOptions, StreamScope
from shardstream.transform.stages.ddl_description import (
    DdlEvent,
    describe_command,
    describe_noop,
    namespace_field,
    split_namespace,
)
from shardstream.transform.stages.entry_fields import (
    WRONG_TYPE,
    as_uuid,
    check_op,
    document_field,
    wall_time,
)
from shardstream.transform.stages.legacy_formats import new_shard_event_name
from shardstream.transform.stages.view_event import VIEWS_COLLECTION, view_event
from shardstream.transform.update.legacy_update_description import (
    legacy_update_description,
    raw_update_description,
)
from shardstream.transform.update.update_description import parse_update_diff

_OPS_WITHOUT_UUID: Final = frozenset({f.INVALIDATE, f.DROP_DATABASE, f.END_OF_TRANSACTION})


class EventTransform:
    """Turns entries that passed the oplog filter into :class:`ChangeEvent` values."""

    __slots__ = (
        "_images",
        "_new_shard_name",
        "_ns_type",
        "_options",
        "_post_image_slot",
        "_resume",
        "_single_collection",
        "_version",
    )

    def __init__(self, options: ChangeStreamOptions) -> None:
        self._options = options
        self._version = options.default_token_version
        self._resume = options.resume_token
        self._single_collection = options.scope is StreamScope.COLLECTION
        # fullDocument for updates fills a slot reserved right after wallTime.
        self._post_image_slot = options.wants_post_image
        self._images = options.wants_images
        # The new-shard event's name follows the stream's default token version, not the
        # version of each token (getNewShardDetectedOpName reads changeStreamTokenVersion).
        self._new_shard_name = new_shard_event_name(
            self._version, removed_legacy_name=options.at_least(7, 1)
        )
        # nsType on create events shipped in 8.0.5 (the 8.0-line transform at 00587bf0 has it;
        # the manual marks it "new in 8.0.5"); a (major, minor) version means its newest patch.
        self._ns_type = options.at_least(8, 0)

    def __call__(self, entry: Mapping[str, Any]) -> ChangeEvent:
        """Transform one entry; raise TransformError naming its ``ts`` if it is malformed."""
        ts = entry.get("ts")
        try:
            if not isinstance(ts, Timestamp):
                raise TransformError(f"expected ts to be a Timestamp, got {ts!r:.60}")
            namespace = entry.get("ns")
            if type(namespace) is not str:  # not bson.code.Code, a str subclass
                # server: applyTransformation's checkValueType(ns, String) uasserts 40532.
                raise TransformError(
                    f"expected ns to be a string, got {namespace!r:.100}", code=WRONG_TYPE
                )
            check_op(entry.get("op"))
            if not self._single_collection and namespace.partition(".")[2] == VIEWS_COLLECTION:
                return view_event(entry, ts, self._token_data, with_ns_type=self._ns_type)
            return self._default_event(entry, ts, namespace)
        except TransformError as exc:
            raise exc.at(ts) from None

    def token_version_at(self, cluster_time: Timestamp, txn_op_index: int) -> int:
        """The token version of an event: the resumed token's until the stream passes it."""
        resume = self._resume
        if resume is None or cluster_time > resume.cluster_time:
            return self._version
        return self._version if txn_op_index > resume.txn_op_index else resume.version

    def _default_event(
        self, entry: Mapping[str, Any], ts: Timestamp, namespace: str
    ) -> ChangeEvent:
        op = entry.get("op")
        leading: dict[str, Any] = {}
        full_document: Any = None
        document_key: Any = None
        update_description: Any = None
        description: Any = None
        state_before_change: Any = None
        ns_type: str | None = None
        db, coll_name = split_namespace(namespace)
        coll: str | None = coll_name
        has_ns = True
        if op == "i":
            operation_type = f.INSERT
            full_document = document_field(entry, "o")
            document_key = entry.get("o2")
            if document_key is None:
                document_key = {"_id": full_document.get("_id")}
        elif op == "d":
            operation_type = f.DELETE
            document_key = document_field(entry, "o")
        elif op == "u":
            operation_type, full_document, update_description = self._update(entry)
            document_key = entry.get("o2")
        elif op == "c":
            ddl = describe_command(db, document_field(entry, "o"), entry.get("o2"))
            operation_type, description, state_before_change = self._apply_ddl(ddl, leading)
            db, coll = ddl.db or db, ddl.coll
            if operation_type == f.CREATE and self._options.show_expanded_events:
                ns_type = "collection" if self._ns_type else None
        elif op == "n":
            ddl = describe_noop(
                namespace,
                entry.get("o2"),
                new_shard_name=self._new_shard_name,
                reads_legacy_type=not self._options.at_least(7, 0),
            )
            operation_type, description, state_before_change = self._apply_ddl(ddl, leading)
            has_ns = ddl.db is not None
        else:  # check_op let only the five op types through
            raise AssertionError(op)
        ui = entry.get("ui")
        if ui is None and operation_type not in _OPS_WITHOUT_UUID:
            raise TransformError(
                f"expected a collection UUID (ui) on a {operation_type} entry, got none",
                code=7826901,
            )
        txn_op_index = entry.get(f.TXN_OP_INDEX)
        if txn_op_index is not None:
            for name in (f.TXN_NUMBER, f.LSID):
                if name in entry:
                    leading[name] = entry[name]
        data = self._token_data(
            ts, txn_op_index or 0, ui, operation_type, document_key, description
        )
        token = encode_token(data)
        event = leading
        event[f.ID] = token.to_document()
        event[f.OPERATION_TYPE] = operation_type
        event[f.CLUSTER_TIME] = ts
        if self._options.show_commit_timestamp and f.COMMIT_TIMESTAMP in entry:
            event[f.COMMIT_TIMESTAMP] = entry[f.COMMIT_TIMESTAMP]
        if self._options.show_expanded_events and ui is not None:
            event[f.COLLECTION_UUID] = ui
        event[f.WALL_TIME] = wall_time(entry)
        if full_document is not None:
            event[f.FULL_DOCUMENT] = full_document
        elif self._post_image_slot and operation_type == f.UPDATE:
            event[f.FULL_DOCUMENT] = None  # the post-image stage fills this slot
        if has_ns:
            event[f.NS] = namespace_field(db, coll)
        if document_key is not None and op in ("i", "u", "d"):
            event[f.DOCUMENT_KEY] = document_key
        if self._options.show_expanded_events and description is not None:
            event[f.OPERATION_DESCRIPTION] = description
        if update_description is not None:
            name = (
                f.RAW_UPDATE_DESCRIPTION
                if self._options.show_raw_update_description
                else (f.UPDATE_DESCRIPTION)
            )
            event[name] = update_description
        if state_before_change is not None:
            event[f.STATE_BEFORE_CHANGE] = state_before_change
        if ns_type is not None:
            event[f.NS_TYPE] = ns_type
        change = ChangeEvent(event, token, data)
        if self._images and operation_type in (f.UPDATE, f.REPLACE, f.DELETE):
            apply_ops_ts = entry.get(f.APPLY_OPS_TS)
            change.pre_image_id = (
                ui,
                apply_ops_ts if apply_ops_ts is not None else ts,
                entry.get(f.APPLY_OPS_INDEX) or 0,
            )
        if operation_type == f.UPDATE:
            # The oplog's own diff: post-images and lakehouse mirrors replay it exactly.
            change.raw_update = entry.get("o")
        return change

    def _apply_ddl(self, ddl: DdlEvent, leading: dict[str, Any]) -> tuple[str, Any, Any]:
        leading.update(ddl.leading)
        return ddl.operation_type, ddl.description, ddl.state_before_change

    def _update(self, entry: Mapping[str, Any]) -> tuple[str, Any, Any]:
        o = document_field(entry, "o")
        version = o.get("$v")
        # Value::getInt() reads an int32 (an int64's low word); a double 2.0 is not 2.
        if type(version) in (int, Int64) and version == 2:
            diff = o.get("diff")
            if not isinstance(diff, Mapping):
                raise TransformError(  # server: checkValueType(o.diff, Object)
                    f"expected o.diff to be a document, got {diff!r:.100}", code=WRONG_TYPE
                )
            if self._options.show_raw_update_description:
                return f.UPDATE, None, raw_update_description(o)
            description = parse_update_diff(
                diff,
                with_disambiguated_paths=(
                    self._options.show_expanded_events and self._options.at_least(6, 1)
                ),
            )
            return f.UPDATE, None, description
        if not self._options.at_least(7, 0):
            # 6.x still converts pre-5.0 modifier updates; anything with an _id replaces.
            if "_id" in o:
                return f.REPLACE, o, None
            if self._options.show_raw_update_description:
                return f.UPDATE, None, raw_update_description(o)
            return f.UPDATE, None, legacy_update_description(o)
        # 7.0+: a present $v (even null) that is not 2 fails, as does a modifier without _id.
        if "$v" in o or "_id" not in o:
            raise TransformError(
                f"Unsupported or missing oplog version, $v: {version!r}", code=6741200
            )
        return f.REPLACE, o, None

    def _token_data(
        self,
        ts: Timestamp,
        txn_op_index: int,
        ui: Any,
        operation_type: str,
        document_key: Any,
        description: Any,
    ) -> ResumeTokenData:
        return event_token_data(
            cluster_time=ts,
            operation_type=operation_type,
            version=self.token_version_at(ts, txn_op_index),
            txn_op_index=txn_op_index,
            uuid=as_uuid(ui),
            document_key=document_key,
            operation_description=description,
        )
