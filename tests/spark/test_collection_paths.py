"""Where a collection's tables live: one path segment per name, and the tables found back."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    collections_of,
    name_of,
    segment,
    table_name,
    table_path,
)

# MongoDB names are non-empty valid UTF-8 (no lone surrogates).  At most 20 characters: a
# segment takes up to 12 bytes a character, and a file name at most 255.
NAMES = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=20)
# Letters, digits, '-', '_', percent escapes, and '~' (which urllib's quote never escapes).
SEGMENT = re.compile(r"(?:[A-Za-z0-9_~-]|%[0-9A-F]{2})+")


@given(NAMES)
def test_a_segment_stands_for_exactly_its_name(name: str) -> None:
    """name_of undoes segment, so distinct names get distinct directories."""
    assert name_of(segment(name)) == name


@given(NAMES)
def test_a_segment_is_one_plain_path_component(name: str) -> None:
    """No separator, no dot (so never '.', '..' or hidden), never empty, and only
    characters every file system takes as they are."""
    text = segment(name)
    assert SEGMENT.fullmatch(text), text
    assert Path(text).name == text
    assert len(Path(text).parts) == 1


def test_dots_slashes_and_percents_are_escaped() -> None:
    """The characters that would change a path's meaning, or an escape's, are escaped."""
    assert segment("orders.2024") == "orders%2E2024"
    assert segment("a/b") == "a%2Fb"
    assert segment("..") == "%2E%2E"
    assert segment("100%") == "100%25"
    assert segment("système") == "syst%C3%A8me"
    assert segment("plain_name-1") == "plain_name-1"


def test_table_paths_are_kind_then_database_then_collection(tmp_path: Path) -> None:
    """A table sits at <root>/<kind>/<db segment>/<coll segment>; its name is that path
    below the root."""
    path = table_path(tmp_path, MIRROR_DIR, "shop.eu", "orders/2024")
    assert path == tmp_path / "mirror" / "shop%2Eeu" / "orders%2F2024"
    assert table_path(str(tmp_path), HISTORY_DIR, "db", "c") == tmp_path / "history" / "db" / "c"
    for kind in (MIRROR_DIR, HISTORY_DIR):
        name = table_name(kind, "shop.eu", "a b")
        assert Path(name) == table_path(tmp_path, kind, "shop.eu", "a b").relative_to(tmp_path)
        assert name == f"{kind}/shop%2Eeu/a%20b"


def _table(root: Path, kind: str, db: str, coll: str) -> None:
    (table_path(root, kind, db, coll) / "_delta_log").mkdir(parents=True)


def test_collections_of_lists_only_directories_holding_a_delta_log(tmp_path: Path) -> None:
    """Only table directories (with a _delta_log directory) of the asked kind count; names
    come back decoded."""
    _table(tmp_path, MIRROR_DIR, "shop", "orders")
    _table(tmp_path, MIRROR_DIR, "shop", "a.b")
    _table(tmp_path, MIRROR_DIR, "dé.v", "x/y")
    _table(tmp_path, HISTORY_DIR, "shop", "history_only")
    table_path(tmp_path, MIRROR_DIR, "shop", "no_log").mkdir(parents=True)
    not_a_log = table_path(tmp_path, MIRROR_DIR, "shop", "log_file")
    not_a_log.mkdir(parents=True)
    (not_a_log / "_delta_log").write_text("")
    (tmp_path / MIRROR_DIR / "stray_file").write_text("")
    (tmp_path / MIRROR_DIR / "shop" / "stray_file").write_text("")

    found = list(collections_of(tmp_path, MIRROR_DIR))
    assert sorted(found) == [("dé.v", "x/y"), ("shop", "a.b"), ("shop", "orders")]
    assert len(found) == len(set(found))
    assert list(collections_of(tmp_path, HISTORY_DIR)) == [("shop", "history_only")]


def test_collections_of_one_database(tmp_path: Path) -> None:
    """Given a database, only its tables; an unknown database or a missing root has none."""
    _table(tmp_path, MIRROR_DIR, "one", "a")
    _table(tmp_path, MIRROR_DIR, "one.two", "b")
    assert list(collections_of(tmp_path, MIRROR_DIR, "one")) == [("one", "a")]
    assert list(collections_of(tmp_path, MIRROR_DIR, "one.two")) == [("one.two", "b")]
    assert list(collections_of(tmp_path, MIRROR_DIR, "absent")) == []
    assert list(collections_of(tmp_path / "nowhere", MIRROR_DIR)) == []


@settings(max_examples=40)  # each example makes directories
@given(st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=4, unique=True))
def test_collections_of_finds_every_table_written(tables: list[tuple[str, str]]) -> None:
    """Whatever the names, the tables made at table_path are exactly the ones listed."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for db, coll in tables:
            (table_path(root, MIRROR_DIR, db, coll) / "_delta_log").mkdir(parents=True)
        assert sorted(collections_of(root, MIRROR_DIR)) == sorted(tables)


def test_a_name_too_long_for_a_directory_is_hashed_and_named_by_its_table(tmp_path: Path) -> None:
    """A legal 100-byte collection name of emoji would encode to 300 characters, over a
    file system's 255: its segment is a hash, and the table's Delta metadata names it."""
    from shardstream.spark.delta.typed.mirror import MIRROR_KIND
    from shardstream.spark.delta.typed.paths import MAX_SEGMENT, full_name
    from shardstream.spark.delta.typed.schema import evolved_table

    long_name = "\U0001f600" * 25
    assert len(segment(long_name)) <= MAX_SEGMENT
    assert name_of(segment(long_name)) is None
    assert segment(long_name) != segment(long_name[:-1])
    path = table_path(tmp_path, MIRROR_DIR, "shop", long_name)
    evolved_table(
        path,
        MIRROR_KIND,
        ['{"_id": {"$numberInt": "1"}}'],  # the documents' canonical texts
        10,
        full_name("shop", long_name),
        stored=None,
        buckets=4,
    )
    assert list(collections_of(tmp_path, MIRROR_DIR)) == [("shop", long_name)]
