"""The small HTTP servers the log runs beside itself (a witness, SCITT registration): one
way to answer and one way to listen, so that each server is only its resources.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

from .._errors import InputError

__all__ = ["QuietHandler", "BoundedThreadingServer", "listen_and_serve"]


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that answers whole bodies and keeps no access log (what a server decided
    is in its state or the chain, not on stderr). A connection that sends nothing for
    `timeout` seconds is dropped: a half-sent request does not hold its thread for ever.
    """

    timeout = 10

    def answer(self, status: int, media_type: str, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class BoundedThreadingServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` at once: one more is answered 503
    and closed at once, so many slow clients cannot make the server start a thread each.
    """

    daemon_threads = True
    max_connections = 32

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(self.max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def listen_and_serve(
    server_class: type[HTTPServer],
    handler: type[BaseHTTPRequestHandler],
    host: str,
    port: int,
    announce: Callable[[str], None],
) -> None:
    """Listen on ``host:port`` (port 0 picks a free one), tell ``announce`` the address once
    the socket listens, and serve until interrupted.

    Raises:
        InputError: the address cannot be bound.
    """
    try:
        server = server_class((host, port), handler)
    except OSError as exc:
        raise InputError("cannot listen on %s:%d: %s" % (host, port, exc.strerror or exc)) from None
    host_bound, port_bound = server.server_address[:2]
    announce("http://%s:%d/" % (str(host_bound), int(port_bound)))
    with contextlib.suppress(KeyboardInterrupt), server:
        server.serve_forever()
