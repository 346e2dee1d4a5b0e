"""A local stand-in for the GitHub REST API on 127.0.0.1: a repository's issue comments,
served as GitHub serves them, with every request recorded so that a test checks exactly
what would have been sent."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeGithub:
    """Issue comments of one repository, served as GitHub's REST API serves them."""

    comments: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    url: str = ""
    next_id: int = 1000
    refuse_writes: bool = False  # as GitHub answers a forked pull request's read-only token


def _issue(path: str) -> int:
    """The issue (pull request) number of ``/repos/OWNER/NAME/issues/N/comments...``."""
    match = re.match(r"^/repos/[^/]+/[^/]+/issues/([0-9]+)/comments", path)
    assert match, "not an issue's comments: %s" % path
    return int(match.group(1))


@contextmanager
def serve() -> Iterator[FakeGithub]:
    """The server, running until the block ends."""
    state = FakeGithub()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, code: int, doc: Any) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            # Header names are case-insensitive: kept in lower case to compare.
            state.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            return body

        def do_GET(self) -> None:
            self._record()
            issue = _issue(self.path)
            listed = [c for c in state.comments if c["issue"] == issue]
            self._answer(200, listed if "page=1" in self.path else [])

        def do_POST(self) -> None:
            body = self._record()
            if state.refuse_writes:
                self._answer(403, {"message": "Resource not accessible by integration"})
                return
            state.next_id += 1
            comment = {
                "id": state.next_id,
                "issue": _issue(self.path),
                "body": body["body"],
                "user": {"login": "github-actions[bot]"},
            }
            state.comments.append(comment)
            self._answer(201, comment)

        def do_PATCH(self) -> None:
            body = self._record()
            cid = int(self.path.rsplit("/", 1)[1])
            for comment in state.comments:
                if comment["id"] == cid:
                    comment["body"] = body["body"]
                    self._answer(200, comment)
                    return
            self._answer(404, {"message": "Not Found"})

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = "http://127.0.0.1:%d" % server.server_address[1]
    yield state
    server.shutdown()
    server.server_close()
