"""ChangeStreamOptions refuses values of the wrong type or range with a ConfigurationError,
as the CLI's flags do, never a TypeError or AttributeError from deep in the pipeline
(issue 25: one verdict per input, through the CLI and the API)."""

from __future__ import annotations

from typing import Any

import pytest
from bson.timestamp import Timestamp

import shardstream
from shardstream.errors import ConfigurationError
from shardstream.resume_token import high_water_mark
from shardstream.transform import ChangeStreamOptions


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"server_version": "8.2"}, "expected server_version as (major, minor) integers"),
        ({"server_version": (8,)}, "expected server_version as (major, minor) integers"),
        ({"server_version": (8.0, 2)}, "expected server_version as (major, minor) integers"),
        ({"server_version": (99, 99)}, "expected server_version from 6.0 to 8.2"),
        ({"server_version": (5, 0)}, "expected server_version from 6.0 to 8.2"),
        ({"token_version": True}, "expected token_version 1 or 2"),
        ({"token_version": 3}, "expected token_version 1 or 2"),
        ({"resume_after": {"_data": "82"}}, "expected resume_after as decoded ResumeTokenData"),
        ({"start_after": "826553F1"}, "expected start_after as decoded ResumeTokenData"),
        ({"start_at_operation_time": "1,2"}, "expected start_at_operation_time as a bson"),
        ({"db": ""}, "expected db to be a non-empty string"),
    ],
)
def test_bad_option_values_are_configuration_errors(values: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigurationError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        ChangeStreamOptions(**values)


def test_good_values_still_pass() -> None:
    options = ChangeStreamOptions(
        server_version=(6, 0), token_version=1, start_at_operation_time=Timestamp(1, 0)
    )
    assert options.with_options(
        server_version=[8, 2],
        start_at_operation_time=None,
        resume_after=high_water_mark(Timestamp(1, 0)),
    ).at_least(8, 2)


def test_watch_refuses_a_bad_server_version_before_connecting() -> None:
    # Port 1: nothing listens; the options are checked before any connection.
    with pytest.raises(ConfigurationError, match="server_version"):
        shardstream.watch("mongodb://127.0.0.1:1/", server_version="8.2")  # type: ignore[arg-type]
