"""Time: the one place the ledger reads the wall clock, so that tests and reproducible runs
can move time instead of waiting for it, and the one reading of a moment a user types.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._errors import InputError

__all__ = ["now", "frozen_clock", "parse_when", "spreadsheet_time"]

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


def period(from_text: str | None, to_text: str | None) -> tuple[int, int]:
    """A report's period from --from and --to (a day ends at its last second).

    Raises:
        InputError: either is missing or unreadable, or the period ends before it starts.
    """
    if from_text is None or to_text is None:
        raise InputError("the population of changes needs --from and --to (and HASH --html is one receipt's page)")
    start, end = parse_when(from_text, "--from"), parse_when(to_text, "--to", end_of_day=True)
    if end <= start:
        raise InputError("--to is before --from")
    return start, end


def parse_when(text: str, option: str, end_of_day: bool = False) -> int:
    """A moment given on the command line, as Unix seconds.

    Args:
        text: a UTC date (``YYYY-MM-DD``) or an ISO 8601 date-time (UTC if it names no zone).
        option: the option it came from, for the error.
        end_of_day: a date means the end of that day (the next day's start), so that the
            day itself is included: an expiry "through" it, the end of a period.

    Returns:
        Seconds since the epoch.

    Raises:
        InputError: the text is neither.
    """
    try:
        if len(text) == 10:
            day = datetime.datetime.combine(datetime.date.fromisoformat(text), datetime.time(), datetime.UTC)
            return int(day.timestamp()) + (86400 if end_of_day else 0)
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise InputError("%s takes a date (YYYY-MM-DD, UTC) or an ISO 8601 date-time" % option) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp())


def spreadsheet_time(seconds: int | None) -> str:
    """A UTC time as a spreadsheet reads a date: ``2027-01-10T12:00:00``, ISO 8601 with no
    zone letter (the column's name says UTC). LibreOffice's default CSV import reads this
    form as a date, and reads the same time with a trailing ``Z``, or with a space for the
    ``T``, as text.
    """
    if seconds is None:
        return ""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
