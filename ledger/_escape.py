"""The output escapes (`verify`'s, which its renderings use too), under the names the
writers' modules import.
"""

from __future__ import annotations

from verify import csv_cell, markdown_text, terminal_text

__all__ = ["csv_cell", "markdown_text", "terminal_text"]
