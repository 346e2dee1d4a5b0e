"""Evidence bundles that verify offline, and the in-toto/DSSE export."""

from __future__ import annotations

import base64
import json
import stat
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, Sample, build_sample, run_cli, sign_decision
from ledger import PAYLOAD_TYPE, Ledger, add_cosignatures, add_key, export_bundle, export_intoto, frozen_clock
from verify import BundleSource, CannotVerify, Result, Transparency, TrustRoot, WitnessKey, verify_receipt

TRUST = TrustRoot(frozenset({ADMIN_ID}), "t")


def exported(tmp: Path, name: str = "bundle.zip") -> tuple[Sample, Path]:
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    out = tmp / name
    export_bundle(ledger, r.Digest.parse(s.receipt), out)
    ledger.close()
    return s, out


def verify_bundle(path: Path, receipt: str) -> Result:
    source = BundleSource(path)
    try:
        return verify_receipt(source, receipt, TRUST, Transparency(require_checkpoint=True))
    finally:
        source.close()


def rezip(
    src: Path,
    dst: Path,
    drop: tuple[str, ...] = (),
    replace: dict[str, bytes] | None = None,
    extra: list[tuple[zipfile.ZipInfo, bytes]] | None = None,
) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            zout.writestr(info, (replace or {}).get(info.filename, zin.read(info)))
        for info, data in extra or []:
            zout.writestr(info, data)
    return dst


