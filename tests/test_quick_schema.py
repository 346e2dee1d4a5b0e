"""The tool-argument schema check the hooks run without importing `jsonschema` gives the
same answer as `jsonschema` on every schema it judges, and judges only what it knows."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from receipts._quickschema import quick_errors

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False) | st.text("ab -rf", max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["command", "path", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)
TYPES = st.sampled_from(["string", "object", "array", "integer", "number", "boolean", "null"])
LEAF: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {},
    optional={
        "type": TYPES | st.lists(TYPES, min_size=1, max_size=2, unique=True),
        "pattern": st.sampled_from(["rm -rf", "^a", "b$", "^[ab]+$"]),
        "minLength": st.integers(0, 3),
        "maxLength": st.integers(0, 3),
        "minimum": st.integers(-2, 2),
        "maximum": st.integers(-2, 2),
        "enum": st.lists(
            st.none() | st.booleans() | st.integers(-2, 2) | st.text("ab", max_size=2), min_size=1, max_size=3
        ),
        "minItems": st.integers(0, 2),
        "maxItems": st.integers(0, 2),
    },
)
SCHEMA = st.recursive(
    LEAF,
    lambda inner: (
        st.fixed_dictionaries(
            {"type": st.just("object")},
            optional={
                "required": st.lists(st.sampled_from(["command", "path"]), unique=True, max_size=2),
                "properties": st.dictionaries(st.sampled_from(["command", "path"]), inner, max_size=2),
                "additionalProperties": st.booleans() | inner,
                "not": inner,
            },
        )
        | st.fixed_dictionaries({"type": st.just("array")}, optional={"items": inner})
    ),
    max_leaves=4,
)


@settings(max_examples=400, deadline=None)
@given(SCHEMA, JSON)
def test_the_quick_check_agrees_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    quick = quick_errors(schema, value)
    assert quick is not None  # every keyword generated here is one it judges
    full = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    assert (not quick) == (not full), (schema, value, quick, [e.message for e in full])


def test_a_keyword_it_does_not_judge_goes_to_jsonschema() -> None:
    assert quick_errors({"type": "object", "anyOf": [{"required": ["a"]}]}, {}) is None
    assert quick_errors({"properties": {"a": {"$ref": "#"}}}, {}) is None
    assert quick_errors({"type": "object", "required": ["command"]}, {}) == ["'command' is a required property"]


def test_a_malformed_keyword_is_left_to_jsonschema_not_guessed() -> None:
    for schema in (
        {"required": "command"},
        {"enum": 5},
        {"pattern": "([unclosed"},
        {"minLength": "3"},
        {"type": 7},
        {"maximum": True},
    ):
        assert quick_errors(schema, {"command": "x"}) is None, schema
