"""The output escapes (`verify`'s, which its renderings use too), under the names the
writers' modules import; and `comment_text`, for what a GitHub comment shows.
"""

from __future__ import annotations

import re

from verify import csv_cell, markdown_text, terminal_text

__all__ = ["csv_cell", "markdown_text", "terminal_text", "comment_text"]

_JOINER = "\u2060"  # WORD JOINER: invisible, and no mention or autolink spans it
_MENTION = re.compile(r"(?<![\w`])@(?=[A-Za-z0-9])")
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto):|\bwww\.")


def comment_text(text: str) -> str:
    """``text`` as `markdown_text` makes it, and also inert where GitHub goes beyond
    Markdown in a comment: an ``@name`` mentions (and notifies) nobody and an address is
    not turned into a link, so what an agent wrote in a check's reason, a goal or a note
    pings no one and links nowhere. It reads the same: only an invisible word joiner is added.

    Args:
        text: text from the ledger.
    """
    out = _MENTION.sub("@" + _JOINER, markdown_text(text))
    return _AUTOLINK.sub(lambda m: m.group(0)[:-1] + _JOINER + m.group(0)[-1], out)
