"""The one parser of tokens typed as text, and the bounded depth of JSON input.

``token decode``, the start options and the Spark source's options all go through
``parse_token_text``; every failure is a ResumeTokenError, never what json or json_util
raised underneath (issue 25, item 4).
"""

from __future__ import annotations

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, ResumeTokenError, ShardstreamError
from shardstream.resume_token import ResumeToken, decode_token, decode_token_document
from shardstream.resume_token.json_input import MAX_JSON_DEPTH, json_depth_over_limit
from shardstream.resume_token.token_json import loads
from shardstream.resume_token.token_text import parse_token_text
from shardstream.spark.source.option_values import token_value
from shardstream.spark.source.options import _pipeline

TOKEN = "826553F100000000072B0429296E1404"  # a high-water mark at Timestamp(1700000000, 7)

BAD_TEXTS = [
    "",
    "   ",
    "8",
    "82ZZ",
    '{"_data": {"$numberDecimal": "1e99999999"}}',
    '{"_data": {"$numberDecimal": "\\u0000"}}',
    '{"_data": {"$oid": "zz"}}',
    '{"_data": {"$date": 1e400}}',
    '{"_data": {"$date": "Infinity"}}',
    '{"_data": {"$binary": {"base64": "A", "subType": "00"}}}',
    '{"_data": {"$timestamp": {"t": true, "$binary": 1}}}',
    '{"_data": {"$scope": {"$numberLong": 1e400}}}',
    '{"_data": "82", "_typeBits": {"$binary": {"base64": "", "subType": "05"}}}',
    '{"_data": "82", "_typeBits": 5}',
    '{"_data": 1}',
    "{",
    "[" * 3000 + "]" * 3000,
    '{"a":' * 3000 + "1" + "}" * 3000,
]


def _nested(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.mark.parametrize("text", BAD_TEXTS)
def test_every_bad_token_text_is_a_resume_token_error_naming_the_option(text: str) -> None:
    with pytest.raises(ResumeTokenError) as raised:
        parse_token_text(text, "--resume-after")
    assert str(raised.value).startswith("--resume-after: ")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("text", BAD_TEXTS)
def test_the_spark_source_gives_the_same_verdict(text: str) -> None:
    with pytest.raises(ResumeTokenError) as raised:
        token_value("resumeAfter", text)
    assert str(raised.value).startswith("resumeAfter: ")


def test_good_token_texts_decode_alike() -> None:
    as_hex = parse_token_text(TOKEN)
    assert as_hex.cluster_time == Timestamp(1700000000, 7)
    assert parse_token_text(f'  {{"_data": "{TOKEN}"}} ') == as_hex
    assert parse_token_text(f" {TOKEN}\n") == as_hex
    assert token_value("resumeAfter", f'{{"_data": "{TOKEN}"}}') == as_hex


def test_depth_limit_is_the_servers_bson_limit_plus_extended_json_wrappers() -> None:
    # server: BSONDepth::kDefaultMaxAllowableDepth = 200 levels below the top-level
    # document (validateBSON, bson_validate_test MaxNestingDepth), + 3 levels a canonical
    # value can take ({"$dbPointer": {"$id": {"$oid": ...}}}).
    assert MAX_JSON_DEPTH == 1 + 200 + 3
    assert json_depth_over_limit(_nested(MAX_JSON_DEPTH)) is None
    assert json_depth_over_limit(_nested(MAX_JSON_DEPTH + 1)) == MAX_JSON_DEPTH + 1
    assert loads(_nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(ValueError, match=f"at most {MAX_JSON_DEPTH} levels"):
        loads(_nested(MAX_JSON_DEPTH + 1))


def test_depth_counts_brackets_outside_strings_only() -> None:
    many = '{"s": "' + "[{" * 5000 + '\\"' + '", "a": [' + "[]," * 5000 + "[]]}"
    assert json_depth_over_limit(many) is None  # wide, not deep
    assert loads(many)["s"].startswith("[{[{")
    assert json_depth_over_limit("[" * 300) == 300  # unbalanced text is still measured
    flat = "[" + "[]," * 1000 + "[]]"
    assert json_depth_over_limit(flat) is None


@pytest.mark.parametrize(
    "value",
    [None, 5, b"82", ResumeToken(5), ResumeToken("82", type_bits="AA")],  # type: ignore[arg-type]
)
def test_decode_token_refuses_values_of_the_wrong_type(value: object) -> None:
    with pytest.raises(ResumeTokenError, match="expected a resume token"):
        decode_token(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "document", [None, "zz", [TOKEN], {"_data": None}, {"_data": TOKEN, "x": 1}]
)
def test_decode_token_document_raises_only_shardstream_errors(document: object) -> None:
    with pytest.raises(ShardstreamError):
        decode_token_document(document)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        '[{"$match": {"_id": {"$oid": "zz"}}}]',
        '[{"$match": {"d": {"$date": 1e400}}}]',
        "[" * 3000 + "]" * 3000,
    ],
)
def test_the_spark_pipeline_option_catches_what_extended_json_raises(text: str) -> None:
    with pytest.raises(ConfigurationError, match="expected pipeline as an Extended JSON array"):
        _pipeline(text)
