"""``shardstream sync``'s progress and control API: its options, the server's lifetime, and
``shardstream sync status|commit|pause|resume|reverse``, the wrappers a person runs.

``sync --api-port PORT`` serves the API (``cluster_sync.control_api``) while the sync runs,
and, once committed, until Ctrl-C (a runbook reads ``COMMITTED`` and ``canWrite`` from it).
A wrapper sends its request to ``--api`` (default ``http://127.0.0.1:27182``, the port
mongosync uses) with the bearer token of ``--api-token-file`` when given, and prints the
reply as one JSON line; ``commit`` then follows the progress until the commit finished
(exit 0) or failed (exit 1, the reason on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Final

ACTIONS: Final = ("status", "commit", "pause", "resume", "reverse")
DEFAULT_API_URL: Final = "http://127.0.0.1:27182"
POLL_S: Final = 0.5
# SyncOptions' default, repeated for the help text (the CLI starts without pymongo;
# tests/cluster_sync/test_sync_refusals.py checks they agree).
DEFAULT_COMMIT_TIMEOUT_S: Final = 120.0


class ApiUnreachable(Exception):
    """The API did not answer (or answered with something other than its JSON)."""


def add_api_arguments(sync: argparse.ArgumentParser) -> None:
    """The API's options on ``sync``, and the wrappers' positional action."""
    sync.add_argument(
        "action",
        nargs="?",
        choices=ACTIONS,
        help="talk to a running sync's API instead of starting one: status (print its "
        "progress), commit (block the source's writes, catch up, verify, then COMMITTED), "
        "pause, resume, reverse (after a commit of a --reversible sync: sync the target back "
        "into the source from the commit on)",
    )
    sync.add_argument(
        "--api-port",
        type=int,
        metavar="PORT",
        help="serve the progress and control API (mongosync's endpoints: /api/v1/progress, "
        "/api/v1/commit, /api/v1/pause, /api/v1/resume, /api/v1/reverse; /metrics for "
        "Prometheus) on PORT",
    )
    sync.add_argument(
        "--api-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the API's address (default 127.0.0.1; any other needs --api-token-file)",
    )
    sync.add_argument(
        "--api-token-file",
        metavar="FILE",
        help="a file holding the API's bearer token: required by the API on every request, "
        "sent by the status/commit/pause/resume/reverse wrappers",
    )
    sync.add_argument(
        "--api",
        default=DEFAULT_API_URL,
        metavar="URL",
        help=f"the running sync's API, for status/commit/pause/resume/reverse (default "
        f"{DEFAULT_API_URL})",
    )
    sync.add_argument(
        "--no-write-blocking",
        action="store_true",
        help="a commit does not block the source's writes (setUserWriteBlockMode, 6.0+): you "
        "promise to have stopped them before asking for it",
    )
    sync.add_argument(
        "--reversible",
        action="store_true",
        help="once committed, wait for `shardstream sync reverse` (POST /api/v1/reverse): "
        "the target synced back into the source from the commit on, no copy (not with --map)",
    )
    sync.add_argument(
        "--reverse",
        action="store_true",
        help="start (or resume) the reverse of a sync committed earlier, with the same "
        "--source, --target and --sync-id: the target streamed into the source from the "
        "commit's time, the source's write block lifted",
    )
    sync.add_argument(
        "--commit-timeout",
        type=float,
        default=DEFAULT_COMMIT_TIMEOUT_S,
        metavar="S",
        help="how long a commit may take to apply up to the source's time after the block "
        f"before it fails and lifts the block (default {DEFAULT_COMMIT_TIMEOUT_S:g})",
    )


def request(url: str, method: str, token: str | None, timeout_s: float = 10.0) -> dict[str, Any]:
    """One API call's JSON reply (a refusal's too: its ``success`` is false).

    Raises:
        ApiUnreachable: no answer, or not the API's JSON.
    """
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    data = b"{}" if method == "POST" else None
    call = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(call, timeout=timeout_s) as reply:
            body = reply.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
        if exc.code == 401:
            raise ApiUnreachable(f"expected a token the API accepts at {url}, got 401") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ApiUnreachable(f"expected a sync's API at {url}, got no answer: {reason}") from None
    try:
        answer = json.loads(body)
    except ValueError:
        raise ApiUnreachable(f"expected the sync API's JSON at {url}, got {body[:80]!r}") from None
    if not isinstance(answer, dict):
        raise ApiUnreachable(f"expected a JSON object from {url}, got {answer!r:.80}")
    return answer


def run_action(args: argparse.Namespace) -> int:
    """``shardstream sync ACTION``: one request to the API (and, for commit, its end)."""
    from shardstream.cluster_sync.control_api import read_token_file

    base = args.api.rstrip("/")
    try:
        token = None if args.api_token_file is None else read_token_file(args.api_token_file)
        if args.action == "status":
            print(json.dumps(request(f"{base}/api/v1/progress", "GET", token)))
            return 0
        answer = request(f"{base}/api/v1/{args.action}", "POST", token)
        print(json.dumps(answer))
        if not answer.get("success"):
            return 1
        return _follow_commit(base, token) if args.action == "commit" else 0
    except Exception as exc:  # one line, never a traceback
        print(f"shardstream sync {args.action}: error: {exc}", file=sys.stderr)
        return 1


def _follow_commit(base: str, token: str | None) -> int:
    """Poll the progress until the commit finished (0) or failed (1)."""
    while True:
        progress = request(f"{base}/api/v1/progress", "GET", token)
        state = progress.get("state")
        if state == "COMMITTED":
            print(json.dumps(progress))
            return 0
        if state != "COMMITTING":
            print(json.dumps(progress))
            print(
                f"shardstream sync commit: error: the commit did not finish ({state}): "
                f"{progress.get('error')}",
                file=sys.stderr,
            )
            return 1
        time.sleep(POLL_S)


def serve_until_interrupted(stop: threading.Event) -> None:
    """Block until ``stop`` is set (the CLI's SIGINT/SIGTERM handler sets it)."""
    while not stop.wait(0.5):
        pass
