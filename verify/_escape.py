"""Text from the ledger, made inert for where it is shown: a spreadsheet cell, Markdown
(which GitHub also reads as HTML), or a terminal. Anything a contract, a key holder or a
check's output wrote may reach these outputs, so every writer of them uses these three
functions and nothing else (OWASP: CSV injection, output encoding).
"""

from __future__ import annotations

__all__ = ["csv_cell", "markdown_text", "terminal_text"]

# A spreadsheet reads a cell starting with one of these as a formula (or a DDE call).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

# Markdown punctuation that can open a link or image (both need a bracket), emphasis, a
# code span, a table cell, a heading or strike-through; CommonMark lets any of them be
# escaped with a backslash.
_MARKDOWN_PUNCTUATION = frozenset("\\`*_[]|#~")


# HTML's three special characters in text (`html.escape`'s entities; that module loads
# the HTML5 entity table, which no command that prints a receipt needs).
_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0


def csv_cell(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates: a leading ``'`` before a formula start.

    Args:
        text: the cell's text.

    Returns:
        The text, prefixed with ``'`` when it starts with ``=``, ``+``, ``-``, ``@``, tab or CR.
    """
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def markdown_text(text: str) -> str:
    r"""``text`` as literal Markdown text on one line: HTML's special characters as entities,
    Markdown's punctuation backslash-escaped, line breaks as spaces, other control
    characters as visible ``\xNN``.

    Args:
        text: text from the ledger.

    Returns:
        Markdown that renders exactly as ``text`` reads, with no markup, link or HTML.
    """
    out = []
    for ch in text:
        if ch in "&<>":
            out.append(_ENTITY[ch])
        elif ch in _MARKDOWN_PUNCTUATION:
            out.append("\\" + ch)
        elif ch in "\r\n":
            out.append(" ")
        elif _control(ch):
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def terminal_text(text: str) -> str:
    r"""``text`` with every control character but newline and tab shown as ``\xNN``, so that
    no escape sequence from the ledger reaches a terminal (colours, cursor moves, titles,
    a carriage return that overwrites what a reviewer is shown).

    Args:
        text: text for a terminal.

    Returns:
        The text with C0 (except LF and TAB), DEL and C1 characters escaped.
    """
    if not any(_control(ch) and ch not in "\n\t" for ch in text):
        return text
    return "".join("\\x%02x" % ord(ch) if _control(ch) and ch not in "\n\t" else ch for ch in text)
