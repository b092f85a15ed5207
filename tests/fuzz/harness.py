"""Run one fuzzed input through the CLI's ``main()`` and judge it against the reference path.

The rule, per input and per path: exit 0 only with exactly the reference pipeline's
output; otherwise (the reference fails) exit 1 with one line on stderr; never an exception
out of ``main()`` (a traceback) and never a hang (a per-input alarm).
"""

from __future__ import annotations

import dataclasses
import io
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from shardstream.cli import main
from shardstream.errors import ShardstreamError

SECONDS_PER_INPUT = 20.0


class Hang(BaseException):
    """Raised by the alarm when one input runs past its deadline."""


@dataclasses.dataclass(frozen=True)
class CliRun:
    """What one ``main(argv)`` call did."""

    code: int | None  # None: main() raised (``crash`` holds the traceback) or hung
    stdout: bytes
    stderr: str
    crash: str | None = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The reference path's answer for an input: its output, or its error."""

    output: bytes
    error: str | None  # "ClassName: message" when the reference failed with ShardstreamError
    crash: str | None = None  # the reference itself raised something else


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in this thread when the block runs longer than ``seconds``."""

    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: Sequence[str], stdin: bytes = b"") -> CliRun:
    """Run ``shardstream argv`` here, stdout a real file (replay writes to its fd)."""
    saved = sys.stdout, sys.stderr, sys.stdin
    with tempfile.TemporaryFile() as out:
        text_out = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        err = io.StringIO()
        sys.stdout, sys.stderr = text_out, err
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        code: int | None = None
        crash: str | None = None
        try:
            with deadline(SECONDS_PER_INPUT):
                code = main(list(argv))
        except Hang:
            crash = "hang: " + " ".join(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        except Exception:
            crash = traceback.format_exc()
        finally:
            text_out.flush()
            sys.stdout, sys.stderr, sys.stdin = saved
            text_out.detach()
        out.seek(0)
        return CliRun(code, out.read(), err.getvalue(), crash)


def reference_verdict(produce: Callable[[], bytes]) -> Verdict:
    """The reference path's output, or its ShardstreamError as ``"Class: message"``."""
    try:
        with deadline(SECONDS_PER_INPUT):
            return Verdict(produce(), None)
    except ShardstreamError as exc:
        return Verdict(b"", f"{type(exc).__name__}: {exc}")
    except Hang:
        return Verdict(b"", None, "reference hang")
    except Exception:
        return Verdict(b"", None, "reference crash:\n" + traceback.format_exc())


def judge(run: CliRun, verdict: Verdict, prefix: str) -> str | None:
    """None when ``run`` agrees with ``verdict``; otherwise what went wrong, in one line or more.

    ``prefix`` is the start of the one error line (``"shardstream replay: error:"``).
    """
    if verdict.crash is not None:
        return verdict.crash
    if run.crash is not None:
        return "traceback from main():\n" + run.crash
    if verdict.error is None:
        if run.code != 0:
            return f"exit {run.code} where the reference succeeds: {run.stderr.strip()[:300]}"
        if run.stdout != verdict.output:
            return (
                f"exit 0 with different output ({len(run.stdout)} bytes, reference "
                f"{len(verdict.output)} bytes)"
            )
        return None
    if run.code != 1:
        return f"exit {run.code} where the reference fails with {verdict.error[:300]}"
    return one_line_error(run.stderr, prefix)


def one_line_error(stderr: str, prefix: str) -> str | None:
    """None when ``stderr`` is exactly one line starting with ``prefix``."""
    lines = stderr.splitlines()
    if len(lines) != 1 or not lines[0].startswith(prefix):
        return f"expected one line starting {prefix!r} on stderr, got {stderr[:500]!r}"
    return None


def write_shards(directory: Path, shards: Sequence[tuple[str, list[bytes]]]) -> list[str]:
    """Write each shard's entries as ``<name>.bson`` in ``directory``; return --shard args."""
    args = []
    for name, entries in shards:
        path = directory / f"{name}.bson"
        path.write_bytes(b"".join(entries))
        args.append(f"{name}={path}")
    return args


def failure_report(failures: Sequence[tuple[str, str]], limit: int = 5) -> str:
    """The first few failures, each with the input that caused it."""
    shown = [f"--- {what}\n{why}" for what, why in failures[:limit]]
    return f"{len(failures)} inputs failed; the first ones:\n" + "\n".join(shown)


def describe(value: Any, width: int = 200) -> str:
    """A short repr for reports."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
