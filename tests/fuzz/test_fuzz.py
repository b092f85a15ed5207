"""The fuzz suite: a fixed-seed campaign over every input kind and every path.

Per input (see harness.py): exit 0 only with exactly the reference pipeline's output,
otherwise exit 1 with one line on stderr; never a traceback, never a hang. ``make fuzz
N=100000`` runs the same campaign longer (``python -m tests.fuzz.campaign``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.campaign import campaign
from tests.fuzz.harness import failure_report, run_cli

# 1,760 inputs in all (and 200 tokens below), in chunks: each test stays short and names
# its seed; 12-18 s per chunk on the 2-core machine under make test's three workers
# (2026-11-28), about two minutes of the suite in all.
CHUNKS = 8
INPUTS_PER_CHUNK = 220


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(CHUNKS))
def test_fuzz_campaign(seed: int) -> None:
    failures = [
        failure
        for _, found in campaign(INPUTS_PER_CHUNK, seed, workers_every=25)
        for failure in found
    ]
    assert not failures, failure_report(failures)


_HEX = "0123456789abcdefABCDEF"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_HEX, max_size=80) | st.text(max_size=40))
def test_token_decode_answers_every_text_with_one_line(text: str) -> None:
    run = run_cli(["token", "decode", text])
    assert run.crash is None, run.crash
    assert run.code in (0, 1)
    lines = run.stdout.decode().splitlines()
    assert len(lines) == 1
    assert (run.code == 1) == lines[0].startswith('{"error": ')
