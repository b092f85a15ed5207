"""The mirror's keyed read (``mirror.prepare.load_rows``): exactly the rows a batch needs, for
a batch of any size.

A SQL ``IN`` list of one literal per document crashed the process (DataFusion overflowed
its stack) from about 10,000 documents, so a large batch of updates killed the driver; the
sizes here are above that.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from shardstream.spark.delta.mirror.keys import RowKey
from shardstream.spark.delta.mirror.prepare import MIRROR_SCHEMA, load_rows
from shardstream.spark.delta.mirror.state import BatchNeeds

ORDERS = 50_000


def _mirror(path: Path, keys: list[RowKey]) -> None:
    rows = {
        "db": [db for db, _, _ in keys],
        "coll": [coll for _, coll, _ in keys],
        "documentKey": [f'{{"_id": {i}}}' for _, _, i in keys],
        "fullDocument": [f'{{"_id": {i}, "n": "{n}"}}' for n, (_, _, i) in enumerate(keys)],
        "_id": [f"82{n:08X}" for n in range(len(keys))],
        "clusterTime": [{"t": 1, "i": n} for n in range(len(keys))],
        "_documentId": [i for _, _, i in keys],
    }
    write_deltalake(str(path), pa.Table.from_pydict(rows, schema=MIRROR_SCHEMA))


def _oid(n: int) -> str:
    return f'{{"$oid": "{n:024x}"}}'


def _read(path: Path, needs: BatchNeeds) -> set[RowKey]:
    found = [(row.db, row.coll, row.document_id) for row in load_rows(path, needs)]
    assert len(found) == len(set(found)), "a row read twice"
    return set(found)


def test_a_batch_naming_tens_of_thousands_of_documents_reads_exactly_them(
    tmp_path: Path,
) -> None:
    orders = [("shop", "orders", _oid(n)) for n in range(ORDERS)]
    users = [("shop", "users", _oid(n)) for n in range(50)]
    elsewhere = [("other", "things", _oid(n)) for n in range(50)]
    gone = [("gone", coll, _oid(n)) for coll in ("a", "b") for n in range(20)]
    _mirror(tmp_path, orders + users + elsewhere + gone)
    updated = orders[::2] + orders[1:20:2]  # 25,010 documents of one collection
    absent = [("shop", "orders", _oid(ORDERS + 1)), ("nowhere", "x", _oid(1))]
    needs = BatchNeeds(
        keys=frozenset(updated + absent + elsewhere[:3]),
        namespaces=frozenset({("shop", "users")}),
        databases=frozenset({"gone"}),
    )
    assert _read(tmp_path, needs) == set(updated + elsewhere[:3] + users + gone)


def test_a_batch_across_hundreds_of_collections_reads_exactly_its_rows(tmp_path: Path) -> None:
    keys = [("shop", f"c{c}", _oid(n)) for c in range(400) for n in range(5)]
    _mirror(tmp_path, keys)
    wanted = keys[::3]
    namespaces = {("shop", f"c{c}") for c in range(0, 400, 7)}
    needs = BatchNeeds(frozenset(wanted), frozenset(namespaces), frozenset())
    expected = set(wanted) | {key for key in keys if key[:2] in namespaces}
    assert _read(tmp_path, needs) == expected


def test_a_batch_needing_nothing_reads_nothing(tmp_path: Path) -> None:
    _mirror(tmp_path, [("shop", "orders", _oid(1))])
    assert _read(tmp_path, BatchNeeds(frozenset(), frozenset(), frozenset())) == set()
    missing = tmp_path / "none"
    needs = BatchNeeds(frozenset({("shop", "orders", _oid(1))}), frozenset(), frozenset())
    assert _read(missing, needs) == set()


def test_a_row_with_a_null_key_field_is_read_only_through_what_it_has(tmp_path: Path) -> None:
    # Not written by the sinks; still, a null must select nothing rather than everything.
    rows = [("shop", "orders", _oid(1)), ("gone", "a", _oid(2))]
    _mirror(tmp_path, rows)
    nulls = pa.Table.from_pydict(
        {
            "db": [None, "gone", "shop"],
            "coll": ["orders", None, "orders"],
            "documentKey": ["{}"] * 3,
            "fullDocument": ["{}"] * 3,
            "_id": ["82"] * 3,
            "clusterTime": [{"t": 1, "i": 1}] * 3,
            "_documentId": [_oid(1), _oid(3), None],
        },
        schema=MIRROR_SCHEMA,
    )
    write_deltalake(str(tmp_path), nulls, mode="append")
    needs = BatchNeeds(
        keys=frozenset({("shop", "orders", _oid(1))}),
        namespaces=frozenset({("shop", "orders")}),
        databases=frozenset({"gone"}),
    )
    found = [(row.db, row.coll, row.document_id) for row in load_rows(tmp_path, needs)]
    # The database's rows whatever their collection; the namespace's whatever their id.
    assert sorted(found, key=repr) == sorted(
        [
            ("shop", "orders", _oid(1)),
            ("gone", "a", _oid(2)),
            ("gone", None, _oid(3)),
            ("shop", "orders", None),
        ],
        key=repr,
    )
