"""A JSON Schema check for the small schemas contracts give tool arguments, without
importing `jsonschema` (whose import alone costs an agent hook, which runs on every tool
call, several times Python's own start-up).

It covers the keywords such schemas use: ``type``, ``required``, ``properties``,
``additionalProperties``, ``items``, ``enum``, ``const``, ``not``, ``pattern``,
``minLength``/``maxLength``, ``minItems``/``maxItems`` and ``minimum``/``maximum``. A schema
with any other keyword is not judged here (`quick_errors` returns None) and the caller uses
`jsonschema` itself; tests hold the two to the same answers.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["quick_errors"]

_KNOWN = frozenset(
    {
        "type",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "not",
        "pattern",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "description",
        "title",
    }
)


def _well_formed(schema: dict[str, Any]) -> bool:
    """Whether each keyword's value has the shape the keyword needs (anything else goes to
    `jsonschema`, which says what it makes of it).
    """
    kinds = schema.get("type", "string")
    if not (isinstance(kinds, str) or (isinstance(kinds, list) and all(isinstance(k, str) for k in kinds))):
        return False
    if not (
        isinstance(schema.get("required", []), list) and all(isinstance(n, str) for n in schema.get("required", []))
    ):
        return False
    if not isinstance(schema.get("enum", []), list) or not isinstance(schema.get("pattern", ""), str):
        return False
    counts = ("minLength", "maxLength", "minItems", "maxItems")
    if any(not isinstance(schema.get(k, 0), int) or isinstance(schema.get(k), bool) for k in counts):
        return False
    bounds = ("minimum", "maximum")
    if any(not isinstance(schema.get(k, 0), int | float) or isinstance(schema.get(k), bool) for k in bounds):
        return False
    try:
        re.compile(schema.get("pattern", ""))
    except re.error:
        return False
    return True


def _covered(schema: Any) -> bool:
    """Whether every keyword of ``schema`` and its subschemas is one this module judges,
    each with a value of the shape it needs.
    """
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or set(schema) - _KNOWN or not _well_formed(schema):
        return False
    subs = [*schema.get("properties", {}).values()] if isinstance(schema.get("properties", {}), dict) else [None]
    for key in ("additionalProperties", "items", "not"):
        if key in schema:
            subs.append(schema[key])
    return all(_covered(s) for s in subs)


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return name == "number" or (name == "integer" and float(value).is_integer())


def _errors(schema: Any, value: Any) -> list[str]:
    if schema is True:
        return []
    if schema is False:
        return ["%r is not allowed" % (value,)]
    found = []
    kinds = schema.get("type")
    if kinds is not None and not any(_is_type(value, k) for k in ([kinds] if isinstance(kinds, str) else kinds)):
        found.append(
            "%r is not of type %s" % (value, ", ".join(repr(k) for k in ([kinds] if isinstance(kinds, str) else kinds)))
        )
    if "enum" in schema and not any(_equal(value, v) for v in schema["enum"]):
        found.append("%r is not one of %r" % (value, schema["enum"]))
    if "const" in schema and not _equal(value, schema["const"]):
        found.append("%r was expected" % (schema["const"],))
    if "not" in schema and not _errors(schema["not"], value):
        found.append("%r should not be valid under %r" % (value, schema["not"]))
    if isinstance(value, str):
        found += _string_errors(schema, value)
    if isinstance(value, dict):
        found += _object_errors(schema, value)
    if isinstance(value, list):
        found += _array_errors(schema, value)
    if _is_type(value, "number"):
        found += _number_errors(schema, value)
    return found


def _number_errors(schema: dict[str, Any], value: float) -> list[str]:
    found = []
    if "minimum" in schema and value < schema["minimum"]:
        found.append("%r is less than the minimum of %r" % (value, schema["minimum"]))
    if "maximum" in schema and value > schema["maximum"]:
        found.append("%r is greater than the maximum of %r" % (value, schema["maximum"]))
    return found


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, and 1 equals 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _string_errors(schema: dict[str, Any], value: str) -> list[str]:
    found = []
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        found.append("%r does not match %r" % (value, schema["pattern"]))
    if "minLength" in schema and len(value) < schema["minLength"]:
        found.append("%r is too short" % (value,))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        found.append("%r is too long" % (value,))
    return found


def _object_errors(schema: dict[str, Any], value: dict[str, Any]) -> list[str]:
    found = ["%r is a required property" % name for name in schema.get("required", []) if name not in value]
    properties = schema.get("properties", {})
    for name, item in value.items():
        if name in properties:
            found += _errors(properties[name], item)
        elif "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            if extra is False:
                found.append("Additional properties are not allowed (%r was unexpected)" % name)
            else:
                found += _errors(extra, item)
    return found


def _array_errors(schema: dict[str, Any], value: list[Any]) -> list[str]:
    found = []
    if "items" in schema:
        for item in value:
            found += _errors(schema["items"], item)
    if "minItems" in schema and len(value) < schema["minItems"]:
        found.append("%r should be non-empty" % (value,) if schema["minItems"] == 1 else "%r is too short" % (value,))
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append("%r is too long" % (value,))
    return found


def quick_errors(schema: Any, value: Any) -> list[str] | None:
    """The ways ``value`` fails ``schema``, or None when the schema uses a keyword this
    module does not judge (then ask `jsonschema`).
    """
    if not _covered(schema):
        return None
    return _errors(schema, value)
