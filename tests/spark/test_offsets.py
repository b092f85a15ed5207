"""Offsets: resume tokens in one canonical JSON shape."""

from __future__ import annotations

import json

import pytest

from shardstream.errors import ConfigurationError
from shardstream.resume_token import ResumeToken
from shardstream.spark.source.offsets import StreamOffset, data_of, token_of_text, token_text


def test_equal_positions_serialise_to_equal_text_whatever_the_insertion_order() -> None:
    one = StreamOffset("82AA", {"shard1": "82AA", "shard0": ""})
    two = StreamOffset("82AA", {"shard0": "", "shard1": "82AA"})
    assert json.dumps(one.to_json()) == json.dumps(two.to_json())
    assert list(one.to_json()) == ["v", "watermark", "shards"]
    assert StreamOffset.from_json(json.loads(json.dumps(one.to_json()))) == one


def test_advancing_keeps_the_shards_without_events() -> None:
    start = StreamOffset.initial("", ["b", "a"])
    end = start.advanced("82BB", {"b": "82BB"})
    assert end.to_json()["shards"] == {"a": "", "b": "82BB"}
    assert end.shards_advanced_from(start) == {"b": "82BB"}
    assert start.shards_advanced_from(start) == {}


def test_tokens_keep_their_type_bits() -> None:
    token = ResumeToken("8201AB", b"\x82\x00")
    text = token_text(token)
    assert text == "8201AB:8200"
    assert token_of_text(text) == token
    assert token_of_text(text).type_bits == b"\x82\x00"
    assert data_of(text) == "8201AB"
    assert token_of_text("8201AB").type_bits is None


@pytest.mark.parametrize(
    "value",
    [
        {"watermark": "", "shards": {}},
        {"v": 2, "watermark": "", "shards": {}},
        {"v": 1, "watermark": "xyz", "shards": {}},
        {"v": 1, "watermark": "", "shards": {"a": 7}},
        {"v": 1, "watermark": "", "shards": []},
        {"v": 1, "watermark": "82:1", "shards": {}},
    ],
)
def test_anything_else_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="expected"):
        StreamOffset.from_json(value)  # type: ignore[arg-type]
