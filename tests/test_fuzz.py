"""Hostile bytes into every decoder: a valid object or the package's own
FormatError, never another exception."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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


def _body_decoder(kind: r.EntryKind) -> Callable[[bytes], object]:
    return lambda data: r.decode_body(kind, data)


for kind in r.EntryKind:
    DECODERS["body:" + kind.value] = _body_decoder(kind)


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """Valid bytes with a few bytes flipped, cut or inserted: close enough to get deep."""
    edits = st.lists(
        st.tuples(st.integers(0, len(valid)), st.integers(0, 255), st.sampled_from(["set", "cut", "add"])),
        min_size=1,
        max_size=4,
    )

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


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=400)
    | st.sampled_from(
        [
            "receipt-ledger/x\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n\n\u2014 receipt-ledger/x AAAAAAAA\n",
            "c2sp.org/tlog-proof@v1\nindex 3\nAAAA\n\nx\n",
        ]
    )
)
def test_notes_checkpoints_and_proofs_parse_or_format_error(text: str) -> None:

    for parse in (r.parse_note, r.parse_checkpoint, r.parse_tlog_proof, r.parse_consistency_proof):
        try:
            parse(text)
        except r.FormatError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600) | st.text(max_size=600).map(lambda t: ('version = 1\ntask = "T-1"\n' + t).encode()))
def test_contracts_parse_or_contract_error(data: bytes) -> None:
    try:
        r.parse_contract(data, "fuzz.toml")
    except r.FormatError:
        pass


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.binary(max_size=80)
        | st.dictionaries(
            st.sampled_from(["tool", "arguments", "x"]), st.text(max_size=10) | st.integers(), max_size=3
        ).map(lambda d: json.dumps(d).encode()),
        max_size=6,
    )
)
def test_trace_decisions_never_raise(lines: list[bytes]) -> None:
    from receipts import decide_tool_calls

    policy = r.ToolPolicy(allowed=("calc",), denied=("shell",), max_steps=3, schemas=(("calc", (("type", "object"),)),))
    decisions = decide_tool_calls(policy, lines)
    assert len(decisions) == len(lines) and all(
        d.decision in ("approved", "rejected", "requires_human") for d in decisions
    )


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=2000))
def test_bundles_open_or_cannot_verify(data: bytes) -> None:
    import tempfile

    from verify import BundleSource, CannotVerify

    with tempfile.NamedTemporaryFile(suffix=".zip") as fh:
        fh.write(data)
        fh.flush()
        try:
            BundleSource(Path(fh.name)).close()
        except CannotVerify:
            pass


_BUNDLE: dict[str, object] = {}


def _real_bundle() -> tuple[bytes, str]:
    if not _BUNDLE:
        import tempfile

        from conftest import SIGNERS, build_sample
        from ledger import Ledger, export_bundle

        tmp = Path(tempfile.mkdtemp(prefix="fuzz-bundle-"))
        s = build_sample(tmp)
        ledger = Ledger.open(s.root)
        ledger.checkpoint(SIGNERS["sealer"])
        export_bundle(ledger, r.Digest.parse(s.receipt), tmp / "b.zip")
        ledger.close()
        _BUNDLE.update(data=(tmp / "b.zip").read_bytes(), receipt=s.receipt)
    return _BUNDLE["data"], _BUNDLE["receipt"]  # type: ignore[return-value]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_mutated_real_bundles_verify_reject_or_refuse(data: st.DataObject) -> None:
    import tempfile

    from verify import BundleSource, CannotVerify, UnsafeTrustOnFirstUse, verify_receipt

    valid, receipt = _real_bundle()
    blob = data.draw(mutated(valid))
    with tempfile.NamedTemporaryFile(suffix=".zip") as fh:
        fh.write(blob)
        fh.flush()
        try:
            source = BundleSource(Path(fh.name))
            verify_receipt(source, receipt, UnsafeTrustOnFirstUse())
            source.close()
        except (CannotVerify, r.FormatError):
            pass
