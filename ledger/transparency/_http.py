"""The small HTTP servers the log runs beside itself (a witness, SCITT registration): one
way to answer and one way to listen, so that each server is only its resources. Each reads
a request on a thread of its own, at most `BoundedThreadingServer.max_connections` at once,
and stops cleanly on SIGINT and SIGTERM.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any, TypeVar

from .._errors import InputError

__all__ = ["QuietHandler", "BoundedThreadingServer", "OwnerThread", "listen_and_serve"]

_T = TypeVar("_T")


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that answers whole bodies and keeps no access log (what a server decided
    is in its state or the chain, not on stderr). A connection that sends nothing for
    `timeout` seconds is dropped: a half-sent request does not hold its thread for ever.
    """

    timeout = 10.0

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
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            # Freed before the close its client sees: a client told "closed" finds it free.
            self._slots.release()
            self.shutdown_request(request)


# How long the owning thread waits for a job before it looks for a signal. A signal that
# arrives between its last look and the start of a wait does not interrupt that wait (the
# C handler has already run), so an unbounded wait could miss SIGTERM for ever; this bounds
# the delay, as `serve_forever`'s poll interval does for the accepting thread.
_SIGNAL_POLL_S = 0.5


class OwnerThread:
    """Work that must run on one thread, handed to it by the request threads one job at a
    time: a ledger's SQLite connection belongs to the thread that opened it (and the
    chain's appends are one at a time anyway). Made on that thread, where `call` runs its
    work at once; `listen_and_serve` runs the jobs there while other threads read requests.
    """

    def __init__(self) -> None:
        self._ident = threading.get_ident()
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._taking = False  # whether the owning thread takes jobs (`taking_jobs`)
        self._handing = threading.Lock()  # a job is queued only while jobs are taken

    def call(self, work: Callable[[], _T]) -> _T:
        """``work()``, run on the owning thread; its result or its exception.

        Raises:
            RuntimeError: called from another thread while the owning thread takes no jobs;
                the job would wait for ever.
        """
        if threading.get_ident() == self._ident:
            return work()
        done: Future[_T] = Future()
        with self._handing:
            if not self._taking:
                raise RuntimeError("this work runs on the thread that opened the ledger, which is not serving")
            self._jobs.put((done, work))
        return done.result()

    @contextlib.contextmanager
    def taking_jobs(self) -> Iterator[None]:
        """Other threads may hand jobs over from here on (before they start), and a job
        handed over but not done when this ends fails rather than waits.
        """
        self._taking = True
        try:
            yield
        finally:
            with self._handing:
                self._taking = False
            while not self._jobs.empty():
                self._jobs.get()[0].set_exception(RuntimeError("the server stopped before this work ran"))

    def run(self) -> None:
        """Do the jobs handed over, in order, until interrupted (on the owning thread only,
        inside `taking_jobs`).
        """
        if threading.get_ident() != self._ident or not self._taking:
            raise RuntimeError("an OwnerThread's jobs run on the thread that made it, while it takes them")
        while True:
            try:
                done, work = self._jobs.get(timeout=_SIGNAL_POLL_S)
            except queue.Empty:
                continue  # where a signal that came as the wait began is acted on
            try:
                done.set_result(work())
            except (KeyboardInterrupt, SystemExit) as exc:
                done.set_exception(exc)
                raise
            except BaseException as exc:  # the request's thread answers for it
                done.set_exception(exc)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the server as SIGINT does (a service manager's stop is a clean exit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _serve_unsignalled(server: HTTPServer) -> None:
    """``server.serve_forever()`` with SIGINT and SIGTERM blocked on this thread and the
    request threads it starts: the kernel then delivers them to the main thread, whose wait
    for jobs they interrupt (one delivered here would leave it waiting).
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    server.serve_forever()


def listen_and_serve(
    server_class: type[HTTPServer],
    handler: type[BaseHTTPRequestHandler],
    host: str,
    port: int,
    announce: Callable[[str], None],
    owner: OwnerThread | None = None,
) -> None:
    """Listen on ``host:port`` (port 0 picks a free one), tell ``announce`` the address once
    the socket listens, and serve until interrupted (SIGINT or SIGTERM). With ``owner``, the
    server accepts on a thread of its own and this thread runs the owner's jobs.

    Raises:
        InputError: the address cannot be bound.
    """
    try:
        server = server_class((host, port), handler)
    except OSError as exc:
        raise InputError("cannot listen on %s:%d: %s" % (host, port, exc.strerror or exc)) from None
    host_bound, port_bound = server.server_address[:2]
    announce("http://%s:%d/" % (str(host_bound), int(port_bound)))
    with contextlib.suppress(KeyboardInterrupt), server, _terminate_as_interrupt():
        if owner is None:
            server.serve_forever()
            return
        with owner.taking_jobs():
            accepting = threading.Thread(target=_serve_unsignalled, args=(server,), name="accept", daemon=True)
            accepting.start()
            try:
                owner.run()
            finally:
                server.shutdown()
