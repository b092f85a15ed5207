"""Fast path: one stream's CRUD event templates, cached by the bytes that pick them.

A template (:class:`CrudEventTemplate`) depends on the namespace, the collection
UUID, the operation type and, inside a transaction, the op's index; it also
records whether the stream's oplog filter takes the namespace.  The fast path
looks templates up by the raw bytes it already holds: the op-ns-ui run of an
entry in mongod's layout (``by_run``), or the separate pieces (``by_parts``).
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable
from typing import Any, Final

from shardstream.transform import fields as f
from shardstream.transform.options import ChangeStreamOptions, StreamScope
from shardstream.transform.raw.event_writer import CrudEventTemplate
from shardstream.transform.raw.update_description import (
    raw_update_description_bytes,
    update_description_bytes,
)
from shardstream.transform.stages.oplog_match import OplogMatch
from shardstream.transform.stages.view_event import VIEWS_COLLECTION

INSERT: Final = 0x69  # i
UPDATE: Final = 0x75  # u
DELETE: Final = 0x64  # d
NOOP: Final = 0x6E  # n
COMMAND: Final = 0x63  # c
OPERATION_TYPES: Final = {INSERT: f.INSERT, UPDATE: f.UPDATE, DELETE: f.DELETE}
NOT_BUILT: Final = object()  # a cache miss (None is a cached "not templatable")


def _to_the_reference(_o: bytes) -> None:
    """No description from the fast path: the entry takes the reference path."""


class EventTemplates:
    """The templates of one stream; ``None`` marks what the reference path must decide.

    The two dicts are public so that the hot loops can look up without a call;
    on a miss (``NOT_BUILT``) they call :meth:`build_for_run` / :meth:`build_for_parts`.
    """

    def __init__(self, options: ChangeStreamOptions) -> None:
        self._match = OplogMatch(options)
        self._collection_scope = options.scope is StreamScope.COLLECTION
        self._version = options.default_token_version
        self._expanded = options.show_expanded_events
        # An update's o to its event's description element (None: the reference decides).
        self.update_element: Callable[[bytes], bytes | None] = update_description_bytes
        if options.show_raw_update_description:
            self.update_element = raw_update_description_bytes
        elif self._expanded and options.at_least(6, 1):
            # updateDescription gains disambiguatedPaths, which only the reference writes.
            self.update_element = _to_the_reference
        # op-ns-ui bytes (layout matches; txn op 0) and (run, txn op index) -> template
        self.by_run: dict[Any, CrudEventTemplate | None] = {}
        # op-ns-ui run + "\x03o\x00" (the entry's bytes up to o's value) -> template; only
        # runs a full layout match has vouched for, so a hit proves the layout up to o.
        self.by_head: dict[bytes, CrudEventTemplate | None] = {}
        # the same heads of ops inside applyOps that a whole-op match accepted
        self.op_heads: set[bytes] = set()
        # (ns, ui, op[, txn op index]) -> template
        self.by_parts: dict[tuple[Any, ...], CrudEventTemplate | None] = {}
        # Set to a list to be told, per update event written, (its index in the events
        # list, the entry's ``o``): a lakehouse mirror replays the oplog's own diff, which
        # the event's updateDescription cannot always express.  None (the default): not
        # kept, one attribute test per update.
        self.update_diffs: list[tuple[int, bytes]] | None = None

    def build_for_run(self, run: bytes, txn_op_index: int = 0) -> CrudEventTemplate | None:
        """The template of an op-ns-ui run (``\\x02op..ui`` bytes); checks the ns length once."""
        size = int.from_bytes(run[14:18], "little")
        template: CrudEventTemplate | None = None
        if size >= 1 and len(run) == 18 + size + 25 and run[17 + size] == 0:
            template = self._build(run[18 : 17 + size], run[-16:], run[8], txn_op_index)
        self.by_run[(run, txn_op_index) if txn_op_index else run] = template
        return template

    def build_for_parts(
        self, ns: bytes, ui: bytes, op: int, txn_op_index: int = 0
    ) -> CrudEventTemplate | None:
        """The template of a namespace's bytes, the UUID's 16 bytes and the op character."""
        template = self._build(ns, ui, op, txn_op_index) if len(ui) == 16 else None
        self.by_parts[(ns, ui, op, txn_op_index)] = template
        return template

    def _build(self, ns: bytes, ui: bytes, op: int, txn_op_index: int) -> CrudEventTemplate | None:
        try:
            namespace = ns.decode()
        except UnicodeDecodeError:
            return None
        # A write to system.views becomes a view event unless one collection is watched.
        if not self._collection_scope and namespace.partition(".")[2] == VIEWS_COLLECTION:
            return None
        template = CrudEventTemplate(
            namespace,
            uuid_module.UUID(bytes=ui),
            OPERATION_TYPES[op],
            self._version,
            matched=self._match.operation({"op": "i", "ns": namespace}),
            txn_op_index=txn_op_index,
            expanded=self._expanded,
        )
        return template if template.token_middle is not None else None
