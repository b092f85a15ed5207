"""Bad input at the command line: one ``shardstream <verb>: error:`` line and exit 1, never a
traceback, and never an empty value quietly taken for "not given" (issue 25, items 4 and 5).

Every case runs ``main()`` in-process and fails before any cluster is contacted or Spark
starts, so none of them waits on a network timeout.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import bson
import pytest
from bson.timestamp import Timestamp

from shardstream.cli.main import main
from shardstream.resume_token.json_input import MAX_JSON_DEPTH

PASSWORD = "s3cr3tpw"
BAD_PORT_URI = f"mongodb://app:{PASSWORD}@127.0.0.1:notaport/"
# Nothing listens on port 1: a test that reaches a connection attempt is a bug in the test.
UNREACHABLE = "mongodb://127.0.0.1:1/"
TOKEN = "826553F100000000072B0429296E1404"  # a high-water mark at Timestamp(1700000000, 7)


def _nested_json(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str], verb: str) -> str:
    """Run ``argv``; assert exit 1 with one error line and nothing on stdout; return the line."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 1, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"shardstream {verb}: error: "), lines[0]
    assert "Traceback" not in captured.err
    assert captured.out == ""
    return lines[0]


def token_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """``token`` verbs: exit 1, one ``{"error": ...}`` line per input; return the message."""
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (line,) = captured.out.splitlines()
    return str(json.loads(line)["error"])


@pytest.fixture
def oplog(tmp_path: Path) -> Path:
    """One valid insert, as Extended JSON lines."""
    entry = {
        "ts": Timestamp(1700000000, 1),
        "t": 1,
        "op": "i",
        "ns": "shop.orders",
        "ui": bson.Binary(bytes(16), 4),
        "o": {"_id": 1},
        "wall": {"$date": 0},
    }
    path = tmp_path / "oplog.jsonl"
    path.write_text(bson.json_util.dumps(entry) + "\n")
    return path


# --- item 4: what Extended JSON parsing raises becomes shardstream's error -------------------

BAD_TOKEN_DOCUMENTS = [
    pytest.param('{"_data": {"$numberDecimal": "1e99999999"}}', id="decimal-overflow"),
    pytest.param('{"_data": {"$oid": "zz"}}', id="invalid-oid"),
    pytest.param('{"_data": {"$date": 1e400}}', id="date-overflow"),
    pytest.param('{"_data": {"$binary": {"base64": "A", "subType": "00"}}}', id="bad-base64"),
    pytest.param('{"_data": {"$timestamp": {"t": true, "$binary": 1}}}', id="wrapper-garbage"),
    pytest.param('{"_data": ', id="truncated-json"),
]


@pytest.mark.parametrize("document", BAD_TOKEN_DOCUMENTS)
def test_token_decode_reports_what_extended_json_raises(
    capsys: pytest.CaptureFixture[str], document: str
) -> None:
    message = token_error(capsys, ["token", "decode", document])
    assert message.startswith("token: expected a token document")


@pytest.mark.parametrize("document", BAD_TOKEN_DOCUMENTS)
@pytest.mark.parametrize("flag", ["--resume-after", "--start-after"])
def test_start_options_catch_what_token_decode_catches(
    capsys: pytest.CaptureFixture[str], oplog: Path, flag: str, document: str
) -> None:
    # One parser for both (resume_token.token_text): the same verdict, naming the flag.
    line = error_line(capsys, ["replay", str(oplog), flag, document], "replay")
    assert f"error: {flag}: expected a token document" in line


@pytest.mark.parametrize("verb", ["watch", "ingest"])
def test_watch_and_ingest_parse_start_tokens_before_connecting(
    capsys: pytest.CaptureFixture[str], oplog: Path, verb: str
) -> None:
    source = [UNREACHABLE] if verb == "watch" else ["--table", "t", "--shard", f"a={oplog}"]
    argv = [verb, *source, "--resume-after", '{"_data": {"$oid": "zz"}}']
    assert "--resume-after: expected a token document" in error_line(capsys, argv, verb)


def test_json_nested_past_the_limit_is_refused_naming_the_limit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # server: BSONDepth::getMaxAllowableDepth (bson_depth.h) caps any BSON validateBSON
    # accepts at 200 nested levels, so no token or entry the server writes nests deeper
    # than MAX_JSON_DEPTH in Extended JSON; 3,000 levels used to be a RecursionError.
    deep = _nested_json(3000)
    message = token_error(capsys, ["token", "decode", deep])
    assert f"at most {MAX_JSON_DEPTH} levels" in message
    assert "got 3000 levels" in message
    message = token_error(capsys, ["token", "encode", deep])
    assert f"at most {MAX_JSON_DEPTH} levels" in message
    path = tmp_path / "deep.jsonl"
    path.write_text(deep + "\n")
    line = error_line(capsys, ["replay", "--input-format", "ejson", str(path)], "replay")
    assert f"{path} line 1" in line
    assert f"at most {MAX_JSON_DEPTH} levels" in line


