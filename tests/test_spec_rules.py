"""The rules a second verifier written from docs/format.md alone read two ways (issue 47),
one named case each (tests/vectors/spec_rules.json): each case builds its input on a fresh
sample ledger and the `ledger` CLI must answer as the vector says."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, TASK, build_sample, contract_bytes, judge_table, run_cli, write_private_key
from ledger import Ledger

# C2SP signed-note key types: 0x01 a log's Ed25519 key, 0x04 a witness's cosignature key.
COSIGNATURE = 0x04
VECTORS = json.loads((Path(__file__).parent / "vectors" / "spec_rules.json").read_text())["cases"]
# Each case: the CLI's arguments (and working directory) for a sample built under tmp.
CASES: dict[str, Callable[[Path], tuple[list[str], Path | None]]] = {}


def case(name: str) -> Callable[[Callable[[Path], tuple[list[str], Path | None]]], Callable[..., object]]:
    def register(fn: Callable[[Path], tuple[list[str], Path | None]]) -> Callable[..., object]:
        CASES[name] = fn
        return fn

    return register


def _key_line(name: str, signer: str) -> str:
    return "%s %s" % (name, r.public_key_line(SIGNERS[signer].public_key_blob, signer))


def _verify(tmp: Path, *extra: str, checkpoint: bool = False) -> list[str]:
    s = build_sample(tmp)
    if checkpoint:
        ledger = Ledger.open(s.root)
        try:
            ledger.checkpoint(SIGNERS["sealer"])
        finally:
            ledger.close()
    return ["--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--json", *extra]


@case("auditing-witness-given-twice")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    twice = ["--auditing-witness", _key_line("w1", "judge")] * 2
    return _verify(tmp, *twice, "--audited-quorum", "2"), None


@case("auditing-witness-one-key-two-names")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    two = ["--auditing-witness", _key_line("w1", "judge"), "--auditing-witness", _key_line("w2", "judge")]
    return _verify(tmp, *two, "--audited-quorum", "2"), None


@case("auditing-witness-file-one-key-two-names")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    import subprocess

    args = _verify(tmp)
    repo = tmp / "target"
    (repo / ".ledger").mkdir(parents=True)
    lines = "quorum 2\n%s\n%s\n" % (_key_line("w1", "judge"), _key_line("w2", "judge"))
    (repo / ".ledger" / "auditing-witnesses").write_text(lines)
    for git in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "auditing witnesses"]):
        subprocess.run(["git", *git], cwd=repo, check=True, capture_output=True)
    return args, repo


@case("witness-given-twice")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    twice = ["--witness", _key_line("w1", "judge")] * 2
    return _verify(tmp, *twice, "--witness-quorum", "2"), None


@case("audited-quorum-above-the-keys-given")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _verify(tmp, "--auditing-witness", _key_line("w1", "judge"), "--audited-quorum", "2"), None


@case("audited-quorum-without-keys")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _verify(tmp, "--audited-quorum", "1"), None


def _policy(tmp: Path, text: str, checkpoint: bool = False) -> tuple[list[str], Path | None]:
    (tmp / "policy").write_text(text)
    return _verify(tmp, "--policy", str(tmp / "policy"), checkpoint=checkpoint), None


def _vkey(name: str, signer: str, sig_type: int = 0x01) -> str:
    return r.verifier_key(name, r.parse_public_key_blob(SIGNERS[signer].public_key_blob), sig_type)


@case("tlog-policy-witness-name-twice")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    w1, w2 = _vkey("w1.example", "judge", COSIGNATURE), _vkey("w2.example", "agent", COSIGNATURE)
    return _policy(tmp, "witness w %s\nwitness w %s\nquorum w\n" % (w1, w2))


@case("tlog-policy-group-named-like-a-witness")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    w1 = _vkey("w1.example", "judge", COSIGNATURE)
    return _policy(tmp, "witness w %s\ngroup w any w\nquorum w\n" % w1)


@case("tlog-policy-named-none")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _policy(tmp, "witness none %s\nquorum none\n" % _vkey("w1.example", "judge", COSIGNATURE))


@case("tlog-policy-one-key-twice")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    w1, w2 = _vkey("w1.example", "judge", COSIGNATURE), _vkey("w2.example", "judge", COSIGNATURE)
    return _policy(tmp, "witness a %s\nwitness b %s\nquorum a\n" % (w1, w2))


@case("tlog-policy-one-origin-two-keys")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    one, two = _vkey("other.example/log", "judge"), _vkey("other.example/log", "agent")
    return _policy(tmp, "log %s\nlog %s\nquorum none\n" % (one, two), checkpoint=True)


def _scitt(tmp: Path, statement: bytes, issuer: str = "sealer") -> tuple[list[str], Path | None]:
    """`verify --scitt` of ``statement`` with a receipt of the one-leaf log that holds it."""
    log = SIGNERS["sealer"]
    leaf = r.statement_leaf(statement)
    kid = r.fingerprint(log.public_key_blob).encode()
    receipt = r.cose_receipt([leaf], 0, issuer="logs.example", subject=None, kid=kid, sign=log.sign_raw)
    files = {"statement": statement, "receipt": receipt}
    files["issuer.pub"] = r.public_key_line(SIGNERS[issuer].public_key_blob, issuer).encode()
    files["log.pub"] = r.public_key_line(log.public_key_blob, "log").encode()
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return ["verify", "--scitt", *(str(tmp / n) for n in files), "--json"], None


def _statement(header: dict[int, object], payload: bytes | None = b"the claim", signer: str = "sealer") -> bytes:
    """A tagged COSE_Sign1 with ``header`` protected, signed by ``signer`` (EdDSA) over it."""
    import cbor2

    protected = cbor2.dumps(header, canonical=True)
    signature = SIGNERS[signer].sign_raw(cbor2.dumps(["Signature1", protected, b"", payload or b""]))
    return bytes(cbor2.dumps(cbor2.CBORTag(18, [protected, {}, payload, signature])))


_EDDSA = {1: -8, 15: {1: "issuer.example", 2: "urn:example:1"}}


@case("scitt-statement-with-detached-payload")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _scitt(tmp, _statement(_EDDSA, payload=None))


@case("scitt-statement-hash-envelope-labels-critical")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    envelope = {258: -16, 259: "text/plain", 260: "urn:example:where"}
    return _scitt(tmp, _statement({**_EDDSA, **envelope, 2: [258, 259, 260]}))


@case("scitt-statement-unknown-critical-label")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _scitt(tmp, _statement({**_EDDSA, 261: "x", 2: [261]}))


@case("scitt-statement-critical-not-an-array")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _scitt(tmp, _statement({**_EDDSA, 2: 1}))


@case("scitt-statement-algorithm-does-not-fit-key")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _scitt(tmp, _statement({**_EDDSA, 1: -7}))


@case("scitt-statement-es256-signature-not-64-bytes")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    import cbor2
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.derive_private_key(47, ec.SECP256R1())
    protected = cbor2.dumps({1: -7, 15: {1: "issuer.example"}}, canonical=True)
    statement = cbor2.dumps(cbor2.CBORTag(18, [protected, {}, b"the claim", b"\x01" * 63]))
    args, _ = _scitt(tmp, bytes(statement))
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp / "issuer.pub").write_bytes(pem)
    return args, None


def _bundle(tmp: Path, change: Callable[[dict[str, bytes]], None]) -> tuple[list[str], Path | None]:
    """The sample's receipt exported as a bundle (a checkpoint over it first), its members
    changed by ``change``, and `verify --bundle` of the result."""
    import zipfile

    s = build_sample(tmp)
    ledger = Ledger.open(s.root)
    try:
        ledger.checkpoint(SIGNERS["sealer"])
    finally:
        ledger.close()
    exported = run_cli("--dir", str(s.root), "export", s.receipt, "-o", str(tmp / "b.zip"), "--trust", ADMIN_ID)
    assert exported.returncode == 0, exported.stderr
    with zipfile.ZipFile(tmp / "b.zip") as z:
        members = {n: z.read(n) for n in z.namelist()}
    change(members)
    with zipfile.ZipFile(tmp / "changed.zip", "w") as z:
        for name in sorted(members):
            z.writestr(name, members[name])
    return ["verify", "--bundle", str(tmp / "changed.zip"), "--trust", ADMIN_ID, "--json"], None


@case("bundle-without-manifest")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    def drop(members: dict[str, bytes]) -> None:
        del members["manifest.json"]

    return _bundle(tmp, drop)


@case("bundle-redaction-naming-no-listed-evidence")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    def declare(members: dict[str, bytes]) -> None:
        manifest = json.loads(members["manifest.json"])
        stranger = {"tier": "deterministic", "check": "tests", "digest": str(r.content_digest(b"no such")), "size": 7}
        manifest["redacted"] = [*manifest.get("redacted", []), stranger]
        members["manifest.json"] = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()

    return _bundle(tmp, declare)


def _published(tmp: Path) -> tuple[Path, str, list[str]]:
    """The sample with a checkpoint, published as tiles in ``tmp/tiles``; the folder, the
    log's vkey, and the arguments that verify the sample's receipt."""
    from ledger import DirTileStore, publish_tiles
    from verify import LedgerSource

    args = _verify(tmp, checkpoint=True)
    root = Path(args[1])
    with LedgerSource.open(root) as source:
        publish_tiles(source, DirTileStore(tmp / "tiles"))
    sealer = r.public_key_line(SIGNERS["sealer"].public_key_blob)
    vkey = run_cli("--dir", str(root), "checkpoint", "vkey", "--log-key", sealer).stdout.strip()
    return tmp / "tiles", vkey, args


def _tiles(folder: Path, vkey: str) -> tuple[list[str], Path | None]:
    return ["verify", "--tiles", str(folder), "--log-vkey", vkey, "--json"], None


def _first_tile(folder: Path) -> Path:
    return sorted(p for p in (folder / "tile" / "0").rglob("*") if p.is_file())[0]


@case("tiles-without-a-checkpoint")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, _ = _published(tmp)
    (folder / "checkpoint").unlink()
    return _tiles(folder, vkey)


@case("tiles-checkpoint-without-a-signature-line")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, _ = _published(tmp)
    note = (folder / "checkpoint").read_text()
    (folder / "checkpoint").write_text(note.split("\n\n")[0] + "\n\n")
    return _tiles(folder, vkey)


@case("tiles-checkpoint-signed-by-another-key")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, _ = _published(tmp)
    origin = (folder / "checkpoint").read_text().split("\n", 1)[0]
    return _tiles(folder, _vkey(origin, "judge"))


@case("tiles-tile-that-is-no-file")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, _ = _published(tmp)
    tile = _first_tile(folder)
    tile.unlink()
    tile.mkdir()
    return _tiles(folder, vkey)


def _in_8f(folder: Path, vkey: str, args: list[str]) -> tuple[list[str], Path | None]:
    return [*args, "--tiles", str(folder), "--log-vkey", vkey], None


@case("receipt-published-log-missing-a-tile")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, args = _published(tmp)
    _first_tile(folder).unlink()
    return _in_8f(folder, vkey, args)


@case("receipt-published-checkpoint-unparsable")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, args = _published(tmp)
    (folder / "checkpoint").write_text("not a checkpoint\n")
    return _in_8f(folder, vkey, args)


@case("receipt-published-log-without-a-checkpoint")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    folder, vkey, args = _published(tmp)
    (folder / "checkpoint").unlink()
    return _in_8f(folder, vkey, args)


def _revision(tmp: Path, extra: str) -> tuple[list[str], Path | None]:
    """`contract set` by the deterministic runner's key (no admin) of the sample's contract
    with ``extra`` lines added to its `tests` check."""
    s = build_sample(tmp)
    write_private_key(tmp / "keys" / "ci", "ci")
    (tmp / "revision.toml").write_bytes(contract_bytes(judge=judge_table("accept", "0.9"), extra=extra))
    args = ["--dir", str(s.root), "contract", "set", TASK, "--contract", str(tmp / "revision.toml"), "--key", "ci"]
    return args, None


@case("contract-check-runs-raised")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _revision(tmp, "runs = 2\n")


@case("contract-check-fast-changed")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _revision(tmp, "fast = true\n")


@case("contract-check-defaults-written-out")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    return _revision(tmp, "runs = 1\nmin_passes = 1\n")


@case("chain-audit-without-a-genesis")
def _(tmp: Path) -> tuple[list[str], Path | None]:
    import sqlite3

    args = _verify(tmp, checkpoint=True)
    with sqlite3.connect(Path(args[1]) / "ledger.db") as db:
        (body,) = db.execute("SELECT body FROM entries WHERE seq = 0").fetchone()
        db.execute("UPDATE entries SET body = ? WHERE seq = 0", (body[:10] + bytes([body[10] ^ 1]) + body[11:],))
    return ["--dir", args[1], "verify", "--chain", "--trust", ADMIN_ID, "--json"], None


def test_every_vector_has_its_case_and_every_case_its_vector() -> None:
    assert sorted(v["name"] for v in VECTORS) == sorted(CASES)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_the_cli_answers_as_the_vector_says(vector: dict[str, object], tmp_path: Path) -> None:
    args, cwd = CASES[str(vector["name"])](tmp_path)
    done = run_cli(*args, cwd=cwd or tmp_path, env={"RECEIPT_LEDGER_KEYS": str(tmp_path / "keys")})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == vector["exit"], (done.returncode, done.stdout, done.stderr)
    if done.returncode == 2:
        assert done.stderr.count("\n") == 1 and str(vector["stderr"]) in done.stderr, done.stderr
    elif "failure" in vector:
        assert json.loads(done.stdout)["failure"] == vector["failure"], done.stdout
    elif "defects" in vector:
        found = sorted({d["code"] for d in json.loads(done.stdout)["defects"]})
        assert found == sorted(vector.get("defects", [])), done.stdout  # type: ignore[call-overload]


RENDERINGS = Path(__file__).parent / "vectors" / "renderings"
RENDERED = json.loads((RENDERINGS / "renderings.json").read_text())["cases"]


@pytest.mark.parametrize("vector", RENDERED, ids=[v["name"] for v in RENDERED])
def test_the_rendering_known_answers_are_what_the_verifier_renders(vector: dict[str, Any]) -> None:
    # Step 9's renderings are the reference implementation's (format.md §10): each bundle
    # holds the renderings of its own content as made, and the verifier reading it must
    # render exactly those bytes (else rendering-mismatch) and reach the same decision.
    bundle = RENDERINGS / vector["bundle"]
    done = run_cli("verify", "--bundle", str(bundle), "--trust", ADMIN_ID, "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == vector["exit"], done.stdout
    assert sorted({d["code"] for d in doc["defects"]}) == vector["defects"], doc["defects"]
    assert doc["target"] == vector["receipt"]
