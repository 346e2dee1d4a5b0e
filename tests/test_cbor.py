"""The canonical CBOR profile: RFC 8949 §4.2.1 order, and strict decoding."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import receipts as r

text_keys = st.dictionaries(st.text(max_size=30), st.integers(min_value=-(2**64), max_value=2**64 - 1), max_size=20)


@given(text_keys)
def test_cbor2_canonical_order_is_rfc8949_bytewise_order_for_text_keys(d: dict[str, int]) -> None:
    encoded = r.canonical_dumps(d)
    decoded_order = list(cbor2.loads(encoded).keys())
    rfc_order = sorted(d, key=lambda k: cbor2.dumps(k))
    assert decoded_order == rfc_order


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=20,
)


@given(values)
def test_round_trip_and_reencoding_are_identical(v: object) -> None:
    data = r.canonical_dumps(v)
    assert r.canonical_dumps(r.canonical_loads(data)) == data


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_any_bytes_decode_to_a_value_or_format_error(data: bytes) -> None:
    try:
        v = r.canonical_loads(data)
    except r.FormatError:
        return
    assert r.canonical_dumps(v) == data


@pytest.mark.parametrize(
    "name,hexdata",
    [
        ("trailing-byte", "a1616101" + "00"),
        ("duplicate-key", "a2616101616102"),
        ("unsorted-keys", "a2616201616101"),
        ("length-first-violated", "a2626161016162" + "02"),
        ("non-shortest-int", "a161611801"),
        ("indefinite-array", "9f01ff"),
        ("float", "f93c00"),
        ("tag", "c11a514b67b0"),
        ("integer-key", "a10101"),
        ("undefined", "f7"),
        ("empty", ""),
        ("bignum", "c249010000000000000000"),
    ],
)
def test_non_canonical_or_disallowed_input_is_rejected(name: str, hexdata: str) -> None:
    with pytest.raises(r.FormatError):
        r.canonical_loads(bytes.fromhex(hexdata))


def test_encoder_refuses_floats_and_non_text_keys() -> None:
    with pytest.raises(r.FormatError):
        r.canonical_dumps({"x": 1.5})
    with pytest.raises(r.FormatError):
        r.canonical_dumps({1: "x"})


@pytest.mark.parametrize("wrap", [lambda v: [v], lambda v: {"k": v}], ids=["array", "map"])
@pytest.mark.parametrize("leaf", [1, "s", b"b", None, True])
def test_nesting_limit_is_sixteen_containers_deep_for_every_leaf(wrap: object, leaf: object) -> None:
    def nest(levels: int) -> object:
        value = leaf
        for _ in range(levels):
            value = wrap(value)  # type: ignore[operator]
        return value

    data = r.canonical_dumps(nest(16))
    assert r.canonical_loads(data) == nest(16)
    with pytest.raises(r.FormatError, match="deeper"):
        r.canonical_dumps(nest(17))
    with pytest.raises(r.FormatError, match="deeper"):
        r.canonical_loads(
            bytes([0x81 if isinstance(nest(1), list) else 0xA1])
            + (b"" if isinstance(nest(1), list) else b"\x61k")
            + data
        )
