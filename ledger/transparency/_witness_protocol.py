"""The C2SP `tlog-witness` protocol, both sides (docs/format.md §9b).

`WitnessService` is the witness: it answers `add-checkpoint` from its state file by
`receipts.witness_decision`, checking and keeping its state under one lock (a thread
lock and the state file's own lock, so two processes on one state file cannot roll it
back), and cosigns only what the rules allow. `serve_witness` puts it on HTTP.
`request_cosignatures` is the log's side: it sends each witness of a policy the
checkpoint with a consistency proof from the size that witness holds (asking again from
the size a 409 names), and stores the cosignatures that verify.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from receipts import (
    SIZE_MEDIA_TYPE,
    ReceiptsError,
    Signer,
    TlogPolicy,
    add_checkpoint_body,
    consistency_proof,
    cosign_note,
    cosignature_time,
    parse_add_checkpoint,
    parse_public_key_blob,
    parse_tlog_policy,
    parse_verifier_key,
    verifier_key,
    witness_decision,
)
from verify import WitnessKey

from .._errors import InputError
from ..store._ledger import Ledger
from ._http import BoundedThreadingServer, QuietHandler, listen_and_serve
from ._witness import add_cosignatures, read_witness_state, write_witness_state

__all__ = [
    "WitnessService",
    "serve_witness",
    "request_cosignatures",
    "Requested",
    "read_tlog_policy",
    "log_vkeys",
    "witness_vkey",
]

_LOG_KEY_TYPE = 0x01  # signed-note Ed25519
_COSIGNATURE_KEY_TYPE = 0x04  # tlog-cosignature
MAX_BODY = 1 << 16  # a checkpoint note and 63 proof lines fit many times over


def read_tlog_policy(text: str, where: str) -> TlogPolicy:
    """A C2SP tlog-policy's text, parsed.

    Raises:
        InputError: naming ``where`` and the line at fault.
    """
    try:
        return parse_tlog_policy(text)
    except ReceiptsError as exc:
        raise InputError("%s: %s" % (where, exc)) from None


def witness_vkey(name: str, public_key_blob: bytes) -> str:
    """A witness's verifier key (cosignature type 0x04), for the `witness` lines of a policy.

    Raises:
        InputError: the name or key cannot make one.
    """
    try:
        return verifier_key(name, parse_public_key_blob(public_key_blob), _COSIGNATURE_KEY_TYPE)
    except ReceiptsError as exc:
        raise InputError("cannot make a witness key: %s" % exc) from None


def log_vkeys(vkeys: Sequence[str]) -> dict[str, list[bytes]]:
    """Each log's origin and Ed25519 keys, from their verifier keys (type 0x01).

    Raises:
        InputError: one is not a verifier key, or is a witness's (type 0x04).
    """
    logs: dict[str, list[bytes]] = {}
    for text in vkeys:
        try:
            name, key, sig_type = parse_verifier_key(text)
        except ReceiptsError as exc:
            raise InputError("--log %s: %s" % (text[:60], exc)) from None
        if sig_type != _LOG_KEY_TYPE:
            raise InputError("--log %s: a log's key is of type 0x01 (a witness's is 0x04)" % name)
        logs.setdefault(name, []).append(key)
    return logs


class WitnessService:
    """A witness: its note name and key, the logs it follows, and its state file.

    Args:
        name: the witness's note key name (its cosignature lines carry it).
        signer: its Ed25519 key.
        logs: each log's origin and its trusted Ed25519 keys.
        state: the JSON file of each origin's latest cosigned size and root.

    Raises:
        InputError: the state file cannot be read as a witness's state.
    """

    def __init__(self, name: str, signer: Signer, logs: Mapping[str, Sequence[bytes]], state: Path) -> None:
        self.name, self.signer, self.logs, self.state = name, signer, logs, state
        self._lock = threading.Lock()
        read_witness_state(state)  # a state it cannot read stops it now, not on a request

    def add_checkpoint(self, body: bytes) -> tuple[int, str, bytes]:
        """One `add-checkpoint` request: (status, content type, body) as the spec says."""
        try:
            request = parse_add_checkpoint(body)
        except ReceiptsError as exc:
            return 400, "text/plain; charset=utf-8", ("%s\n" % exc).encode()
        text, origin = request.signed.text, request.checkpoint.origin
        with self._held() as held:
            answer = witness_decision(request, self.logs, held)
            if answer.status == 409 and answer.size is not None:
                return 409, SIZE_MEDIA_TYPE, b"%d\n" % answer.size
            if answer.keep is None:
                return answer.status, "text/plain; charset=utf-8", ("%s\n" % answer.reason).encode()
            line = cosign_note(text, self.name, self.signer, int(time.time()))
            held[origin] = answer.keep  # written back before the answer leaves (`_held`)
        return 200, "text/plain; charset=utf-8", line.line().encode()

    @contextlib.contextmanager
    def _held(self) -> Iterator[dict[str, tuple[int, bytes]]]:
        """The state, read and written back (if changed) under the lock: the check of the
        old size and the keeping of the new one are one step.
        """
        self.state.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.state.with_name(self.state.name + ".lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            held = read_witness_state(self.state)
            before = dict(held)
            yield held
            if held != before:
                write_witness_state(self.state, held)


def serve_witness(service: WitnessService, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Answer `POST /add-checkpoint` until interrupted; ``announce`` is told the address
    once the socket listens (port 0 picks a free one).

    Raises:
        InputError: the address cannot be bound.
    """

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            said = self.headers.get("Content-Length") or "0"
            length = int(said) if said.isdigit() else -1
            if self.path.rstrip("/").rsplit("/", 1)[-1] != "add-checkpoint":
                self.answer(404, "text/plain; charset=utf-8", b"not found\n")
            elif not 0 < length <= MAX_BODY:
                self.answer(400, "text/plain; charset=utf-8", b"a request body of 1 to 65536 bytes\n")
            else:
                self.answer(*service.add_checkpoint(self.rfile.read(length)))

    listen_and_serve(BoundedThreadingServer, Handler, host, port, announce)


