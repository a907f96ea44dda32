"""What every mock model API of the tests shares: a threaded HTTP server on 127.0.0.1 that records
each request, started and stopped by the test (a context manager)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

__all__ = ["MockHTTPServer", "MockServer"]

R = TypeVar("R")


class MockHTTPServer(ThreadingHTTPServer):
    """The socket server; its handlers find the mock as ``self.server.mock``."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    mock: Any


class MockServer(Generic[R]):
    """The lifecycle and the log of recorded requests (`R`); a subclass brings the handler.

    Args:
        handler: the request handler class (it finds this object as ``self.server.mock``).
        name: the serving thread's name.
    """

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        name: str,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._requests: list[R] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = MockHTTPServer((host, port), handler)
        self._server.mock = self
        self._name = name
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=self._name,
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent); slow replies end at once."""
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def requests(self) -> list[R]:
        """Every request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def _record(self, request: R) -> None:
        with self._lock:
            self._requests.append(request)


class MockRequestHandler(BaseHTTPRequestHandler):
    """What every mock's handler does alike: HTTP/1.1, no access log, JSON bodies decoded."""

    server: MockHTTPServer
    protocol_version = "HTTP/1.1"
    json_content_type = "application/json"
    """The ``content-type`` of a JSON answer (the real APIs differ in the charset)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the agents' chatter is not test output

    def _read_body(self) -> Any:
        """The request's body: JSON decoded, else text, None when empty."""
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        """One JSON answer, then the connection closes."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", self.json_content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True
