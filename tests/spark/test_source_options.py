"""The data source's options: parsed into a spec, or refused naming what was expected."""

from __future__ import annotations

import pickle
import re

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenError
from shardstream.oplog.file_reader import InputFormat
from shardstream.resume_token import encode_token, high_water_mark
from shardstream.spark.source.options import PartitionMode, SourceKind, parse_options

HWM = encode_token(high_water_mark(Timestamp(1700000000, 7))).data


def test_a_simulated_cluster_with_the_watch_options() -> None:
    spec = parse_options(
        {
            "SIMULATE": "true",  # Spark's option keys are case-insensitive
            "shards": "4",
            "entries": "50",
            "seed": "3",
            "db": "shop",
            "coll": "orders",
            "showExpandedEvents": "true",
            "startAfter": HWM,
            "maxEventsPerTrigger": "500",
            "jsonFormat": "relaxed",
            "partitionMode": "perShard",
            "eventsPerPartition": "20",
            "endAtOperationTime": '{"$timestamp": {"t": 1700000001, "i": 0}}',
        }
    )
    assert spec.kind is SourceKind.SIMULATE
    assert spec.simulation is not None
    assert (spec.simulation.shards, spec.simulation.operations, spec.simulation.seed) == (4, 50, 3)
    assert (spec.stream.db, spec.stream.coll, spec.stream.show_expanded_events) == (
        "shop",
        "orders",
        True,
    )
    assert spec.stream.start_after is not None
    assert spec.stream.start_after.cluster_time == Timestamp(1700000000, 7)
    assert spec.end_at == Timestamp(1700000001, 0)
    assert spec.max_events_per_trigger == 500
    assert spec.relaxed_json
    assert spec.partition_mode is PartitionMode.PER_SHARD
    assert spec.events_per_partition == 20
    assert pickle.loads(pickle.dumps(spec)) == spec  # it travels to every executor


def test_oplog_files_and_their_format() -> None:
    spec = parse_options(
        {
            "oplog": "a=/x/a.bson, b=/x/b.jsonl",
            "inputFormat": "EJSON",
            "startAtOperationTime": "5,1",
        }
    )
    assert spec.oplog_paths == (("a", "/x/a.bson"), ("b", "/x/b.jsonl"))
    assert spec.input_format is InputFormat.EJSON
    assert spec.stream.start_at_operation_time == Timestamp(5, 1)
    assert spec.bounded


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of the options uri, oplog, simulate; got none"),
        ({"simulate": "true", "oplog": "a=x"}, "exactly one of the options"),
        ({"simulate": "true", "maxEvents": "3"}, re.escape("got unknown ['maxevents']")),
        ({"simulate": "yes"}, "expected simulate true or false, got 'yes'"),
        ({"simulate": "true", "shards": "0"}, "expected shards to be an integer >= 1, got '0'"),
        ({"oplog": "a.bson"}, "expected oplog as NAME=PATH"),
        ({"oplog": "a=x,a=y"}, "distinct shard names"),
        ({"oplog": "a=x", "inputFormat": "csv"}, "expected inputFormat bson or ejson, got 'csv'"),
        ({"oplog": "a=x", "partitionMode": "hash"}, "expected partitionMode merged or perShard"),
        ({"oplog": "a=x", "jsonFormat": "shell"}, "expected jsonFormat canonical or relaxed"),
        ({"oplog": "a=x", "startAtOperationTime": "noon"}, "expected startAtOperationTime as T,I"),
        ({"oplog": "a=x", "maxEventsPerTrigger": "many"}, "to be an integer, got 'many'"),
        ({"oplog": "a=x", "coll": "c"}, "a collection stream needs db"),
        ({"oplog": "a=x", "serverVersion": "8"}, "expected serverVersion as X.Y"),
        ({"oplog": "a=x", "pipeline": '[{"$project": {"a": 1}}]'}, r"\$project"),
        ({"oplog": "a=x", "pipeline": "[{"}, "expected pipeline as an Extended JSON array"),
        (
            {"oplog": "a=x", "fullDocument": "updateLookup"},
            "fullDocument / fullDocumentBeforeChange only with uri",
        ),
        (
            {"uri": "mongodb://m/", "fullDocument": "updateLookup", "partitionMode": "perShard"},
            "perShard cannot honour fullDocument",
        ),
        (
            {"oplog": "a=x", "startAtOperationTime": "5,1", "resumeAfter": HWM},
            "at most one start option",
        ),
    ],
)
def test_bad_options_fail_naming_what_was_expected(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_options(options)


def test_a_malformed_token_is_a_resume_token_error() -> None:
    with pytest.raises(ResumeTokenError):
        parse_options({"oplog": "a=x", "resumeAfter": "82ZZ"})


def test_the_password_in_a_uri_never_shows() -> None:
    spec = parse_options({"uri": "mongodb://app:s3cret@mongos:27017/?authSource=admin"})
    assert spec.kind is SourceKind.LIVE
    assert not spec.bounded
    assert "s3cret" not in repr(spec)
    assert "s3cret" not in spec.display
    assert "app:***@mongos" in spec.display
    with pytest.raises(ConfigurationError) as error:
        parse_options({"uri": "http://app:s3cret@mongos/"})
    assert "s3cret" not in str(error.value)


def test_a_token_with_bad_type_bits_is_a_resume_token_error() -> None:
    with pytest.raises(ResumeTokenError, match="_typeBits hex"):
        parse_options({"oplog": "a=x", "startAfter": HWM + ":zz"})
