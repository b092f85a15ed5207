"""Resume-token codec throughput on one core: a typical v2 CRUD token (ObjectId _id).

Run: ``.venv/bin/python -m benchmarks.token_throughput`` (or ``make bench``).
Prints encodes/s and decodes/s (best of several repeats, with the spread), and
the same token through the general encoder, so the template path's gain is a
ratio measured in this one run.
"""

from __future__ import annotations

import platform
import statistics
import sys
import timeit
import uuid
from collections.abc import Callable

import bson
import pymongo
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.resume_token import ResumeTokenData, decode_token, encode_token
from shardstream.resume_token.keystring.codec import encode_values
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter

CALLS = 20_000
REPEATS = 7


def typical_crud_token() -> ResumeTokenData:
    """A v2 insert token with a collection UUID and an ObjectId ``_id``."""
    return ResumeTokenData(
        cluster_time=Timestamp(1700000000, 7),
        uuid=uuid.UUID("0123abcd-4567-489a-8bcd-ef0123456789"),
        event_identifier={
            "operationType": "insert",
            "documentKey": {"_id": ObjectId("65a1b2c3d4e5f60718293a4b")},
        },
    )


def general_encode(data: ResumeTokenData) -> str:
    """The value-walking encoder that every other token shape takes."""
    out, bits = bytearray(), TypeBitsWriter()
    encode_values(
        [
            data.cluster_time,
            2,
            128,
            data.txn_op_index,
            data.from_invalidate,
            data.uuid,
            data.event_identifier,
        ],
        out,
        bits,
    )
    out.append(0x04)
    return out.hex().upper()


def rate(call: Callable[[], object]) -> tuple[float, float]:
    """Return (median calls/s, relative spread) over ``REPEATS`` timings."""
    rates = [CALLS / t for t in timeit.repeat(call, number=CALLS, repeat=REPEATS)]
    return statistics.median(rates), (max(rates) - min(rates)) / statistics.median(rates)


def main() -> int:
    data = typical_crud_token()
    token = encode_token(data)
    if general_encode(data) != token.data or decode_token(token) != data:
        print("encoders disagree; refusing to report", file=sys.stderr)
        return 1
    print(
        f"python {platform.python_version()}, pymongo {pymongo.version} "
        f"(bson C extension: {bson.has_c()}), {platform.machine()}, one core"
    )
    results = {
        "encode (template path)": rate(lambda: encode_token(data)),
        "encode (general path)": rate(lambda: general_encode(data)),
        "decode": rate(lambda: decode_token(token)),
    }
    for name, (median, spread) in results.items():
        print(f"{name:24s} {median:12,.0f} /s   spread {spread:5.1%}")
    template, general = results["encode (template path)"][0], results["encode (general path)"][0]
    print(f"template / general encode ratio: {template / general:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
