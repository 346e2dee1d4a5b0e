"""Hostile bytes into every decoder of issue 2: a valid object or the package's own
FormatError, never another exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import receipts as r
from verify import CannotVerify, parse_allowed_signers

KA = json.loads((Path(__file__).parent / "vectors" / "known_answers.json").read_text())
VALID = {
    "tier_record": bytes.fromhex(KA["tier_record"]["cbor"]),
    "receipt": bytes.fromhex(KA["receipt"]["cbor"]),
    "entry": bytes.fromhex(KA["entry"]["cbor"]),
    "sshsig": bytes.fromhex(KA["entry"]["sshsig"]),
}
DECODERS: dict[str, Callable[[bytes], object]] = {
    "tier_record": r.decode_tier_record,
    "receipt": r.decode_receipt,
    "entry": r.decode_entry,
    "sshsig": r.sshsig_public_key,
}
for kind in r.EntryKind:
    DECODERS["body:" + kind.value] = lambda data, kind=kind: r.decode_body(kind, data)


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """Valid bytes with a few bytes flipped, cut or inserted: close enough to get deep."""
    edits = st.lists(st.tuples(st.integers(0, len(valid)), st.integers(0, 255), st.sampled_from(["set", "cut", "add"])), min_size=1, max_size=4)

    def apply(ops: list[tuple[int, int, str]]) -> bytes:
        data = bytearray(valid)
        for pos, val, op in ops:
            pos = min(pos, len(data))
            if op == "set" and pos < len(data):
                data[pos] = val
            elif op == "cut":
                del data[pos:]
            else:
                data.insert(pos, val)
        return bytes(data)

    return edits.map(apply)


@pytest.mark.parametrize("name", sorted(DECODERS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_decoders_yield_object_or_format_error(name: str, data: st.DataObject) -> None:
    base = VALID.get(name.removeprefix("body:"), VALID["tier_record"])
    blob = data.draw(st.binary(max_size=200) | mutated(base))
    try:
        DECODERS[name](blob)
    except r.FormatError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_allowed_signers_parser_yields_ids_or_cannot_verify(text: str) -> None:
    try:
        ids = parse_allowed_signers(text)
    except CannotVerify:
        return
    assert all(i.startswith("SHA256:") for i in ids)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_public_key_lines_and_digests_parse_or_format_error(text: str) -> None:
    for parse in (r.parse_public_key_line, r.Digest.parse, r.dearmor):
        try:
            parse(text)
        except r.FormatError:
            pass