def test_ejson_line_with_a_non_utf8_byte_names_file_line_and_byte(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, oplog: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(oplog.read_bytes() + b'{"ts": "\xff"}\n')
    line = error_line(capsys, ["replay", "--input-format", "ejson", str(path)], "replay")
    assert f"expected UTF-8 text in {path} line 2" in line
    assert "0xff" in line


def test_ejson_on_stdin_with_a_non_utf8_byte_names_the_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n\xfe{}\n")))
    line = error_line(capsys, ["replay", "--input-format", "ejson", "-"], "replay")
    assert "expected UTF-8 text in <stdin> line 2" in line


def test_token_decode_reports_a_non_utf8_stdin_line_and_goes_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(f"\xff\n{TOKEN}\n".encode("latin-1")))
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["token", "decode"]) == 1
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert "expected UTF-8 text on stdin line 1" in first["error"]
    assert second["clusterTime"] == {"$timestamp": {"t": 1700000000, "i": 7}}


# --- item 4: a URI the driver refuses -------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "verb", "flag"),
    [
        (["bench", "--uri", BAD_PORT_URI], "bench", "--uri"),
        (["bench", "--uri", BAD_PORT_URI, "--duration", "1"], "bench", "--uri"),
        (["watch", BAD_PORT_URI], "watch", "URI"),
        (["ingest", "--table", "t", "--uri", BAD_PORT_URI], "ingest", "--uri"),
    ],
)
def test_a_malformed_uri_is_one_redacted_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], verb: str, flag: str
) -> None:
    line = error_line(capsys, argv, verb)
    assert f"expected {flag} as a MongoDB connection string" in line
    assert "mongodb://app:***@127.0.0.1:notaport/" in line
    assert PASSWORD not in line


def test_a_uri_option_the_driver_would_only_warn_about_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # pymongo warns and ignores readPreference=zz: the stream would silently read primaries.
    uri = f"mongodb://app:{PASSWORD}@127.0.0.1:1/?readPreference=zz"
    line = error_line(capsys, ["watch", uri], "watch")
    assert "readPreference=zz" in line
    assert PASSWORD not in line


# --- item 5: empty values are refused, naming the option ------------------------------------


@pytest.mark.parametrize(
    "flag",
    [
        "--resume-after",
        "--start-after",
        "--start-at-operation-time",
        "--db",
        "--coll",
        "--server-version",
    ],
)
def test_replay_refuses_an_empty_stream_option(
    capsys: pytest.CaptureFixture[str], oplog: Path, flag: str
) -> None:
    # server: ResumeToken::getData uasserts 40649 ("invalid empty resume token") for an
    # empty resumeAfter/startAfter; empty --db/--coll name no namespace the server accepts.
    line = error_line(capsys, ["replay", str(oplog), "--db", "shop", flag, ""], "replay")
    assert line.endswith(f"error: expected a value for {flag}, got ''")


@pytest.mark.parametrize(
    ("argv", "verb", "name"),
    [
        (["replay", ""], "replay", "PATH"),
        (["replay", "x.jsonl", "--shard", ""], "replay", "--shard"),
        (["watch", ""], "watch", "URI"),
        (["watch", UNREACHABLE, "--resume-after", ""], "watch", "--resume-after"),
        (["bench", "--uri", ""], "bench", "--uri"),
        (["bench", "--json", ""], "bench", "--json"),
        (["ingest", "--table", "", "--simulate"], "ingest", "--table"),
        (["ingest", "--table", "t", "--uri", ""], "ingest", "--uri"),
        (["ingest", "--table", "t", "--simulate", "--checkpoint", ""], "ingest", "--checkpoint"),
        (["ingest", "--table", "t", "--simulate", "--start-after", ""], "ingest", "--start-after"),
        (["sync", "--source", "", "--target", UNREACHABLE], "sync", "--source"),
        (["verify", "--source", UNREACHABLE, "--target", ""], "verify", "--target"),
    ],
)
def test_every_verb_refuses_empty_values(
    capsys: pytest.CaptureFixture[str], argv: list[str], verb: str, name: str
) -> None:
    line = error_line(capsys, argv, verb)
    assert line.endswith(f"error: expected a value for {name}, got ''")


def test_token_decode_of_an_empty_token_is_its_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The token verbs keep their per-input contract: an error line, the others still decoded.
    assert main(["token", "decode", "", TOKEN]) == 1
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["error"].startswith("token: expected a token document")
    assert second["tokenType"] == {"$numberInt": "0"}


