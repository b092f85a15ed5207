"""``quiet_collector``: the collector quiet while any use lasts, its settings back after."""

from __future__ import annotations

import gc
import threading

from shardstream.transform.raw.encoded_stream import QUIET_GC_THRESHOLD, quiet_collector


def test_the_collector_is_quiet_inside_and_as_it_was_after() -> None:
    before = gc.get_threshold()
    with quiet_collector():
        assert gc.get_threshold()[0] == QUIET_GC_THRESHOLD
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before


def test_overlapping_uses_share_one_quiet_period() -> None:
    # A sync and its reverse in one process: the first to leave must not end the
    # other's quiet period, nor the last leave the quiet thresholds behind.
    before = gc.get_threshold()
    entered, leave_first = threading.Event(), threading.Event()

    def other() -> None:
        with quiet_collector():
            entered.set()
            leave_first.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    assert entered.wait(10)
    with quiet_collector():
        leave_first.set()
        thread.join(10)
        assert gc.get_threshold()[0] == QUIET_GC_THRESHOLD  # the other left; this one stays
    assert gc.get_threshold() == before
