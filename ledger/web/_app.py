"""`ledger serve`: the pages of `_pages` over HTTP (Starlette, the optional `web` extra).

Read-only for real: only GET and HEAD are routed and anything else is 405; the ledger is
read through the verifier's source (SQLite opened read-only, PostgreSQL in a read-only
session); every response carries a content security policy that allows no script and
nothing from another origin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verify import LedgerSource, Transparency, Trust

from .._errors import InputError
from ._branch import Branch
from ._index import ChainIndex
from ._pages import CSP, STYLE, Page, Pages, _page_number

__all__ = ["web_app", "serve_app", "SECURITY_HEADERS", "MAX_CONNECTIONS", "HEADER_TIMEOUT_S"]

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_READING = ("GET", "HEAD")


def web_app(
    open_source: Callable[[], LedgerSource],
    trust: Trust,
    title: str = "receipt-ledger",
    policy: Transparency | None = None,
    index: ChainIndex | None = None,
    branch: Branch | None = None,
) -> Any:
    """The ASGI application over the ledger ``open_source`` opens, verifying against
    ``trust`` and ``policy`` (the witnesses and checkpoint `ledger verify` would be given).

    Args:
        open_source: opens the ledger read-only (each page reads through it).
        trust: what the receipts are verified against.
        title: the site's name on every page.
        policy: the witnesses and checkpoint receipts and checkpoints are checked against.
        index: the chain's index (`ChainIndex`: a file kept beside the ledger starts at
            once after a restart); None keeps one in memory.
        branch: the target branch, for the commits page and search by a commit on it.

    Raises:
        InputError: the `web` extra is not installed.
    """
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route
    except ImportError:
        raise InputError("ledger serve needs the web extra: pip install 'receipt-ledger[web]'") from None

    index = index or ChainIndex()
    pages = Pages(index, open_source, trust, title, policy=policy, branch=branch)

    def route(path: str, render: Render) -> Route:
        def work(params: dict[str, Any], asked: dict[str, str]) -> Page:
            with open_source() as source:  # the index catches up with the chain first
                index.update(source)
            return render(params, asked)

        async def endpoint(request: Request) -> Response:
            from starlette.concurrency import run_in_threadpool

            asked = {k: request.query_params.get(k, "") for k in ("q", "verdict", "from", "to", "page")}
            # Verifying a receipt is work that blocks: in the bounded pool, never on the
            # event loop, so one visitor's receipt page does not hold every other request.
            page = await run_in_threadpool(work, dict(request.path_params), asked)
            headers = dict(SECURITY_HEADERS)
            if page.download:
                headers["Content-Disposition"] = 'attachment; filename="%s"' % page.download
            return Response(page.body, page.status, headers=headers, media_type=page.media_type)

        return Route(path, endpoint, methods=list(_READING))

    app = Starlette(routes=[route(path, render) for path, render in _routes(pages)])
    return _ReadOnly(app)


Render = Callable[[dict[str, Any], dict[str, str]], Page]


def _routes(pages: Pages) -> list[tuple[str, Render]]:
    """Every path the view answers, each with its page (path parameters, query)."""
    return [
        ("/", lambda p, q: pages.tasks()),
        ("/index.html", lambda p, q: pages.tasks()),
        ("/style.css", lambda p, q: Page(200, STYLE.encode(), "text/css; charset=utf-8")),
        ("/keys.html", lambda p, q: pages.keys()),
        ("/commits.html", lambda p, q: pages.commits(_page_number(q.get("page")))),
        ("/checkpoints.html", lambda p, q: pages.checkpoints()),
        ("/checks.html", lambda p, q: pages.checks()),
        ("/search", lambda p, q: pages.search(q)),
        ("/chain/{page:int}.html", lambda p, q: pages.chain(p["page"])),
        ("/task/{name}.html", lambda p, q: pages.task(_unname(p["name"]))),
        ("/receipt/{name}.html", lambda p, q: pages.receipt(_receipt(p["name"]))),
        ("/evidence/{digest}.html", lambda p, q: pages.evidence(p["digest"])),
        ("/feed.atom", lambda p, q: pages.feed()),
        ("/api/tasks", lambda p, q: pages.api("tasks")),
        ("/api/search", lambda p, q: pages.api("search", query=q)),
        ("/api/checkpoints", lambda p, q: pages.api("checkpoints")),
        ("/api/chain/{page:int}", lambda p, q: pages.api("chain", page=p["page"])),
        ("/api/receipt/{name}", lambda p, q: pages.api("receipt", target=_receipt(p["name"]))),
    ]


class _ReadOnly:
    """Refuses every method but GET and HEAD before any route is found (no path exists
    that a write could reach), and adds the security headers to every response.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] not in _READING:
            from starlette.responses import Response

            refused = Response(
                "read-only: %s is not allowed\n" % scope["method"],
                405,
                headers={**SECURITY_HEADERS, "Allow": ", ".join(_READING)},
                media_type="text/plain",
            )
            await refused(scope, receive, send)
            return

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                have = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message["headers"] = list(message.get("headers", [])) + [h for h in extra if h[0] not in have]
            await send(message)

        await self.app(scope, receive, sending)


# What one client can hold (issue 47): connections at once, and how long a connection may
# take to send its request's headers before it is closed.
MAX_CONNECTIONS = 64
HEADER_TIMEOUT_S = 10.0


def serve_app(
    app: Any, host: str, port: int, announce: Callable[[str], None], header_timeout_s: float = HEADER_TIMEOUT_S
) -> None:
    """Serve ``app`` under uvicorn until interrupted (SIGINT or SIGTERM); ``announce`` is told
    the address once the socket listens (port 0 picks a free one), so a script may wait for
    that line. A connection that has not sent its request's headers within
    ``header_timeout_s`` is closed, and at most `MAX_CONNECTIONS` are served at once (the
    rest are answered 503), so slow clients cannot hold the server.

    Raises:
        InputError: the address cannot be bound, or the `web` extra is not installed.
    """
    import socket

    try:
        import uvicorn
    except ImportError:
        raise InputError("ledger serve needs the web extra: pip install 'receipt-ledger[web]'") from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InputError("cannot listen on %s port %d: %s" % (host, port, exc.strerror or exc)) from None
    bound = sock.getsockname()[1]
    announce("http://%s:%d/" % ("[%s]" % host if family == socket.AF_INET6 else host, bound))
    config = uvicorn.Config(
        app,
        log_level="warning",
        server_header=False,
        http=_header_timeout_protocol(header_timeout_s),
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=5,
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def _header_timeout_protocol(seconds: float) -> Any:
    """Uvicorn's HTTP protocol, closing a connection whose first request's headers have not
    all arrived within ``seconds`` (uvicorn times out idle keep-alive connections only after
    a response, so a client that never finishes its headers held its socket for ever).
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeout(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._header_timer = self.loop.call_later(seconds, self._header_timeout)

        def _header_timeout(self) -> None:
            begun = getattr(self, "cycle", None) is not None  # uvicorn types it as never None
            if not begun and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._header_timer.cancel()
            super().connection_lost(exc)

    return HeaderTimeout


def _receipt(name: str) -> str:
    """A receipt page's name back to the receipt's hash (`receipt_name`)."""
    name = _unname(name)
    return name if ":" in name else "blake3:" + name


def _unname(name: str) -> str:
    """A page name back to its task id or hash (`page_name`'s ``~XX`` bytes)."""
    import re

    return re.sub(
        r"(?:~[0-9A-F]{2})+",
        lambda m: bytes(int(h, 16) for h in m.group(0).split("~")[1:]).decode("utf-8", "replace"),
        name,
    )
