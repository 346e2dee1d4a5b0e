"""Trusted time for checkpoints (issue 16): an RFC 3161 time-stamp over a checkpoint's
signed text, checked offline against the authority certificates the auditor pinned
(`rfc3161-client`, which sigstore-python uses for the same job). The attested time is
the authority's; every other time in the ledger is its signer's clock.
"""

from __future__ import annotations

from ._errors import CannotVerify
from ._policy import Transparency
from ._result import Defect

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
    tokens: list[tuple[str, bytes]], note_text: str, size: int, policy: Transparency, why: str = "none was found"
) -> tuple[list[Defect], list[str], str | None]:
    """For the checkpoint of ``size`` whose signed text is ``note_text``: with pinned
    authority certificates, the first token that verifies (its line), or a defect;
    without, a warning that the tokens were not checked. Tokens are self-authenticating:
    who carried one does not matter, only that the pinned authority signed this text.
    """
    text = note_text.encode("utf-8")
    if not policy.tsa_roots:
        said = "the checkpoint at size %d carries %d RFC 3161 time-stamp(s): not checked (pin the authority with --tsa-cert)"
        return [], [said % (size, len(tokens))] if tokens else [], None
    import rfc3161_client
    from cryptography import x509

    roots = [x509.load_pem_x509_certificate(pem) for pem in policy.tsa_roots]
    for label, token in tokens:
        try:
            response = rfc3161_client.decode_timestamp_response(token)
            rfc3161_client.VerifierBuilder(roots=list(roots)).build().verify_message(response, text)
        except (ValueError, rfc3161_client.VerificationError) as exc:
            why = "the time-stamp (%s) does not verify: %s" % (label, exc)
            continue
        when = response.tst_info.gen_time.strftime("%Y-%m-%dT%H:%M:%SZ")
        return [], [], "time-stamped at %s by a pinned authority (%s)" % (when, label)
    message = "the checkpoint at size %d has no time-stamp that verifies against the pinned authority: %s"
    return [Defect("timestamp", message % (size, why))], [], None