# --- odd inputs, verb by verb ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--server-version", "99.99"], "expected --server-version from 6.0 to 8.2"),
        (["--server-version", "5.0"], "expected --server-version from 6.0 to 8.2"),
        (["--server-version", "8"], "expected --server-version as X.Y"),
        (["--start-at-operation-time=-1,0"], "expected --start-at-operation-time as T,I"),
        (["--start-at-operation-time", "4294967296,0"], "each from 0 to 4294967295"),
        (["--start-at-operation-time", "1e400,0"], "expected --start-at-operation-time as T,I"),
        (["--resume-after", "826"], "--resume-after: resume token _data is not a valid hex"),
        (["--resume-after", "82ZZ"], "--resume-after: resume token _data is not a valid hex"),
        (
            ["--start-after", '{"_data": "82", "_typeBits": "AA"}'],
            "--start-after: expected '_typeBits' to be BinData subtype 0",
        ),
        (["--resume-after", '["_data"]'], "--resume-after: resume token _data is not a valid"),
        (["--resume-after", '{"_data": 1}'], "--resume-after: expected '_data' to be a hex"),
    ],
)
def test_replay_odd_options(
    capsys: pytest.CaptureFixture[str], oplog: Path, flags: list[str], expected: str
) -> None:
    assert expected in error_line(capsys, ["replay", str(oplog), *flags], "replay")


def test_replay_odd_paths(capsys: pytest.CaptureFixture[str], tmp_path: Path, oplog: Path) -> None:
    line = error_line(capsys, ["replay", str(tmp_path)], "replay")
    assert f"cannot read oplog file {str(tmp_path)!r}" in line
    line = error_line(capsys, ["replay", str(tmp_path / "missing.bson")], "replay")
    assert "cannot read oplog file" in line
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(bytes(range(256)) * 4)
    line = error_line(capsys, ["replay", "--input-format", "ejson", str(garbage)], "replay")
    assert str(garbage) in line
    text_garbage = tmp_path / "text.jsonl"
    text_garbage.write_text(oplog.read_text() + "[1, 2]\n")
    line = error_line(capsys, ["replay", str(text_garbage)], "replay")
    assert "line 2" in line


@pytest.mark.parametrize("input_format", ["bson", "ejson"])
def test_an_empty_oplog_file_replays_to_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, input_format: str
) -> None:
    # An empty oplog is an oplog without entries: the server's stream is empty too.
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert main(["replay", "--input-format", input_format, str(path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_token_encode_odd_documents(capsys: pytest.CaptureFixture[str]) -> None:
    for document, expected in [
        ('{"clusterTime": {"$date": 1e400}, "version": 2}', "token: expected a decoded-token"),
        ("[1]", "token: expected a decoded-token object in Extended JSON, got list"),
        ('{"version": 2}', "expected clusterTime as"),
        ('{"clusterTime": {"$timestamp": {"t": 1, "i": 1}}, "version": true}', "version"),
    ]:
        assert expected in token_error(capsys, ["token", "encode", document])


def test_watch_refuses_max_events_below_one_before_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = error_line(capsys, ["watch", UNREACHABLE, "--max-events", "0"], "watch")
    assert "expected --max-events N with N >= 1, got 0" in line


def test_bench_odd_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.bson"
    empty.write_bytes(b"")
    line = error_line(capsys, ["bench", "--shard", f"a={empty}", "--repeats", "1"], "bench")
    assert "expected oplog entries to measure, got none" in line
    garbage = tmp_path / "garbage.bson"
    garbage.write_bytes(b"\x10\x00\x00\x00\x7f" + bytes(11))
    line = error_line(capsys, ["bench", "--shard", f"a={garbage}"], "bench")
    assert f"{garbage} at byte 0" in line
    line = error_line(capsys, ["bench", "--uri", UNREACHABLE, "--since-seconds", "nan"], "bench")
    assert "expected --since-seconds as a finite number, got nan" in line
    line = error_line(capsys, ["bench", "--json", str(tmp_path)], "bench")
    assert f"expected --json as a file path, got the directory {str(tmp_path)!r}" in line
    line = error_line(capsys, ["bench", "--plot", str(tmp_path / "no" / "x.png")], "bench")
    assert "expected --plot in an existing directory" in line


def test_ingest_refuses_bad_simulation_sizes_before_spark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = error_line(capsys, ["ingest", "--table", "t", "--simulate", "--shards", "0"], "ingest")
    assert "expected --shards N with N >= 1, got 0" in line
    line = error_line(
        capsys, ["ingest", "--table", "t", "--simulate", "--server-version", "99.99"], "ingest"
    )
    assert "expected --server-version from 6.0 to 8.2" in line


def test_ingest_refuses_a_table_or_checkpoint_that_is_a_file(
    capsys: pytest.CaptureFixture[str], oplog: Path, tmp_path: Path
) -> None:
    # Spark would fail with "An error occurred while calling o63.start", naming neither.
    line = error_line(capsys, ["ingest", "--table", str(oplog), "--simulate"], "ingest")
    assert f"expected --table as a directory (existing or to be made), got {str(oplog)!r}" in line
    argv = ["ingest", "--table", str(tmp_path / "t"), "--checkpoint", f"{oplog}/c", "--simulate"]
    line = error_line(capsys, argv, "ingest")
    assert f"where {str(oplog)!r} is a file" in line
