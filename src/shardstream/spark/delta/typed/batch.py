"""One batch into every collection's typed mirror and history (the per-collection layout).

The document state is kept as the one-table mirror's rows (``<root>/_mirror_state``, see
:mod:`shardstream.spark.delta.mirror.table`): it prepares the batch, which says each touched
document's final state and the version each update left (``PreparedBatch.versions``).  This
module turns that into the collections' tables: per namespace, the typed mirror's final rows
(:mod:`~shardstream.spark.delta.typed.mirror`) and the history's changes in stream order
(:mod:`~shardstream.spark.delta.typed.history`), the columns typed from every version.

They are written before the state commits the batch: a crash in between replays the batch,
which prepares the same way (the state has not moved), and each table that already has it
skips it by its own markers.  Merged and per-shard reads give the same tables: a batch is
applied in token order whatever the order its rows arrive in, and no column's type depends
on where a batch was cut (the one exception: an empty document or array in a field whose
type is not known yet stays in ``_rescued``).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pyarrow as pa

from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.mirror.keys import Namespace
from shardstream.spark.delta.mirror.prepare import DELETE, PreparedBatch
from shardstream.spark.delta.typed.batch_typing import BatchTyping
from shardstream.spark.delta.typed.changes import collection_changes
from shardstream.spark.delta.typed.history import Change, write_history
from shardstream.spark.delta.typed.mirror import FinalRow, write_mirror
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    full_name,
    table_name,
    table_path,
)


@dataclasses.dataclass(frozen=True, slots=True)
class CollectionWrites:
    """What a batch wrote into the collections' tables.

    Attributes:
        mirrors: rows merged per namespace (None: that table already had the batch).
        history: versions inserted per namespace (None: already had the batch).
    """

    mirrors: Mapping[Namespace, int | None]
    history: Mapping[Namespace, int | None]


@dataclasses.dataclass(slots=True)
class CollectionShare:
    """One collection's share of a batch.

    Attributes:
        changes: the history's changes, in stream order.
        finals: the mirror's rows (None: the batch left none of this collection's).
    """

    changes: list[Change]
    finals: list[FinalRow] | None

    @property
    def newest_token(self) -> str:
        """The newest change's token among the share's (its tables' watermark when the
        batch's own last event is not known where they are written)."""
        tokens = [change.token for change in self.changes]
        return max([*tokens, *(final.token for final in self.finals or ())])


def write_collections(
    root: Path,
    fresh: pa.Table,
    prepared: PreparedBatch,
    commit: BatchCommit,
    *,
    history: bool,
    max_columns: int,
    buckets: int,
) -> CollectionWrites:
    """Write ``prepared`` (the state's preparation of ``fresh``) into the collection tables
    (``buckets``: a created table's bucket count)."""
    changes = collection_changes(root, fresh, prepared.versions)
    finals = final_rows(prepared.source)
    shares = {
        namespace: CollectionShare(changes.get(namespace, []), finals.get(namespace))
        for namespace in {*finals, *changes}
    }
    return write_shares(
        root, shares, lambda _: commit, history=history, max_columns=max_columns, buckets=buckets
    )


def write_shares(
    root: Path,
    shares: Mapping[Namespace, CollectionShare],
    commit_of: Callable[[CollectionShare], BatchCommit],
    *,
    history: bool,
    max_columns: int,
    buckets: int,
) -> CollectionWrites:
    """Each collection's share into its tables, in name order: its history's changes, then
    its mirror's final rows, typed once for both; ``commit_of`` gives a share's markers,
    ``buckets`` a created table's bucket count."""
    mirrors: dict[Namespace, int | None] = {}
    written: dict[Namespace, int | None] = {}
    for namespace in sorted(shares):
        share = shares[namespace]
        db, coll = namespace
        commit = commit_of(share)
        # The history first: the mirror's rows are some of its versions, typed once.
        typing = BatchTyping()
        if history and share.changes:
            written[namespace] = write_history(
                table_path(root, HISTORY_DIR, db, coll),
                table_name(HISTORY_DIR, db, coll),
                share.changes,
                commit,
                max_columns,
                title=full_name(db, coll),
                buckets=buckets,
                typing=typing,
            )
        if share.finals is not None:
            versions = [c.text for c in share.changes if c.text is not None]
            mirrors[namespace] = write_mirror(
                table_path(root, MIRROR_DIR, db, coll),
                table_name(MIRROR_DIR, db, coll),
                share.finals,
                versions,
                commit,
                max_columns,
                title=full_name(db, coll),
                buckets=buckets,
                typing=typing,
            )
    return CollectionWrites(mirrors, written)


def final_rows(source: pa.Table) -> dict[Namespace, list[FinalRow]]:
    """Each namespace's documents as the batch left them (``source``: the state's
    preparation, one row per touched document)."""
    finals: dict[Namespace, list[FinalRow]] = defaultdict(list)
    columns = ("db", "coll", "_documentId", "fullDocument", "_id", "clusterTime", DELETE)
    for row in source.select(list(columns)).to_pylist():
        text = None if row[DELETE] else row["fullDocument"]
        finals[(row["db"], row["coll"])].append(
            FinalRow(
                row["_documentId"],
                text,
                row["_id"] or "",
                row["clusterTime"],
            )
        )
    return dict(finals)


def namespaces_with_tables(root: Path, kinds: Iterable[str] = (MIRROR_DIR,)) -> list[Namespace]:
    """Every namespace that has a table of one of ``kinds`` under ``root``."""
    return sorted({name for kind in kinds for name in collections_of(root, kind)})
