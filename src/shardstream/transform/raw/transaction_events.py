"""Fast path: the events of a simple committed transaction, from raw bytes.

:mod:`unwind_transaction` finds the parts; this writes one event per op with the
stream's templates (each op's index goes into its token).  Either every op's
event is written or none (-1 sends the entry to the reference path).
"""

from __future__ import annotations

from typing import Final

from shardstream.transform.raw.event_templates import (
    DELETE,
    INSERT,
    NOT_BUILT,
    OPERATION_TYPES,
    UPDATE,
    EventTemplates,
)
from shardstream.transform.raw.event_writer import (
    OBJECT_ID_KEY_HEADER,
    CrudEventTemplate,
    is_object_id_key,
    write_crud_event,
)
from shardstream.transform.raw.unwind_transaction import (
    Fields,
    parse_laid_out_transaction,
    parse_transaction,
)

NOT_LAID_OUT: Final = -2  # not in mongod's layout: try parse_transaction
_MISSING: Final = (0, 0, 0)  # (type, start, end) of an absent field
_UUID_HEADER: Final = b"\x10\x00\x00\x00\x04"  # BinData: 16 bytes, subtype 4
_OID_ID_ELEMENT: Final = b"\x07_id\x00"


def laid_out_transaction_events(
    doc: bytes, templates: EventTemplates, start: int, keys: list[bytes], events: list[bytes]
) -> int:
    """Events of a transaction in mongod's layout; its ts, -1, or NOT_LAID_OUT."""
    parsed = parse_laid_out_transaction(doc, templates.op_heads)
    if parsed is None:
        return NOT_LAID_OUT
    leading, ts_value, wall_value, ops = parsed
    ts = int.from_bytes(ts_value, "little")
    if ts < start:
        return ts
    new_keys: list[bytes] = []
    new_events: list[bytes] = []
    diffs: list[tuple[int, bytes]] = []  # (index in new_events, o) of the updates
    by_run = templates.by_run
    for index, (run, o, key) in enumerate(ops):
        template = by_run.get((run, index) if index else run, NOT_BUILT)
        if template is NOT_BUILT:
            template = templates.build_for_run(run, index)
        if not isinstance(template, CrudEventTemplate):
            return -1
        if not template.matched:
            continue
        op = run[8]
        description = b""
        # o's own length must agree with its frame, or the entry is not valid BSON (the
        # reference path reports it); an update's diff is read inside it.
        if len(o) < 5 or o[-1] or int.from_bytes(o[:4], "little") != len(o):
            return -1
        if op == UPDATE:
            update = templates.update_element(o)
            if update is None:
                return -1
            description = update
            if templates.update_diffs is not None:  # kept only for whoever reads them
                diffs.append((len(new_events), o))
        sort_key, event = write_crud_event(
            template,
            ts,
            ts_value,
            wall_value,
            o if op == INSERT else None,
            key,
            description,
            leading,
        )
        new_keys.append(sort_key)
        new_events.append(event)
    _keep_diffs(templates, len(events), diffs)
    keys += new_keys
    events += new_events
    return ts


def transaction_events(
    doc: bytes, templates: EventTemplates, start: int, keys: list[bytes], events: list[bytes]
) -> int:
    """Events of a simple committed transaction in any field order; its ts, or -1."""
    txn = parse_transaction(doc)
    if txn is None:
        return -1
    ts = int.from_bytes(txn.ts, "little")
    if ts < start:
        return ts
    new_keys: list[bytes] = []
    new_events: list[bytes] = []
    diffs: list[tuple[int, bytes]] = []
    by_parts = templates.by_parts
    for index, op in enumerate(txn.ops):
        kind, at, end = op.get(b"op", _MISSING)
        op_value = doc[at:end]
        if kind != 0x02 or len(op_value) != 6 or op_value[4] not in OPERATION_TYPES:
            return -1  # not CRUD (a command inside, or a no-op: an error)
        ns_kind, at, end = op.get(b"ns", _MISSING)
        ui_kind, ui_at, ui_end = op.get(b"ui", _MISSING)
        if ns_kind != 0x02 or ui_kind != 0x05 or doc[ui_at : ui_at + 5] != _UUID_HEADER:
            return -1
        parts = (doc[at + 4 : end - 1], doc[ui_at + 5 : ui_end], op_value[4], index)
        template = by_parts.get(parts, NOT_BUILT)
        if template is NOT_BUILT:
            template = templates.build_for_parts(*parts)
        if not isinstance(template, CrudEventTemplate):
            return -1
        if not template.matched:
            continue
        o_kind, at, end = op.get(b"o", _MISSING)
        if o_kind != 0x03:
            return -1
        pieces = _crud_pieces(op_value[4], doc[at:end], op, doc, templates)
        if pieces is None:
            return -1
        full_document, key, description = pieces
        if description and templates.update_diffs is not None:
            diffs.append((len(new_events), doc[at:end]))
        sort_key, event = write_crud_event(
            template, ts, txn.ts, txn.wall, full_document, key, description, txn.leading
        )
        new_keys.append(sort_key)
        new_events.append(event)
    _keep_diffs(templates, len(events), diffs)
    keys += new_keys
    events += new_events
    return ts


def _keep_diffs(templates: EventTemplates, base: int, diffs: list[tuple[int, bytes]]) -> None:
    """Hand a transaction's update diffs to ``templates.update_diffs``, if it keeps them."""
    kept = templates.update_diffs
    if kept is not None and diffs:
        kept.extend((base + index, o) for index, o in diffs)


def _crud_pieces(
    op: int, o: bytes, fields: Fields, doc: bytes, templates: EventTemplates
) -> tuple[bytes | None, bytes, bytes] | None:
    """(fullDocument, documentKey, updateDescription) of a transaction's op, or None."""
    if int.from_bytes(o[:4], "little") != len(o) or o[-1] != 0:
        return None
    kind, at, end = fields.get(b"o2", _MISSING)
    if kind not in (0x03, 0):
        return None
    o2 = doc[at:end] if kind == 0x03 else None
    if op == DELETE:
        return (None, o, b"") if is_object_id_key(o) else None
    if op == INSERT:
        if o2 is None and o[4:9] == _OID_ID_ELEMENT:
            o2 = OBJECT_ID_KEY_HEADER + o[9:21] + b"\x00"
        return (o, o2, b"") if o2 is not None and is_object_id_key(o2) else None
    description = templates.update_element(o)
    if description is None or o2 is None or not is_object_id_key(o2):
        return None
    return None, o2, description
