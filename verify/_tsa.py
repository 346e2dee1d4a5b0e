"""Trusted time for checkpoints (issue 16): an RFC 3161 time-stamp over a checkpoint's
signed text, checked offline against the authority certificates the auditor pinned
(`rfc3161-client`, which sigstore-python uses for the same job). The attested time is
the authority's; every other time in the ledger is its signer's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from receipts import content_digest

from ._errors import CannotVerify
from ._evidence import read_blob
from ._result import Defect

if TYPE_CHECKING:
    from ._source import LedgerSource
    from ._transparency import Transparency

__all__ = ["tsa_roots", "timestamp_finding"]


def tsa_roots(pem: bytes) -> tuple[bytes, ...]:
    """The PEM certificates in ``pem``, one each (bad input is `CannotVerify`)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CannotVerify("the TSA certificate file holds no PEM certificate: %s" % exc) from None
    return tuple(c.public_bytes(Encoding.PEM) for c in certificates)


def timestamp_finding(
    source: LedgerSource, note_text: str, size: int, policy: Transparency
) -> tuple[list[Defect], list[str], str | None]:
    """For the checkpoint of ``size`` whose signed text is ``note_text``: with pinned
    authority certificates, the first time-stamp that verifies (its line), or a defect;
    without, a warning that time-stamps were not checked."""
    text = note_text.encode("utf-8")
    stamps = [(seq, stamp, signer) for seq, stamp, signer in source.timestamps() if stamp.size == size]
    if not policy.tsa_roots:
        said = [
            "the checkpoint at size %d carries %d RFC 3161 time-stamp(s): not checked (pin the authority with --tsa-cert)"
            % (size, len(stamps))
        ]
        return [], said if stamps else [], None
    import rfc3161_client
    from cryptography import x509

    roots = [x509.load_pem_x509_certificate(pem) for pem in policy.tsa_roots]
    why = "no time-stamp was recorded for it"
    for seq, stamp, signer in stamps:
        if stamp.checkpoint != content_digest(text):
            why = "entry %d stamps other text than this checkpoint's" % seq
            continue
        token = read_blob(source, stamp.token, limit=1 << 20)
        if token is None:
            why = "entry %d's time-stamp token is missing or altered" % seq
            continue
        try:
            response = rfc3161_client.decode_timestamp_response(token)
            rfc3161_client.VerifierBuilder(roots=list(roots)).build().verify_message(response, text)
        except (ValueError, rfc3161_client.VerificationError) as exc:
            why = "entry %d's time-stamp does not verify: %s" % (seq, exc)
            continue
        when = response.tst_info.gen_time.strftime("%Y-%m-%dT%H:%M:%SZ")
        return [], [], "time-stamped at %s by a pinned authority (entry %d, recorded by %s)" % (when, seq, signer)
    return (
        [
            Defect(
                "timestamp",
                "the checkpoint at size %d has no time-stamp that verifies against the pinned authority: %s"
                % (size, why),
            )
        ],
        [],
        None,
    )
