"""Simulator check: apply change events to an empty state, as a CDC sink would.

Used to prove that a stream is complete and correctly ordered: applying the merged
events of a run must give the simulator's true final state.  Updates are applied
from ``rawUpdateDescription`` (the oplog's own ``$v:2`` diff), so streams checked
this way are opened with ``show_raw_update_description=True``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import bson

from shardstream.sim.documents import id_key
from shardstream.transform.update.apply_update import apply_update

State = dict[tuple[str, str], dict[bytes, Any]]
_CRUD = frozenset({"insert", "update", "replace", "delete"})


def apply_events(events: Iterable[Mapping[str, Any]], *, strict: bool = True) -> State:
    """Apply CRUD events in the given order; other events are skipped.

    Args:
        events: change events with ``rawUpdateDescription`` for updates.
        strict: raise KeyError on an update or delete of a missing document (a gap
            in the stream); lenient mode skips it, as a naive sink would.
    """
    state: State = {}
    for event in events:
        kind = event["operationType"]
        if kind not in _CRUD:
            continue
        documents = state.setdefault((event["ns"]["db"], event["ns"]["coll"]), {})
        key = id_key(event["documentKey"]["_id"])
        if kind in ("insert", "replace"):
            documents[key] = event["fullDocument"]
        elif key not in documents:
            if strict:
                raise KeyError(f"{kind} of a document the stream never inserted: {key!r}")
        elif kind == "update":
            documents[key] = apply_update(documents[key], event["rawUpdateDescription"])
        else:
            del documents[key]
    return state


def encoded_state(
    state: Mapping[tuple[str, str], Mapping[bytes, Any]],
) -> dict[Any, dict[bytes, bytes]]:
    """The state with documents as BSON bytes (field order and types count); empty ones dropped."""
    return {
        ns: {key: bson.encode(document) for key, document in documents.items()}
        for ns, documents in state.items()
        if documents
    }
