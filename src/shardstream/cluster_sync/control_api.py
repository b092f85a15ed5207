"""Sync: the progress and control API, mongosync's endpoints so runbooks carry over.

``ControlApi(job, port=27182).start()`` serves, on its own threads:

- ``GET /api/v1/progress``: the progress document (``progress_document``);
- ``POST /api/v1/commit``, ``/api/v1/pause``, ``/api/v1/resume``, ``/api/v1/reverse``
  (after a commit of a ``reversible`` migration): the request, answered at
  once with ``{"success": true, "state": ...}``, or 409 with ``{"success": false, "error":
  ...}`` when the state does not allow it (the commit then runs in the sync's loop: watch
  ``state`` go from ``COMMITTING`` to ``COMMITTED``, or back to ``STREAMING`` with
  ``error``);
- ``GET /metrics``: the Prometheus text format (``sync_metrics``).

The API can stop a migration and block a cluster's writes, so it listens on 127.0.0.1
unless told otherwise, and when it listens anywhere else it needs a bearer token: every
request without ``Authorization: Bearer <token>`` gets 401 and nothing is done. Responses
never carry a URI's credentials (the progress document holds no URI; errors are redacted
where they are made).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, Protocol

from shardstream.cluster_sync.sync_control import RequestRefused, SyncControl
from shardstream.cluster_sync.sync_metrics import metrics_registry, metrics_text
from shardstream.errors import ConfigurationError

DEFAULT_API_PORT: Final = 27182  # mongosync's
LOOPBACK: Final = "127.0.0.1"
PROMETHEUS_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


class ControlledSync(Protocol):
    """What the API needs of a migration (``cluster_sync.migration.Migration``)."""

    @property
    def control(self) -> SyncControl:
        """The running sync's state and requests."""
        ...

    def progress(self) -> dict[str, Any]:
        """The progress document."""
        ...

    def reverse(self) -> str:
        """Ask for the reverse sync."""
        ...


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace dropped; empty is refused)."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigurationError(
            f"expected --api-token-file to name a readable file, got {path!r}: {exc.strerror}"
        ) from None
    if not token:
        raise ConfigurationError(
            f"expected a token in --api-token-file {path!r}, got an empty file"
        )
    return token


class ControlApi:
    """The HTTP API of one sync; :meth:`start` serves it, :meth:`stop` ends it."""

    def __init__(
        self, job: ControlledSync, *, host: str = LOOPBACK, port: int, token: str | None = None
    ) -> None:
        """Args: the sync, where to listen (port 0: any free port), the bearer token.

        Raises:
            ConfigurationError: a host other than loopback without a token.
        """
        if not is_loopback(host) and token is None:
            raise ConfigurationError(
                f"expected --api-token-file with --api-host {host!r}: the API can commit a "
                "migration and block the source's writes, so beyond 127.0.0.1 it needs a token"
            )
        self._job = job
        self._token = token
        self._registry = metrics_registry(job.progress)
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="shardstream-sync-api", daemon=True
        )

    @property
    def url(self) -> str:
        """``http://host:port`` as bound."""
        address = self._server.server_address
        host = address[0] if isinstance(address[0], str) else address[0].decode()
        port = address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}"

    def start(self) -> ControlApi:
        """Serve on a daemon thread; return self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _authorized(self, header: str | None) -> bool:
        if self._token is None:
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), self._token)

    def _answer(self, method: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for one authorized request."""
        path = path.split("?", 1)[0].rstrip("/")
        control = self._job.control
        actions = {
            "/api/v1/commit": control.commit,
            "/api/v1/pause": control.pause,
            "/api/v1/resume": control.resume,
            "/api/v1/reverse": self._job.reverse,
        }
        if path == "/api/v1/progress" and method == "GET":
            return _json(HTTPStatus.OK, self._job.progress())
        if path == "/metrics" and method == "GET":
            return HTTPStatus.OK, PROMETHEUS_TYPE, metrics_text(self._registry)
        if path in actions and method == "POST":
            try:
                state = actions[path]()
            except RequestRefused as exc:
                return _json(HTTPStatus.CONFLICT, {"success": False, "error": str(exc)})
            return _json(HTTPStatus.OK, {"success": True, "state": state})
        if path in actions or path in ("/api/v1/progress", "/metrics"):
            return _json(
                HTTPStatus.METHOD_NOT_ALLOWED,
                {"success": False, "error": f"{method} not allowed on {path}"},
            )
        return _json(HTTPStatus.NOT_FOUND, {"success": False, "error": f"no endpoint {path}"})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "shardstream-sync"

            def _serve(self, method: str) -> None:
                # A body (mongosync's clients send "{}") is read and ignored, so a
                # kept-alive connection's next request starts where it should.
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not api._authorized(self.headers.get("Authorization")):
                    status, kind, body = _json(
                        HTTPStatus.UNAUTHORIZED,
                        {"success": False, "error": "expected a bearer token"},
                    )
                else:
                    status, kind, body = api._answer(method, self.path)
                self.send_response(status)
                if status == HTTPStatus.UNAUTHORIZED:
                    self.send_header("WWW-Authenticate", 'Bearer realm="shardstream sync"')
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # no access log on stderr, where the sync's progress lines go

        return Handler


def _json(status: int, document: dict[str, Any]) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(document).encode()
