"""Files replaced all at once: the one atomic writer every part of `ledger` uses; and the
one bounded reader of the files a command is given (`read_bounded`).

A crash at any moment leaves the old file or the new one, never a mixture: the bytes go
to a temporary file in the same directory, are flushed to disk, renamed over the target,
and the directory itself is flushed so that the rename survives a power cut. Light on
imports: the agent's hooks write their state through it on every tool call.
"""

from __future__ import annotations

import os
import select
import stat
import tempfile
from pathlib import Path

from ._errors import InputError

__all__ = ["fsync_dir", "write_atomic", "write_text_atomic", "create_once", "read_bounded", "MAX_INPUT"]


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename into it) to disk.

    Raises:
        OSError: the directory cannot be opened or flushed.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _staged(path: Path, data: bytes, mode: int | None, durable: bool) -> Path:
    """``data`` in a new temporary file beside ``path`` (flushed to disk if ``durable``),
    ready to be renamed or linked into place; removed again if writing it fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + "-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            if durable:
                os.fsync(out.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_atomic(path: Path, data: bytes, mode: int | None = None, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` all at once, creating its directory if needed.

    Args:
        path: the file to replace or create.
        data: its new contents.
        mode: the permission bits to give it (default: the temporary file's, 0600).
        durable: flush it to the disk before returning (False: a power loss may undo the
            replacement, or leave the file empty; a reader must treat that as no file).

    Raises:
        OSError: it could not be written; the old file, if any, is untouched.
    """
    tmp = _staged(path, data, mode, durable)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def create_once(path: Path, data: bytes, mode: int | None = None) -> bool:
    """Create ``path`` holding ``data`` all at once unless it exists: never replaces, so a
    file a racing writer created first stays as that writer made it.

    Args:
        path: the file to create.
        data: its contents.
        mode: the permission bits to give it (default: the temporary file's, 0600).

    Returns:
        True if this call created it, False if it was there already.

    Raises:
        OSError: it could not be written.
    """
    tmp = _staged(path, data, mode, durable=True)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def write_text_atomic(path: Path, text: str) -> None:
    """`write_atomic` for UTF-8 text, a failure reported as the caller's bad path.

    Raises:
        InputError: it could not be written (one line, naming the path).
    """
    try:
        write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise InputError("cannot write %s: %s" % (path, exc.strerror or exc)) from None


MAX_INPUT = 64 << 20


def _read_fifo(path: Path, what: str, limit: int) -> bytes:
    """A FIFO's bytes once a program writes; refused after ``LEDGER_FIFO_WAIT_S`` s (default 10), never hung."""
    said = os.environ.get("LEDGER_FIFO_WAIT_S", "10")
    wait = float(said) if said.isascii() and said.replace(".", "", 1).isdigit() else 0.0
    if not 0 < wait <= 3600:
        raise InputError("LEDGER_FIFO_WAIT_S is a number of seconds, more than 0 and at most 3600: %r" % said[:40])
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening never blocks this way
    with os.fdopen(fd, "rb") as fh:
        if not select.select([fd], [], [], wait)[0]:
            raise InputError("%s %s is a FIFO that no program wrote to within %g s" % (what, path, wait))
        os.set_blocking(fd, True)
        return fh.read(limit + 1)


def read_bounded(path: Path, what: str, limit: int = MAX_INPUT) -> bytes:
    """The bytes of ``path``, read no further than ``limit`` + 1 bytes (so /dev/zero or a
    FIFO that never ends cannot make a command read forever).

    Args:
        path: the file.
        what: what it is, for the message.
        limit: the largest size accepted.

    Returns:
        Its bytes.

    Raises:
        InputError: it cannot be read, or holds more than ``limit`` bytes.
    """
    try:
        if stat.S_ISFIFO(path.stat().st_mode):
            data = _read_fifo(path, what, limit)
        else:
            with path.open("rb") as fh:
                data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None
    if len(data) > limit:
        raise InputError("%s %s is larger than %d bytes" % (what, path, limit))
    return data