def test_a_bundle_verifies_offline_with_public_keys_only(tmp_path: Path) -> None:
    s, bundle = exported(tmp_path)
    result = verify_bundle(bundle, s.receipt)
    assert result.ok and result.derived_eligible, result.defects
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(run_cli("--dir", str(s.root), "keys", "export-allowed-signers").stdout)
    # Offline: no ledger at all, only the bundle and the trust file.
    cli = run_cli(
        "--dir", str(tmp_path / "nowhere"), "verify", "--bundle", str(bundle), "--trust", str(allowed), "--json"
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert json.loads(cli.stdout)["checkpoint"].startswith("size ")
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        html_report = zf.read("report.html").decode()
        names = zf.namelist()
    assert manifest["final_status"] == "verified" and manifest["task"] == "TASK-1"
    assert manifest["input_snapshot"]["commit"] and manifest["checks"][0]["exit_status"] == 0
    assert {"skipped_tiers", "stale_approvals", "flaky_checks", "unverified_assumptions"} <= set(manifest["unresolved"])
    assert "deterministic" in html_report and "http" not in html_report.lower().replace("https://", "")
    assert "src=" not in html_report and "<link" not in html_report
    assert names == sorted(names)


def test_the_same_receipt_exports_to_the_same_bytes(tmp_path: Path) -> None:
    s, first = exported(tmp_path)
    ledger = Ledger.open(s.root)
    second = tmp_path / "again.zip"
    with frozen_clock(time.time() + 86400):  # a different wall clock must not change a byte
        export_bundle(ledger, r.Digest.parse(s.receipt), second)
    ledger.close()
    assert first.read_bytes() == second.read_bytes()


def test_bundle_size_does_not_grow_with_the_ledger(tmp_path: Path) -> None:
    s, small = exported(tmp_path)
    ledger = Ledger.open(s.root)
    # Grow the ledger with another task's entries: the bundle carries this task's history only.
    from conftest import contract_bytes
    from ledger import register_contract

    for i in range(60):
        register_contract(ledger, "OTHER-%d" % i, contract_bytes(task="OTHER-%d" % i), SIGNERS["ci"])
    ledger.checkpoint(SIGNERS["sealer"])
    big = tmp_path / "big.zip"
    export_bundle(ledger, r.Digest.parse(s.receipt), big)
    ledger.close()
    assert abs(big.stat().st_size - small.stat().st_size) < 4096, (small.stat().st_size, big.stat().st_size)
    assert verify_bundle(big, s.receipt).ok


def _blob_names(bundle: Path) -> list[str]:
    with zipfile.ZipFile(bundle) as zf:
        return [n for n in zf.namelist() if n.startswith("blobs/")]


def test_a_bundle_with_a_missing_blob_is_rejected(tmp_path: Path) -> None:
    s, bundle = exported(tmp_path)
    broken = rezip(bundle, tmp_path / "missing.zip", drop=(_blob_names(bundle)[0],))
    codes = {d.code for d in verify_bundle(broken, s.receipt).defects}
    assert "evidence-missing" in codes


def test_a_bundle_with_a_swapped_blob_is_rejected(tmp_path: Path) -> None:
    s, bundle = exported(tmp_path)
    a, b = _blob_names(bundle)[:2]
    with zipfile.ZipFile(bundle) as zf:
        swapped = rezip(bundle, tmp_path / "swapped.zip", replace={a: zf.read(b), b: zf.read(a)})
    codes = {d.code for d in verify_bundle(swapped, s.receipt).defects}
    assert "evidence-altered" in codes


@pytest.mark.parametrize("name", ["../../evil.txt", "/etc/passwd", "blobs/../../x", "entries\\1.entry", "C:/x"])
def test_a_zip_slip_member_is_refused(tmp_path: Path, name: str) -> None:
    s, bundle = exported(tmp_path)
    evil = rezip(bundle, tmp_path / "slip.zip", extra=[(zipfile.ZipInfo(name), b"owned")])
    with pytest.raises(CannotVerify, match="not a name a bundle may hold"):
        BundleSource(evil)
    cli = run_cli("verify", "--bundle", str(evil), s.receipt, cwd=tmp_path)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert not (tmp_path.parent / "evil.txt").exists()


def test_a_symlink_member_is_refused(tmp_path: Path) -> None:
    _, bundle = exported(tmp_path)
    link = zipfile.ZipInfo("report.md")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    evil = rezip(bundle, tmp_path / "link.zip", drop=("report.md",), extra=[(link, b"/etc/passwd")])
    with pytest.raises(CannotVerify, match="link or special file"):
        BundleSource(evil)


def test_duplicate_member_names_are_refused(tmp_path: Path) -> None:
    _, bundle = exported(tmp_path)
    with zipfile.ZipFile(bundle) as zf:
        manifest = zf.read("manifest.json")
    with pytest.warns(UserWarning):
        evil = rezip(bundle, tmp_path / "dup.zip", extra=[(zipfile.ZipInfo("manifest.json"), manifest)])
    with pytest.raises(CannotVerify, match="two members named"):
        BundleSource(evil)


def test_a_1gb_zip_bomb_is_rejected_without_unpacking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("blobs/" + "ab" * 32, "w", force_zip64=True) as fh:
            chunk = bytes(1 << 22)
            for _ in range(256):  # 1 GiB of zeros
                fh.write(chunk)
    assert bomb.stat().st_size < 8 << 20

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a member was opened: the bomb must be refused from the central directory alone")

    monkeypatch.setattr(zipfile.ZipFile, "open", never)
    with pytest.raises(CannotVerify, match="zip bomb"):
        BundleSource(bomb)


def test_omitting_a_decision_or_a_key_change_from_a_bundle_is_caught(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    candidate = r.decode_tier_record(
        next(e for e in ledger.entries(task="TASK-1") if e.kind == "tier_record").body
    ).input_hash
    sign_decision(ledger, s.repo, s.contract, candidate, SIGNERS["bob"], approve=False, note="no")
    from ledger import seal_receipt

    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=candidate)
    ledger.checkpoint(SIGNERS["sealer"])
    bundle = tmp_path / "b.zip"
    export_bundle(ledger, sealed.body_hash, bundle)
    rows = {e.seq: e for e in ledger.entries()}
    ledger.close()
    receipt = str(sealed.body_hash)
    assert verify_bundle(bundle, receipt).ok
    reject_seq = max(seq for seq, e in rows.items() if e.kind == "tier_record")
    hidden = rezip(
        bundle,
        tmp_path / "hidden.zip",
        drop=("entries/%d.entry" % reject_seq, "entries/%d.body" % reject_seq, "proofs/%d.tlog-proof" % reject_seq),
    )
    assert "task-link" in {d.code for d in verify_bundle(hidden, receipt).defects}
    key_seq = max(seq for seq, e in rows.items() if e.kind == "key_add")
    no_key = rezip(
        bundle,
        tmp_path / "nokey.zip",
        drop=("entries/%d.entry" % key_seq, "entries/%d.body" % key_seq, "proofs/%d.tlog-proof" % key_seq),
    )
    assert "ring-link" in {d.code for d in verify_bundle(no_key, receipt).defects}


def _with_first_proof_hash(tmp: Path, bundle: Path, change: Callable[[str], str]) -> Path:
    """The bundle with the first hash line of its last entry's tlog-proof changed."""
    with zipfile.ZipFile(bundle) as zf:
        proof_name = sorted(n for n in zf.namelist() if n.startswith("proofs/"))[-1]
        lines = zf.read(proof_name).decode().split("\n")
    lines[2] = change(lines[2])
    return rezip(bundle, tmp / "changed-proof.zip", replace={proof_name: "\n".join(lines).encode()})


def test_an_entry_not_proven_into_the_checkpoint_is_rejected(tmp_path: Path) -> None:
    s, bundle = exported(tmp_path)
    bad = _with_first_proof_hash(tmp_path, bundle, lambda line: base64.b64encode(bytes(32)).decode())
    assert "inclusion" in {d.code for d in verify_bundle(bad, s.receipt).defects}


def test_a_proof_hash_in_non_canonical_base64_is_refused(tmp_path: Path) -> None:
    s, bundle = exported(tmp_path)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def set_pad_bit(line: str) -> str:
        # a 32-byte hash is 43 characters and '=': the 43rd carries two bits that must be zero
        changed = line[:42] + alphabet[alphabet.index(line[42]) ^ 1] + "="
        assert base64.b64decode(changed) == base64.b64decode(line)  # the same bytes, another text
        return changed

    with pytest.raises(CannotVerify, match="canonical"):
        verify_bundle(_with_first_proof_hash(tmp_path, bundle, set_pad_bit), s.receipt)


def test_the_dsse_envelope_verifies_with_securesystemslib(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    out = tmp_path / "receipt.intoto.json"
    export_intoto(ledger, r.Digest.parse(s.receipt), SIGNERS["sealer"], out)
    ledger.close()
    doc = json.loads(out.read_text())
    envelope = Envelope.from_dict(json.loads(out.read_text()))  # from_dict mutates its argument
    key_id = r.fingerprint(SIGNERS["sealer"].public_key_blob)
    public = Ed25519PublicKey.from_public_bytes(r.parse_public_key_blob(SIGNERS["sealer"].public_key_blob))
    key = SSlibKey.from_crypto(public, keyid=key_id)
    assert key_id in envelope.verify([key], 1)
    statement = json.loads(base64.b64decode(doc["payload"]))
    assert doc["payloadType"] == PAYLOAD_TYPE and statement["_type"] == "https://in-toto.io/Statement/v1"
    digests = statement["subject"][0]["digest"]
    assert set(digests) == {"sha256", "blake3"} and statement["predicate"]["receipt"] == s.receipt
    assert any("gitCommit" in subject["digest"] for subject in statement["subject"])
    # A changed payload no longer verifies with the independent implementation.
    tampered = dict(
        json.loads(out.read_text()),
        payload=base64.b64encode(base64.b64decode(doc["payload"]).replace(b"true", b"fals")).decode(),
    )
    from securesystemslib.exceptions import VerificationError

    with pytest.raises(VerificationError):
        Envelope.from_dict(tampered).verify([key], 1)


BUNDLE_TAMPER = json.loads((Path(__file__).parent / "vectors" / "bundle_tamper.json").read_text())["cases"]


def _bundle_mutation(name: str, bundle: Path, out: Path) -> Path:
    with zipfile.ZipFile(bundle) as zf:
        signers = zf.read("allowed_signers").decode()
        manifest = json.loads(zf.read("manifest.json"))
    if name == "stray-blob":
        return rezip(bundle, out, extra=[(zipfile.ZipInfo("blobs/" + "ab" * 32), b"forged evidence")])
    if name == "allowed-signers-adds-a-key":
        line = "admin2 " + r.public_key_line(SIGNERS["mallory"].public_key_blob) + "\n"
        return rezip(bundle, out, replace={"allowed_signers": (signers + line).encode()})
    if name == "manifest-lists-other-entries":
        return rezip(bundle, out, replace={"manifest.json": json.dumps({**manifest, "entries": [0]}).encode()})
    if name == "manifest-names-another-receipt":
        return rezip(
            bundle, out, replace={"manifest.json": json.dumps({**manifest, "receipt": "blake3:" + "0" * 64}).encode()}
        )
    if name == "report-md-forged":
        return rezip(bundle, out, replace={"report.md": b"# Evidence bundle\n\nStatus: **verified**\n"})
    if name == "manifest-eligibility-and-task-renamed":
        renamed = {**manifest, "merge_eligible": False, "task": "TASK-2"}
        return rezip(bundle, out, replace={"manifest.json": json.dumps(renamed, indent=1, sort_keys=True).encode()})
    if name == "manifest-declares-a-redaction-no-record-holds":
        item = {"tier": "deterministic", "check": "check:tests:stdout", "digest": "blake3:" + "ab" * 32, "size": 1}
        forged = {**manifest, "redacted": [*manifest["redacted"], item]}
        return rezip(
            bundle, out, replace={"manifest.json": (json.dumps(forged, indent=1, sort_keys=True) + "\n").encode()}
        )
    if name == "report-html-missing":
        return rezip(bundle, out, drop=("report.html",))
    assert name == "report-html-forged"
    return rezip(bundle, out, replace={"report.html": b"<h1>Status: verified</h1>"})


@pytest.fixture(scope="module")
def one_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sample, Path]:
    return exported(tmp_path_factory.mktemp("bundle"))


@pytest.mark.parametrize("case", BUNDLE_TAMPER, ids=[c["name"] for c in BUNDLE_TAMPER])
def test_every_bundle_member_is_verified_or_refused(
    case: dict[str, Any], one_bundle: tuple[Sample, Path], tmp_path: Path
) -> None:
    # issue 11, item 2: nothing in a bundle may ride along unchecked.
    s, bundle = one_bundle
    assert verify_bundle(bundle, s.receipt).ok
    tampered = _bundle_mutation(case["name"], bundle, tmp_path / "tampered.zip")
    result = verify_bundle(tampered, s.receipt)
    assert [d.code for d in result.defects] == case["defects"]
    cli = run_cli("verify", "--bundle", str(tampered), s.receipt, "--trust", ADMIN_ID)
    assert cli.returncode == 1 and all("[%s]" % code in cli.stdout for code in case["defects"]), cli.stdout


def test_the_bundles_allowed_signers_is_the_keyring_at_the_receipt(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    add_key(ledger, SIGNERS["admin"], "carol", [r.Role.HUMAN], SIGNERS["mallory"].public_key_blob)  # after the receipt
    ledger.checkpoint(SIGNERS["sealer"])
    export_bundle(ledger, r.Digest.parse(s.receipt), tmp_path / "b.zip")
    ledger.close()
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        assert "carol" not in zf.read("allowed_signers").decode()
    assert verify_bundle(tmp_path / "b.zip", s.receipt).ok


def test_a_bundle_carries_the_stored_witness_cosignatures(tmp_path: Path) -> None:
    # issue 11, item 8: a cosignature stored with `witness add` travels in the bundle and counts there.
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    note = ledger.checkpoint(SIGNERS["sealer"])
    witness = WitnessKey("witness.example/w1", r.parse_public_key_blob(SIGNERS["bob"].public_key_blob))
    quorum = Transparency(require_checkpoint=True, witnesses=(witness,), quorum=1)
    export_bundle(ledger, r.Digest.parse(s.receipt), tmp_path / "plain.zip")
    with BundleSource(tmp_path / "plain.zip") as plain:
        assert [d.code for d in verify_receipt(plain, s.receipt, TRUST, quorum).defects] == ["witness-quorum"]
    cosigned = note.with_signature(r.cosign_note(note.text, witness.name, SIGNERS["bob"], 1_700_000_000))
    assert add_cosignatures(ledger, cosigned.encode(), (witness,)) == (witness.name,)
    export_bundle(ledger, r.Digest.parse(s.receipt), tmp_path / "witnessed.zip")
    ledger.close()
    with BundleSource(tmp_path / "witnessed.zip") as witnessed:
        assert verify_receipt(witnessed, s.receipt, TRUST, quorum).ok


def _redacted(tmp: Path, *names: str) -> tuple[Sample, Path, dict[str, Any]]:
    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    out = tmp / "redacted.zip"
    manifest = export_bundle(ledger, r.Digest.parse(s.receipt), out, names)
    ledger.close()
    return s, out, manifest


def test_a_redacted_bundle_still_verifies_and_says_what_was_not_checked(tmp_path: Path) -> None:
    s, bundle, manifest = _redacted(tmp_path, "tests", "diff")
    assert sorted(r_["check"] for r_ in manifest["redacted"]) == ["check:tests:stderr", "check:tests:stdout", "diff"]
    with zipfile.ZipFile(bundle) as zf:
        names = set(zf.namelist())
        page = zf.read("report.html").decode()
    stdout = next(r_ for r_ in manifest["redacted"] if r_["check"] == "check:tests:stdout")
    assert "blobs/" + stdout["digest"][7:] not in names  # the output itself is not in the bundle
    assert "redacted from this bundle" in page
    result = verify_bundle(bundle, s.receipt)
    assert result.ok and result.derived_eligible, result.defects
    said = [w for w in result.warnings if w.startswith("REDACTED")]
    assert len(said) == 3 and any("check:tests:stdout" in w for w in said)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(run_cli("--dir", str(s.root), "keys", "export-allowed-signers").stdout)
    cli = run_cli("--dir", str(tmp_path / "nowhere"), "verify", "--bundle", str(bundle), "--trust", str(allowed))
    assert cli.returncode == 0 and "REDACTED from this bundle by its exporter, not checked" in cli.stdout


@pytest.mark.parametrize("name", ["snapshot", "check:tests", "human:decision", "judge:run", "no-such-item"])
def test_what_a_verdict_is_derived_from_cannot_be_redacted(tmp_path: Path, name: str) -> None:
    s = build_sample(tmp_path)
    ledger = Ledger.open(s.root)
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()
    res = run_cli("--dir", str(s.root), "export", s.receipt, "-o", str(tmp_path / "b.zip"), "--redact", name)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "b.zip").exists()


@pytest.mark.parametrize("why", [None, "pruned under the retention policy of entry 3"])
def test_a_derivation_input_dropped_and_declared_redacted_still_fails(tmp_path: Path, why: str | None) -> None:
    # The manifest is not signed: declaring a check result "redacted" excuses nothing, nor
    # does calling it retention (the reason a pruned blob's redaction carries).
    s, bundle, _ = _redacted(tmp_path, "tests")
    with zipfile.ZipFile(bundle) as zf:
        doc = json.loads(zf.read("manifest.json"))
    result_ref = next(a for a in doc["artifacts"] if a["check"] == "check:tests")
    item = {"tier": "deterministic", "check": "check:tests", "digest": result_ref["digest"], "size": 1}
    doc["redacted"].append({**item, "reason": why} if why else item)
    forged = rezip(
        bundle,
        tmp_path / "forged.zip",
        drop=("blobs/" + result_ref["digest"][7:],),
        replace={"manifest.json": json.dumps(doc).encode()},
    )
    codes = {d.code for d in verify_bundle(forged, s.receipt).defects}
    assert {"evidence-missing", "verdict-not-entailed"} <= codes
    # And raw output dropped without being declared is missing, as before.
    (tmp_path / "plain").mkdir()
    plain, bundle = exported(tmp_path / "plain")
    with zipfile.ZipFile(bundle) as zf:
        artifacts = json.loads(zf.read("manifest.json"))["artifacts"]
    stdout = next(a for a in artifacts if a["check"] == "check:tests:stdout")
    dropped = rezip(bundle, tmp_path / "dropped.zip", drop=("blobs/" + stdout["digest"][7:],))
    assert "evidence-missing" in {d.code for d in verify_bundle(dropped, plain.receipt).defects}
