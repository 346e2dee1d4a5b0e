"""The parts of a contract that an agent's hook reads on every tool call: the field
reader that names the file, line and field of every error, and the tool policy with its
table's parser. Kept apart from `_contract` so that reading them loads no more than this
(`_contract` builds the whole contract from the same functions).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from ._errors import FormatError

__all__ = ["ContractError", "ToolPolicy", "thaw", "tool_rules"]


class ContractError(FormatError):
    """A contract that does not parse; the message names the file, the line and the field."""


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """What an agent may do while working on the task (checked against its trace)."""

    allowed: tuple[str, ...] = ()  # empty: any tool not denied
    denied: tuple[str, ...] = ()
    requires_human: tuple[str, ...] = ()
    max_steps: int | None = None
    schemas: tuple[tuple[str, Any], ...] = ()  # (tool, JSON Schema) pairs, frozen


def thaw(value: Any) -> Any:
    """The inverse of `_freeze`: a frozen contract value back as JSON-like dicts and lists."""
    if (
        isinstance(value, tuple)
        and value
        and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value)
    ):
        return {k: thaw(v) for k, v in value}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


class _Reader:
    """Field access that reports the file, the line and the dotted field on error."""

    def __init__(self, text: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source

    def line_of(self, field: str, table: str | None = None, index: int | None = None) -> int:
        start = 0
        if table is not None:
            header = re.compile(
                r"^\s*\[\[\s*%s\s*\]\]" % re.escape(table)
                if index is not None
                else r"^\s*\[\s*%s\s*\]" % re.escape(table)
            )
            seen = -1
            for n, line in enumerate(self.lines):
                if header.match(line):
                    seen += 1
                    if index is None or seen == index:
                        start = n
                        break
        key = re.compile(r"^\s*%s\s*=" % re.escape(field))
        for n in range(start, len(self.lines)):
            if key.match(self.lines[n]):
                return n + 1
        return start + 1 if table is not None else 1

    def fail(self, message: str, field: str, table: str | None = None, index: int | None = None) -> ContractError:
        where = (
            field
            if table is None
            else ("%s[%d].%s" % (table, index, field) if index is not None else "%s.%s" % (table, field))
        )
        return ContractError("%s:%d: %s: %s" % (self.source, self.line_of(field, table, index), where, message))


def _get(
    r: _Reader,
    table: dict[str, Any],
    field: str,
    kind: type | tuple[type, ...],
    default: Any = ...,
    *,
    tname: str | None = None,
    index: int | None = None,
) -> Any:
    if field not in table:
        if default is ...:
            raise r.fail("is required", field, tname, index)
        return default
    value = table[field]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise r.fail("has the wrong type", field, tname, index)
    if not isinstance(value, kind):
        raise r.fail("has the wrong type", field, tname, index)
    return value


def _strings(
    r: _Reader, table: dict[str, Any], field: str, tname: str | None = None, index: int | None = None
) -> tuple[str, ...]:
    value = _get(r, table, field, list, [], tname=tname, index=index)
    if not all(isinstance(v, str) for v in value):
        raise r.fail("must be a list of strings", field, tname, index)
    return tuple(value)


def _tools(r: _Reader, table: dict[str, Any]) -> ToolPolicy:
    for field in sorted(table.keys() - {"allowed", "denied", "requires_human", "max_steps", "schemas"}):
        raise r.fail("is not a tool policy setting", field, "tools")
    schemas = _get(r, table, "schemas", dict, {}, tname="tools")
    for tool, schema in schemas.items():
        if not isinstance(schema, dict):
            raise r.fail("must be a table holding a JSON Schema", tool, "tools.schemas")
    max_steps = _get(r, table, "max_steps", int, None, tname="tools")
    if max_steps is not None and max_steps < 1:
        raise r.fail("must be at least 1", "max_steps", "tools")
    return ToolPolicy(
        allowed=_strings(r, table, "allowed", "tools"),
        denied=_strings(r, table, "denied", "tools"),
        requires_human=_strings(r, table, "requires_human", "tools"),
        max_steps=max_steps,
        schemas=tuple(sorted((t, _freeze(s)) for t, s in schemas.items())),
    )


def _document(data: bytes, source: str) -> tuple[_Reader, dict[str, Any]]:
    """A contract file's TOML document and a reader for its fields (`ContractError` if it
    is not UTF-8 TOML).
    """
    try:
        text = data.decode("utf-8")
        doc = tomllib.loads(text)
    except UnicodeDecodeError:
        raise ContractError("%s: not UTF-8 text" % source) from None
    except tomllib.TOMLDecodeError as exc:
        raise ContractError("%s: %s" % (source, exc)) from None
    return _Reader(text, source), doc


def tool_rules(data: bytes, source: str = "contract") -> tuple[ToolPolicy, tuple[str, ...], tuple[str, ...]]:
    """A contract's tool policy, protected paths and secret names, read with the parser
    `parse_contract` uses for them (the rest of the contract is not checked here: the
    deterministic tier parses it whole). Raises `ContractError`.
    """
    r, doc = _document(data, source)
    return (
        _tools(r, _get(r, doc, "tools", dict, {})),
        _strings(r, doc, "protected_paths"),
        _strings(r, doc, "secret_env"),
    )
