"""write_behind: the writes' results in the items' order, a bounded number in flight, and
every error raised to the caller once the writes in flight have ended."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from shardstream.spark.delta.write_behind import write_behind


class _Counting:
    """A write that records how many writes run at once, and how far ahead the items are."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most_running = 0
        self.made = 0
        self.done = 0
        self.most_ahead = 0

    def items(self, count: int) -> Iterator[int]:
        for item in range(count):
            with self.lock:
                self.made += 1
                self.most_ahead = max(self.most_ahead, self.made - self.done)
            yield item

    def write(self, item: int) -> int:
        with self.lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        time.sleep(0.002 * (item % 3))  # uneven: later items may end first
        with self.lock:
            self.running -= 1
            self.done += 1
        return item * 10


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_results_come_in_the_items_order_with_a_bounded_number_in_flight(threads: int) -> None:
    counting = _Counting()
    assert write_behind(counting.write, counting.items(30), threads) == [i * 10 for i in range(30)]
    assert 1 <= counting.most_running <= threads
    # Items made but not yet written: the writes in flight, one waiting, and the one made.
    assert counting.most_ahead <= threads + 2


def test_a_write_error_reaches_the_caller_after_the_writes_in_flight() -> None:
    finished: list[int] = []

    def write(item: int) -> int:
        if item == 3:
            raise ValueError("expected a writable file, got a broken one")
        time.sleep(0.005)
        finished.append(item)
        return item

    with pytest.raises(ValueError, match="broken"):
        write_behind(write, iter(range(10)), 2)
    assert {0, 1, 2} <= set(finished)  # those before it ended; nothing left running
    count = len(finished)
    time.sleep(0.02)
    assert len(finished) == count


def test_an_error_making_the_items_reaches_the_caller() -> None:
    written: list[int] = []

    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise LookupError("expected a bucket's stored file, got none")

    with pytest.raises(LookupError, match="stored file"):
        write_behind(written.append, items(), 1)
    assert written == [1, 2]  # the writes already handed over still ended
