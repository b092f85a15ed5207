"""``shardstream ingest --include / --exclude`` and the source's ``include`` / ``exclude``
options: the flags become options (checked before Spark starts), and one ingest of oplog
files in per-shard tasks writes only the selected collections' events (the change log
alone, the cheapest run: the mirrors are made from the same rows).
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest

from shardstream.cli.ingest import source_options
from shardstream.cli.main import _build_parser, main
from shardstream.errors import ConfigurationError
from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.mirror.check import read_table
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.settings import IngestSettings
from shardstream.spark.source.options import parse_options
from tests.spark.lakehouse_checks import simulated_input

SIMULATION = {"seed": 33, "shards": 3, "operations": 120}
# users through a wildcard; settings excluded although shop.* includes it.
FLAGS = ["--include", "shop.*", "--include", "*.users", "--exclude", "shop.set*"]
KEPT = {("shop", "orders"), ("shop", "users")}


def _args(*argv: str) -> argparse.Namespace:
    return _build_parser().parse_args(["ingest", "--table", "lake", *argv])


def test_the_flags_become_the_sources_comma_separated_options() -> None:
    options = source_options(_args("--simulate", *FLAGS))
    assert options["include"] == "shop.*,*.users"
    assert options["exclude"] == "shop.set*"
    spec = parse_options(options)
    assert (spec.stream.include, spec.stream.exclude) == (("shop.*", "*.users"), ("shop.set*",))
    assert "include" not in source_options(_args("--simulate"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"include": "shop"}, "expected include as DB.COLL"),
        ({"exclude": "shop.*,"}, "expected exclude as DB.COLL"),  # an empty pattern
        ({"include": " "}, "expected include as comma-separated DB.COLL patterns, got ' '"),
        ({"db": "shop", "include": "shop.x"}, "expected db/coll or include patterns, not both"),
    ],
)
def test_the_source_refuses_malformed_patterns(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_options({"simulate": "true", **options})


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--include", "shop"], "expected --include as DB.COLL"),
        (["--exclude", "shop.a,b"], "expected --exclude without a comma"),
        (["--db", "shop", "--include", "crm.*"], "expected --db or --include patterns, not both"),
    ],
)
def test_the_command_refuses_them_in_one_line_before_spark_starts(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ingest", "--table", str(tmp_path / "lake"), "--simulate", *flags]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert message in err
    assert not (tmp_path / "lake").exists()


@pytest.mark.spark
def test_per_shard_tasks_ingest_only_the_selected_collections(spark: Any, tmp_path: Path) -> None:
    given, _, events = simulated_input("files", tmp_path, **SIMULATION)
    selected = [e for e in events if (e.document["ns"]["db"], e.document["ns"]["coll"]) in KEPT]
    assert len(selected) < len(events)  # settings had events of its own
    options = source_options(_args("--shard", "x=y", *FLAGS))
    filters = {name: options[name] for name in ("include", "exclude")}
    root = tmp_path / "lake"
    settings = IngestSettings(
        table=root,
        source_options={**given, **filters, "partitionMode": "perShard"},
        bounded=True,
        mirror=False,
    )
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert totals.events == totals.changelog_rows == len(selected)
    changelog = read_table(root, CHANGELOG_TABLE)["_id"].to_pylist()
    assert sorted(changelog) == sorted(event.token.data for event in selected)
    assert sorted(path.name for path in root.iterdir()) == ["_checkpoint", CHANGELOG_TABLE]
