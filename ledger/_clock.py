"""The one place the ledger reads the wall clock, so that tests and reproducible runs
can move time instead of waiting for it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["now", "frozen_clock"]

_source: Callable[[], float] = time.time


def now() -> int:
    """Seconds since the epoch, as every entry, record and receipt date is written."""
    return int(_source())


@contextmanager
def frozen_clock(at: float) -> Iterator[None]:
    """Make `now` return ``at`` inside the block (restored on exit, even on error)."""
    global _source
    saved = _source
    _source = lambda: at  # noqa: E731 - a one-line clock
    try:
        yield
    finally:
        _source = saved
