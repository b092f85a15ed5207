"""The CLI contract of ``shardstream token decode/encode`` and ``demo``, run in-process."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest
from bson.timestamp import Timestamp

from shardstream.cli.main import main
from shardstream.sim.emulated_source import SimulatedSource

V1_INSERT = (
    "8260687B2D000000022B022C0100296E5A100420EA7287C1204D83A4FFDA70F869EC5646645F6964006460687B"
    "2D8FAF53467F4CD2B00004"
)
V2_MODIFY_LONG = (
    "826AAA2A6C000000012B042C0100296E5A1004ADB3EAFEEBCF423683BE8CF7CBC7F1D2463C6F7065726174696F"
    "6E54797065003C6D6F6469667900466F7065726174696F6E4465736372697074696F6E004646696E64657800463C"
    "6E616D65003C6578706972657341745F31001E65787069726541667465725365636F6E6473002C1C2000000004"
)
LEGACY_36 = "glpQAD8AAAABRmRfaWQAZFpP/IptmjaX/MSUvQBaEAQJk0ZWeQ1G/5zFikqpXugfBA=="


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_decode_writes_canonical_fields_in_token_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "decode", V1_INSERT]) == 0
    (line,) = _lines(capsys)
    assert list(line) == [
        "clusterTime",
        "version",
        "tokenType",
        "txnOpIndex",
        "fromInvalidate",
        "uuid",
        "documentKey",
    ]
    assert line["clusterTime"] == {"$timestamp": {"t": 1617460013, "i": 2}}
    assert line["version"] == {"$numberInt": "1"}
    assert line["tokenType"] == {"$numberInt": "128"}
    assert line["uuid"] == {"$binary": {"base64": "IOpyh8EgTYOk/9pw+GnsVg==", "subType": "04"}}
    assert line["documentKey"] == {"_id": {"$oid": "60687b2d8faf53467f4cd2b0"}}


def test_decode_document_with_type_bits_keeps_the_long(capsys: pytest.CaptureFixture[str]) -> None:
    document = json.dumps(
        {"_data": V2_MODIFY_LONG, "_typeBits": {"$binary": {"base64": "ggAC", "subType": "00"}}}
    )
    assert main(["token", "decode", document]) == 0
    (line,) = _lines(capsys)
    description = line["eventIdentifier"]["operationDescription"]  # type: ignore[index]
    assert description["index"]["expireAfterSeconds"] == {"$numberLong": "3600"}


def test_decode_legacy_bindata_token(capsys: pytest.CaptureFixture[str]) -> None:
    document = json.dumps({"_data": {"$binary": {"base64": LEGACY_36, "subType": "00"}}})
    assert main(["token", "decode", document]) == 0
    (line,) = _lines(capsys)
    assert line["version"] == {"$numberInt": "0"}
    assert line["txnOpIndex"] == {"$numberInt": "0"}
    assert line["tokenType"] == {"$numberInt": "128"}
    assert line["fromInvalidate"] is False
    assert line["documentKey"] == {"_id": {"$oid": "5a4ffc8a6d9a3697fcc494bd"}}
    assert line["clusterTime"] == {"$timestamp": {"t": 1515192383, "i": 1}}


def test_decode_reports_bad_lines_and_goes_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(f'{V1_INSERT}\nnot-hex\n\n{{"_data": 1}}\n'))
    assert main(["token", "decode"]) == 1
    lines = _lines(capsys)
    assert len(lines) == 3
    assert "documentKey" in lines[0]
    assert "not a valid hex string" in str(lines[1]["error"])
    assert "expected '_data' to be a hex string" in str(lines[2]["error"])


def test_decode_then_encode_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    with_type_bits = json.dumps(
        {"_data": V2_MODIFY_LONG, "_typeBits": {"$binary": {"base64": "ggAC", "subType": "00"}}}
    )
    assert main(["token", "decode", V1_INSERT, with_type_bits]) == 0
    decoded = capsys.readouterr().out.splitlines()
    assert main(["token", "encode", *decoded]) == 0
    encoded = _lines(capsys)
    assert encoded[0] == {"_data": V1_INSERT}
    assert encoded[1] == {
        "_data": V2_MODIFY_LONG,
        "_typeBits": {"$binary": {"base64": "ggAC", "subType": "00"}},
    }


def test_encode_accepts_relaxed_numbers_and_requires_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hwm = '{"clusterTime": {"$timestamp": {"t": 1682909837, "i": 1}}, "version": 2, "tokenType": 0}'
    no_version = '{"clusterTime": {"$timestamp": {"t": 1, "i": 0}}}'
    assert main(["token", "encode", hwm, no_version, "[1]", "{bad json"]) == 1
    lines = _lines(capsys)
    assert lines[0] == {"_data": "82644F2A8D000000012B0429296E1404"}
    assert "expected a 'version' key" in str(lines[1]["error"])
    assert "expected a decoded-token object" in str(lines[2]["error"])
    assert "Extended JSON" in str(lines[3]["error"])


def test_python_dash_m_runs_the_same_main() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "shardstream",
            "token",
            "decode",
            "82644F2A8D000000012B0429296E1404",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout)["tokenType"] == {"$numberInt": "0"}


def test_demo_merges_a_simulated_cluster_and_rebuilds_its_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--no-spark"]) == 0
    out = capsys.readouterr().out
    assert "events per shard: shard0" in out
    assert "final postBatchResumeToken" in out
    assert out.rstrip().endswith("byte for byte): yes")


def test_demo_sync_syncs_a_live_simulated_cluster_and_checks_it_against_the_truth(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--sync"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    at_cut = re.search(r"cut at cluster time \S+: (\d+) documents", out)
    copied = re.search(r"sync stopped: ([\d,]+) documents copied at T0", out)
    assert at_cut is not None
    assert copied is not None
    # The copy holds exactly the run up to the cut; the rest came through the stream.
    assert copied.group(1).replace(",", "") == at_cut.group(1)
    assert any(line.startswith("  sync copy:") for line in lines)
    assert any(line.startswith("  copy done; the rest of the run") for line in lines)
    assert any(line.startswith("  sync stream:") for line in lines)
    assert "  verify: equal" in lines
    assert "DIFFERENT" not in out
    assert lines[-1].endswith("byte for byte): yes")


def test_demo_sync_fails_when_the_target_misses_the_truth_even_if_verify_agrees(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rest of the run never reaches the source: source and target agree with each
    # other, and only the comparison with the simulator's final data can tell.
    monkeypatch.setattr(SimulatedSource, "feed_rest", lambda _self: Timestamp(1, 1))
    assert main(["demo", "--sync"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "  verify: equal" in lines
    verdict = next(line for line in lines if line.startswith("the target holds"))
    assert verdict.endswith("byte for byte): NO")
    assert any("missing" in line for line in lines[lines.index(verdict) :])


def test_demo_takes_one_kind_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--sync", "--no-spark"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: shardstream" in capsys.readouterr().err