@dataclass(frozen=True, slots=True)
class Requested:
    """One witness's outcome: its policy name, and "cosigned" or why not."""

    witness: str
    outcome: str


def request_cosignatures(ledger: Ledger, policy: TlogPolicy) -> list[Requested]:
    """Ask each witness that has a URL to cosign the newest checkpoint; store each valid
    cosignature on it (`witness add`'s rule: only lines that verify).

    Args:
        ledger: the log.
        policy: the witnesses' names, keys and submission prefixes (those without one
            are not asked).

    Returns:
        One outcome per witness asked.

    Raises:
        InputError: the ledger has no checkpoint.
    """
    stored = ledger.checkpoints()
    if not stored:
        raise InputError("this ledger has no checkpoint yet: run `ledger checkpoint --key NAME`")
    size, note = stored[-1]
    out = []
    for name, url in sorted(policy.witness_urls.items()):
        key_name, key = policy.witnesses[name]
        witness = WitnessKey(key_name, key)
        held = max((s for s, n in stored if cosignature_time(n, key_name, key) is not None), default=0)
        outcome = _ask(ledger, url, held, size, note.encode())
        if outcome.startswith("\u2014 "):
            add_cosignatures(ledger, note.encode() + outcome, (witness,))
            outcome = "cosigned"
        out.append(Requested(name, outcome))
    return out


def _ask(ledger: Ledger, url: str, old: int, size: int, note: str) -> str:
    """POST the checkpoint; on 409 once more from the size the witness names. The
    cosignature lines, or what went wrong in one line.
    """
    for _ in range(2):
        proof = consistency_proof(ledger, old, size) if 0 < old < size else []
        request = urllib.request.Request(
            url.rstrip("/") + "/add-checkpoint", data=add_checkpoint_body(old, proof, note), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return str(answer.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            said = exc.read().decode("utf-8", "replace").strip()
            if exc.code == 409 and exc.headers.get("Content-Type", "").startswith(SIZE_MEDIA_TYPE) and said.isdigit():
                if int(said) > size:
                    return "refused: the witness holds size %s, beyond this checkpoint (%d)" % (said, size)
                if int(said) == old:
                    return "refused: the witness holds another root at size %d (a fork)" % old
                old = int(said)
                continue
            return "refused (HTTP %d): %s" % (exc.code, said[:200])
        except (urllib.error.URLError, OSError) as exc:
            return "unreachable: %s" % getattr(exc, "reason", exc)
    return "refused: the witness's size changed twice while asking"
