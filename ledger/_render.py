"""Human and JSON renderings shared by the CLI and the demo."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from receipts import Digest, KeySpec, public_key_line
from verify import ChainResult, Result

__all__ = ["jsonable", "dumps", "verify_lines", "chain_lines"]


def jsonable(value: Any) -> Any:
    """Model objects as plain JSON values: digests as blake3:<hex>, keys as OpenSSH lines."""
    if isinstance(value, Digest):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, KeySpec):
        d = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        d["public_key"] = public_key_line(value.public_key)
        d["key_id"] = value.key_id
        return d
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    return value


def dumps(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2, sort_keys=True)


def _yn(value: bool | None) -> str:
    return "unknown" if value is None else str(value).lower()


def verify_lines(result: Result) -> list[str]:
    lines = ["receipt   %s" % result.target]
    if result.task_id is not None:
        lines.append("task      %s" % result.task_id)
        lines.append("candidate %s" % result.candidate)
    lines.append("trust     %s" % result.trust)
    if result.tiers:
        lines.append("")
        lines.append("  %-14s %-4s %-8s %-20s %s" % ("TIER", "REQ", "STATUS", "RECORD", "SIGNER / DETAIL"))
        for t in result.tiers:
            record = (t.record[:19] + "…") if t.record else "-"
            lines.append("  %-14s %-4s %-8s %-20s %s" % (t.tier.value, "yes" if t.required else "no", t.status, record, t.signer or t.detail))
        lines.append("")
        lines.append("merge_eligible: claimed %s, re-derived %s" % (_yn(result.claimed_eligible), _yn(result.derived_eligible)))
        for reason in result.eligibility_reasons:
            lines.append("  not eligible because: %s" % reason)
    if result.checkpoint:
        lines.append("checkpoint %s" % result.checkpoint)
    for w in result.weakenings:
        lines.append("WEAKENING: %s" % w)
    for w in result.warnings:
        lines.append("warning: %s" % w)
    for w in result.waivers:
        lines.append("waiver in force: %s" % w)
    for w in result.stale:
        lines.append("stale (not counted): %s" % w)
    if result.ok:
        lines.append("VERIFIED (%d chain entries checked)" % result.entries_checked)
    else:
        lines.append("REJECTED: %d defect(s)" % len(result.defects))
        for d in result.defects:
            lines.append("  [%s] %s" % (d.code, d.message))
    return lines


def chain_lines(result: ChainResult) -> list[str]:
    lines = ["entries   %d" % result.entries, "head      %s" % (result.head or "-"), "trust     %s" % result.trust]
    if result.ok:
        lines.append("VERIFIED: the whole chain checks out")
    else:
        lines.append("REJECTED: first bad entry is %s; %d defect(s)" % (result.first_bad, len(result.defects)))
        for d in result.defects:
            lines.append("  [%s] %s" % (d.code, d.message))
    return lines
