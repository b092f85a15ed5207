"""What ``make demo`` shows until the merger lands: the token codec on real tokens.

The tokens below were emitted by real servers (the sources are named beside
each); the demo decodes them, then re-encodes one and checks the bytes match.
"""

from __future__ import annotations

from typing import Final, TextIO

from shardstream.resume_token import (
    ResumeToken,
    decode_token,
    encode_token,
    event_token_data,
)
from shardstream.resume_token.token_json import dumps, token_data_to_document

REAL_TOKENS: Final = (
    (
        "MongoDB 4.4 insert, v1 token, ObjectId _id (server error message on GitHub)",
        ResumeToken(
            "8260687B2D000000022B022C0100296E5A100420EA7287C1204D83A4FFDA70F869EC5646645F69"
            "64006460687B2D8FAF53467F4CD2B00004"
        ),
    ),
    (
        "MongoDB 8.0 modify (collMod TTL), v2 token with _typeBits (Debezium design doc)",
        ResumeToken(
            "826AAA2A6C000000012B042C0100296E5A1004ADB3EAFEEBCF423683BE8CF7CBC7F1D2463C6F70"
            "65726174696F6E54797065003C6D6F6469667900466F7065726174696F6E446573637269707469"
            "6F6E004646696E64657800463C6E616D65003C6578706972657341745F31001E65787069726541"
            "667465725365636F6E6473002C1C2000000004",
            bytes.fromhex("820002"),
        ),
    ),
    (
        "MongoDB 7.0+ high-water mark, v2 token used as a Kafka message _id (GitHub README)",
        ResumeToken("82644F2A8D000000012B0429296E1404"),
    ),
)


def run_token_demo(out: TextIO) -> int:
    """Print decoded real tokens and one re-encoding; return 0 when all bytes match."""
    status = 0
    for title, token in REAL_TOKENS:
        data = decode_token(token)
        again = encode_token(data)
        same = again.data == token.data and again.type_bits == token.type_bits
        status |= 0 if same else 1
        print(f"# {title}", file=out)
        print(f"  _data     {token.data}", file=out)
        print(f"  decoded   {dumps(token_data_to_document(data))}", file=out)
        print(f"  re-encode {'byte-identical' if same else 'DIFFERS: ' + again.data}", file=out)
    first = decode_token(REAL_TOKENS[0][1])
    rebuilt = event_token_data(
        cluster_time=first.cluster_time,
        operation_type="insert",
        uuid=first.uuid,
        document_key=first.document_key,
    )
    print("# the same insert as a v2 token (what MongoDB 7.0+ would emit)", file=out)
    print(f"  _data     {encode_token(rebuilt).data}", file=out)
    return status
