"""Receipts that travel with the code: bundles and notes in git, verified on a
fresh clone with no ledger and no network; squash merges; concurrent pushes; and trust
that a pull request cannot change. Every repository here is real git, and the remote is
a bare repository in a temporary folder."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import (
    GIT_ENV,
    LEDGER,
    NO_KEYS,
    audited_cosign,
    auditor_line,
    contract_bytes,
    fresh_clone,
    git,
    ladder,
    ok,
    run_cli,
)


def test_a_fresh_clone_verifies_and_gates_with_only_git_and_the_trust_file(
    world: tuple[Path, dict[str, str], str],
) -> None:
    top, _, receipt = world
    clone = fresh_clone(top, "auditor")
    head = git(clone, "rev-parse", "HEAD")
    # before fetching the receipt refs, nothing is attached (checkout does not bring them)
    assert run_cli("gate", head, cwd=clone, env=NO_KEYS).returncode == 1
    fetched = run_cli("receipts", "fetch", "--json", cwd=clone, env=NO_KEYS)
    assert fetched.returncode == 0 and json.loads(fetched.stdout)["notes_merged"], fetched.stderr
    # the origin is gone: whatever follows reads nothing but this clone
    (top / "origin.git").rename(top / "origin-away.git")
    verified = run_cli("verify", "--commit", head, "--json", cwd=clone, env=NO_KEYS)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    [check] = json.loads(verified.stdout)
    assert check["origin"].startswith("bundle refs/receipts/") and check["match"] == "commit"
    assert check["result"]["trust"].startswith("pinned (origin/main:.ledger/allowed_signers at ")
    assert check["result"]["merge_eligible_derived"] is True
    gated = run_cli("gate", head, cwd=clone, env=NO_KEYS)
    assert gated.returncode == 0 and gated.stdout.startswith("GATE PASS: %s" % head[:12]), gated
    assert "verified from bundle refs/receipts/" in gated.stdout
    # and with no ledger directory at all
    gone = run_cli("--dir", str(top / "nowhere"), "gate", head, cwd=clone, env=NO_KEYS)
    assert gone.returncode == 0, gone.stderr
    assert not (top / "nowhere").exists()


def test_plain_git_fetch_with_the_documented_refspecs_is_enough(world: tuple[Path, dict[str, str], str]) -> None:
    top, _, receipt = world
    clone = fresh_clone(top, "ci")
    # docs/ci.md: what a read-only job adds to its fetch
    git(clone, "fetch", "-q", "origin", "+refs/notes/receipts:refs/notes/receipts", "+refs/receipts/*:refs/receipts/*")
    gated = run_cli("gate", "HEAD", "--json", cwd=clone, env=NO_KEYS)
    assert gated.returncode == 0 and json.loads(gated.stdout)["receipt"] == receipt


def test_a_squash_merge_with_the_same_tree_passes_and_one_byte_more_does_not(
    world: tuple[Path, dict[str, str], str],
) -> None:
    top, _, receipt = world
    clone = fresh_clone(top, "maintainer", branch="main")
    ok("receipts", "fetch", cwd=clone, env=NO_KEYS)
    git(clone, "fetch", "-q", "origin", "task-1")
    git(clone, "merge", "-q", "--squash", "origin/task-1")
    git(clone, "commit", "-qm", "TASK-1: greet (#1)")
    squashed = git(clone, "rev-parse", "HEAD")
    assert squashed != git(clone, "rev-parse", "origin/task-1")
    assert git(clone, "rev-parse", "HEAD^{tree}") == git(clone, "rev-parse", "origin/task-1^{tree}")
    # the gate on main after the merge: the pin is read from origin/main, which predates it
    gated = run_cli("gate", squashed, "--json", cwd=clone, env=NO_KEYS)
    doc = json.loads(gated.stdout)
    assert gated.returncode == 0 and doc["receipt"] == receipt, gated.stdout
    assert doc["via_tree_of"] == git(clone, "rev-parse", "origin/task-1")
    human = run_cli("gate", squashed, cwd=clone, env=NO_KEYS).stdout
    assert "via its tree" in human and "whose tree is identical" in human
    # a rebase that changes one byte of one file is another tree: refused
    (clone / "app.py").write_text((clone / "app.py").read_text() + " ")
    git(clone, "commit", "-qam", "TASK-1: greet (#1), amended")
    changed = run_cli("gate", "HEAD", "--json", cwd=clone, env=NO_KEYS)
    assert changed.returncode == 1 and json.loads(changed.stdout)["receipt"] is None
    assert "no receipt is attached" in json.loads(changed.stdout)["reasons"][0]
    # even with the old receipt's note copied onto it (notes.rewriteRef), it is stale
    git(clone, "notes", "--ref=receipts", "copy", "origin/task-1", "HEAD")
    copied = run_cli("gate", "HEAD", "--json", cwd=clone, env=NO_KEYS)
    assert copied.returncode == 1 and "is stale" in json.loads(copied.stdout)["reasons"][0]


def test_two_concurrent_pushes_from_two_clones_both_land(world: tuple[Path, dict[str, str], str]) -> None:
    top, env, first = world
    dev = top / "dev"
    ledger_dir = ("--dir", str(dev / ".ledger"))
    # A second job's clone, writing to the same ledger (as two CI jobs share one store).
    other = fresh_clone(top, "other")
    ok("receipts", "fetch", cwd=other, env=NO_KEYS)
    # Both seal a new receipt of the same commit, so both append to the notes of one commit and tree.
    second = _another_receipt(dev, env)
    third = _another_receipt(dev, env)
    assert len({first, second, third}) == 3
    ok("attach", second, "--key", "sealer", cwd=dev, env=env)
    ok(*ledger_dir, "attach", third, "--key", "sealer", cwd=other, env=env)
    # A plain push from `other` now would be refused: its notes do not contain `dev`'s.
    procs = [
        subprocess.Popen([*LEDGER, "receipts", "push", "--json"], cwd=repo, env={**_env(env)}, stdout=subprocess.PIPE)
        for repo in (dev, other)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    auditor = fresh_clone(top, "auditor")
    ok("receipts", "fetch", cwd=auditor, env=NO_KEYS)
    head = git(auditor, "rev-parse", "HEAD")
    named = git(auditor, "notes", "--ref=receipts", "show", head)
    assert all(named.count("receipt-ledger: " + h) == 1 for h in (first, second, third)), named
    tree_note = git(auditor, "notes", "--ref=receipts", "show", head + "^{tree}")
    assert all(tree_note.count("receipt-ledger: " + h) == 1 for h in (first, second, third))
    checks = json.loads(run_cli("verify", "--commit", head, "--json", cwd=auditor, env=NO_KEYS).stdout)
    assert sorted(c["receipt"] for c in checks) == sorted((first, second, third))
    assert all(c["result"]["verified"] for c in checks)


def test_a_push_that_lost_the_race_merges_and_retries_instead_of_forcing(
    world: tuple[Path, dict[str, str], str],
) -> None:
    top, env, first = world
    dev = top / "dev"
    other = fresh_clone(top, "other")
    ok("receipts", "fetch", cwd=other, env=NO_KEYS)
    second = _another_receipt(dev, env)
    ok("--dir", str(dev / ".ledger"), "attach", second, "--key", "sealer", cwd=other, env=env)
    third = _another_receipt(dev, env)
    assert len({first, second, third}) == 3
    ok("attach", third, "--key", "sealer", cwd=dev, env=env)
    ok("receipts", "push", cwd=dev, env=env)  # `dev` wins the race
    plain = subprocess.run(
        ["git", "push", "origin", "refs/notes/receipts"], cwd=other, env=_env(env), capture_output=True, text=True
    )
    assert plain.returncode != 0 and "rejected" in plain.stderr  # git alone refuses, and --force would lose `third`
    pushed = json.loads(ok("receipts", "push", "--json", cwd=other, env=env))
    assert pushed["pushed"] and pushed["notes_merged"]
    remote_note = git(top / "origin.git", "notes", "--ref=receipts", "show", git(dev, "rev-parse", "HEAD"))
    assert all(remote_note.count(h) == 1 for h in (first, second, third))


def _another_receipt(dev: Path, env: dict[str, str]) -> str:
    """A new receipt of the same candidate: a fresh judge record makes its body differ. The
    team's auditing witness cosigns a checkpoint covering it, as after every seal."""
    ok("judge", "TASK-1", "--key", "judge", cwd=dev, env=env)
    receipt = ok("seal", "TASK-1", "--key", "sealer", cwd=dev, env=env)
    audited_cosign(dev, env)
    return receipt


def _env(env: dict[str, str]) -> dict[str, str]:
    import os

    return {**os.environ, **env}


def _mallorys_pull_request(
    top: Path, n: str, change: Callable[[Path, Path], None], message: str
) -> tuple[Path, str, str]:
    """Mallory's pull request ``mallory/task-N``: her own ledger and keys, ``change(checkout,
    her ledger directory)`` made before the commit, the ladder run and the receipt pushed.
    Returns a CI runner's fresh clone of it (receipts fetched), its head, and her receipt."""
    evil = {"RECEIPT_LEDGER_KEYS": str(top / "mallory-keys"), **GIT_ENV}
    pr = fresh_clone(top, "mallory" + n, branch="main")
    git(pr, "checkout", "-qb", "mallory/task-" + n)
    hers = top / ("evil" + n) / "ledger"
    evil_dir = ("--dir", str(hers))
    ok(*evil_dir, "init", cwd=pr, env=evil)
    for name, role in (("ci", "deterministic"), ("judge", "judge"), ("alice", "human"), ("sealer", "seal")):
        ok(*evil_dir, "keys", "generate", name, "--role", role, cwd=pr, env=evil)
    change(pr, hers)
    (pr / "app.py").write_text("print('trust me')\n")
    git(pr, "add", "-A")
    git(pr, "commit", "-qm", message)
    receipt = ladder(pr, evil, *evil_dir, contract=pr / ".ledger" / "contracts" / "TASK-1.toml", audited=False)
    ok("receipts", "push", cwd=pr, env=evil)
    git(pr, "push", "-q", "origin", "mallory/task-" + n)
    ci = fresh_clone(top, "ci-runner-" + n, branch="mallory/task-" + n)
    ok("receipts", "fetch", cwd=ci, env=NO_KEYS)
    return ci, git(ci, "rev-parse", "HEAD"), receipt


def _gate_on_her_store(top: Path, n: str, ci: Path, head: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The gate with Mallory's own ledger as the store, audited by the gate (completeness by audit)."""
    her = ("--dir", str(top / ("evil" + n) / "ledger"))
    return run_cli(*her, "gate", head, *args, "--audit-state", str(top / ("gate-audit-" + n)), cwd=ci, env=NO_KEYS)


def test_the_trust_attack_a_pull_request_that_adds_its_own_key_is_refused(
    world: tuple[Path, dict[str, str], str],
) -> None:
    """Mallory's pull request adds her admin key to .ledger/allowed_signers and carries a
    receipt from a ledger she made with her own keys. Everything she signed verifies
    under her key; the gate must still refuse, because trust comes from main."""
    top, _, _ = world

    def add_her_key(pr: Path, hers: Path) -> None:
        pinned = pr / ".ledger" / "allowed_signers"
        pinned.write_text(pinned.read_text() + (hers / "allowed_signers").read_text())

    ci, head, receipt = _mallorys_pull_request(top, "1", add_her_key, "TASK-1: greet, and trust my key")
    gated = run_cli("gate", head, "--json", cwd=ci, env=NO_KEYS)
    doc = json.loads(gated.stdout)
    assert gated.returncode == 1 and doc["receipt"] is None, gated.stdout
    assert doc["trust"].startswith("pinned (origin/main:.ledger/allowed_signers")
    assert "not pinned" in doc["reasons"][0] or "trust" in doc["reasons"][0], doc["reasons"]
    assert run_cli("verify", "--commit", head, cwd=ci, env=NO_KEYS).returncode == 1
    # The attack is real: trusting the candidate's own file, by an explicit pin, passes it
    # (with a clean audit of her own ledger proving her task complete).
    fooled = _gate_on_her_store(top, "1", ci, head, "--trust", str(ci / ".ledger" / "allowed_signers"))
    assert fooled.returncode == 0 and receipt in fooled.stdout
    # No name the candidate controls can point the trust at itself (issue 22, case 5).
    for name in ("HEAD", head, "FETCH_HEAD", "refs/tags/x"):
        moved = run_cli("gate", head, "--trust-ref", name, cwd=ci, env=NO_KEYS)
        assert moved.returncode == 2 and moved.stdout == "" and moved.stderr.count("\n") == 1, (name, moved.stderr)


def test_a_candidate_cannot_choose_its_own_trust_ref(world: tuple[Path, dict[str, str], str]) -> None:
    """Issue 22, case 5: the candidate's config.toml saying trust_ref = "HEAD", and a tag or
    a local branch spelled like the target branch, are not where the gate's trust comes from."""
    top, _, _ = world

    def trust_herself(pr: Path, hers: Path) -> None:
        (pr / ".ledger" / "allowed_signers").write_bytes((hers / "allowed_signers").read_bytes())
        (pr / ".ledger" / "config.toml").write_text('trust_ref = "HEAD"\n')

    ci, head, receipt = _mallorys_pull_request(top, "2", trust_herself, "TASK-1: greet, and trust myself")
    assert (ci / ".ledger" / "config.toml").read_text() == 'trust_ref = "HEAD"\n'
    # Tags and a local branch named like the target branch, all at the candidate.
    git(ci, "tag", "origin/main", head)
    git(ci, "tag", "main", head)
    git(ci, "branch", "-f", "origin/main", head)
    # The config's "HEAD" is not read, and "origin/main" is the remote branch, not the tag
    # or the local branch of that name: the trust is main's, which refuses Mallory's key.
    for args in ((), ("--trust-ref", "origin/main"), ("--trust-ref", "refs/remotes/origin/main")):
        gated = run_cli("gate", head, "--json", *args, cwd=ci, env=NO_KEYS)
        assert gated.returncode == 1 and json.loads(gated.stdout)["receipt"] is None, (args, gated.stdout)
    # "main" is the local branch refs/heads/main, which this clone lacks: not the tag "main".
    local = run_cli("gate", head, "--trust-ref", "main", cwd=ci, env=NO_KEYS)
    assert local.returncode == 2 and "refs/heads/main" in local.stderr, local.stderr
    # With its remote branch gone, "origin/main" would be the tag; it is refused instead.
    git(ci, "update-ref", "-d", "refs/remotes/origin/main")
    gone = run_cli("gate", head, "--trust-ref", "origin/main", cwd=ci, env=NO_KEYS)
    assert gone.returncode == 2 and "refs/remotes/origin/main" in gone.stderr, gone.stderr
    # What those names would have trusted does pass the receipt: the refusals above matter.
    own = _gate_on_her_store(top, "2", ci, head, "--trust", str(ci / ".ledger" / "allowed_signers"))
    assert own.returncode == 0 and receipt in own.stdout, own.stdout


def test_no_trust_anywhere_is_refused_and_tofu_says_it_is_unsafe(world: tuple[Path, dict[str, str], str]) -> None:
    top, _, receipt = world
    clone = fresh_clone(top, "stranger")
    ok("receipts", "fetch", cwd=clone, env=NO_KEYS)
    git(clone, "update-ref", "-d", "refs/remotes/origin/main")
    refused = run_cli("gate", "HEAD", cwd=clone, env=NO_KEYS)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("ledger: error: no trust root") and refused.stderr.count("\n") == 1
    missing = run_cli("gate", "HEAD", "--trust-ref", "origin/nope", cwd=clone, env=NO_KEYS)
    assert missing.returncode == 2 and "names no commit" in missing.stderr
    # With the target branch gone, the auditing witness is named on the command line.
    witness = ("--auditing-witness", auditor_line(top))
    tofu = run_cli("gate", "HEAD", "--unsafe-trust-on-first-use", *witness, cwd=clone, env=NO_KEYS)
    assert tofu.returncode == 0 and "UNSAFE" in tofu.stderr and "UNSAFE trust on first use" in tofu.stdout
    both = run_cli("gate", "HEAD", "--unsafe-trust-on-first-use", "--trust", "x", cwd=clone, env=NO_KEYS)
    assert both.returncode == 2 and "contradict" in both.stderr


def test_the_gate_names_weakenings_waivers_and_stale_approvals(world: tuple[Path, dict[str, str], str]) -> None:
    top, env, _ = world
    dev = top / "dev"
    # An approval of an earlier candidate (stale), a goal changed by the admin (a weakening)
    # and a waiver: the receipt stays eligible, and the gate must say all three.
    ok("approve", "TASK-1", "--key", "alice", "--yes", "--input", "HEAD~1", cwd=dev, env=env)
    weaker = top / "weaker.toml"
    weaker.write_bytes(contract_bytes().replace(b'goal = "a test task"', b'goal = "a smaller task"'))
    ok(
        "contract",
        "set",
        "TASK-1",
        "--contract",
        str(weaker),
        "--key",
        "admin",
        "--reason",
        "scope cut",
        cwd=dev,
        env=env,
    )
    ok(
        "waive",
        "TASK-1",
        "tests",
        "--key",
        "admin",
        "--reason",
        "flaky runner",
        "--expires",
        "2099-01-01",
        cwd=dev,
        env=env,
    )
    receipt = ladder(dev, env, contract=weaker)
    verify_lines = ok("verify", receipt, cwd=dev, env=env).splitlines()
    gate_lines = ok("gate", "HEAD", cwd=dev, env=env).splitlines()
    assert gate_lines[0].endswith(receipt)
    for prefix in ("WEAKENING: ", "waiver in force: ", "stale (not counted): "):
        facts = [line.removeprefix(prefix) for line in verify_lines if line.startswith(prefix)]
        assert facts, (prefix, verify_lines)
        assert all(any(line.endswith(": " + fact) or line.endswith(fact) for line in gate_lines) for fact in facts), (
            prefix,
            gate_lines,
        )
    doc = json.loads(ok("gate", "HEAD", "--json", cwd=dev, env=env))
    assert any(n.startswith("WEAKENING: ") for n in doc["notices"])
    assert any(n.startswith("stale approval (not counted): ") for n in doc["notices"])


def test_an_unreachable_remote_is_one_line_naming_gits_complaint(world: tuple[Path, dict[str, str], str]) -> None:
    top, _, _ = world
    clone = fresh_clone(top, "lonely")
    res = run_cli("receipts", "fetch", "--remote", "nowhere", cwd=clone, env=NO_KEYS)
    assert res.returncode == 2 and res.stdout == "" and res.stderr.count("\n") == 1
    assert "cannot reach remote 'nowhere': fatal:" in res.stderr and "Traceback" not in res.stderr


def _bundle_bytes(repo: Path, receipt: str) -> bytes:
    ref = "refs/receipts/" + receipt.removeprefix("blake3:")
    return subprocess.run(["git", "show", ref + ":bundle.zip"], cwd=repo, capture_output=True, check=True).stdout


def _put_bundle(repo: Path, receipt: str, data: bytes) -> None:
    """Replace the bundle ref of ``receipt`` with ``data``, as anyone who can push refs could."""

    def run(args: list[str], given: bytes) -> str:
        return subprocess.run(args, cwd=repo, input=given, capture_output=True, check=True).stdout.decode().strip()

    blob = run(["git", "hash-object", "-w", "--stdin"], data)
    tree = run(["git", "mktree"], ("100644 blob %s\tbundle.zip\n" % blob).encode())
    commit = git(repo, "commit-tree", tree, "-m", "replaced")
    git(repo, "update-ref", "refs/receipts/" + receipt.removeprefix("blake3:"), commit)


def _manifest_naming(data: bytes, receipt: str) -> bytes:
    """The same bundle with only manifest.json's `receipt` changed."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as old, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            member = old.read(info)
            if info.filename == "manifest.json":
                doc = json.loads(member)
                doc["receipt"] = receipt
                member = json.dumps(doc).encode()
            new.writestr(info, member)
    return out.getvalue()


def _eligible_then_rejected(top: Path, env: dict[str, str]) -> str:
    """After the world's eligible receipt R1, a reviewer rejects and a newer receipt R2 records it."""
    dev = top / "dev"
    ok("reject", "TASK-1", "--key", "alice", "--reason", "breaks the build", "--yes", cwd=dev, env=env)
    newer = ok("seal", "TASK-1", "--key", "sealer", cwd=dev, env=env)
    audited_cosign(dev, env)
    ok("attach", newer, "--key", "sealer", cwd=dev, env=env)
    ok("receipts", "push", cwd=dev, env=env)
    return newer


@pytest.mark.parametrize("damage", ["ref-deleted", "byte-flipped", "manifest-names-the-older"])
def test_a_damaged_newer_rejection_never_lets_the_older_receipt_decide(
    world: tuple[Path, dict[str, str], str], damage: str
) -> None:
    """Issue 22, case 11: with R1 eligible and a newer R2 carrying a rejection, withholding or
    damaging R2's bundle must not turn the gate green on R1."""
    top, env, older = world
    newer = _eligible_then_rejected(top, env)
    clone = fresh_clone(top, "ci-" + damage)
    ok("receipts", "fetch", cwd=clone, env=NO_KEYS)
    honest = run_cli("gate", "HEAD", cwd=clone, env=NO_KEYS)
    assert honest.returncode == 1 and "newest receipt decides" in honest.stdout, honest.stdout
    data = _bundle_bytes(clone, newer)
    if damage == "ref-deleted":
        git(clone, "update-ref", "-d", "refs/receipts/" + newer.removeprefix("blake3:"))
    elif damage == "byte-flipped":
        at = len(data) // 2
        _put_bundle(clone, newer, data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    else:
        _put_bundle(clone, newer, _manifest_naming(data, older))
    gated = run_cli("gate", "HEAD", "--json", cwd=clone, env=NO_KEYS)
    doc = json.loads(gated.stdout)
    assert gated.returncode == 1 and doc["receipt"] is None, gated.stdout
    assert "cannot be verified" in doc["reasons"][0] and newer in " ".join(doc["reasons"]), doc["reasons"]
    assert run_cli("verify", "--commit", "HEAD", cwd=clone, env=NO_KEYS).returncode == 1


def test_a_bundle_verifies_the_receipt_its_entries_prove_not_the_manifests(
    world: tuple[Path, dict[str, str], str],
) -> None:
    """Issue 22, case 12: R2's bundle also holds R1's entry; a manifest edited to name R1
    must not make `verify --bundle` report R1 verified."""
    top, env, older = world
    newer = _eligible_then_rejected(top, env)
    dev = top / "dev"
    bundle = top / "r2.zip"
    ok("export", newer, "-o", str(bundle), cwd=dev, env=env)
    trust = ("--trust", str(dev / ".ledger" / "allowed_signers"))
    plain = run_cli("verify", "--bundle", str(bundle), "--json", *trust, cwd=dev, env=env)
    # Verified, and rejected by a person: exit 3, "verified but not merge-eligible".
    assert plain.returncode == 3 and json.loads(plain.stdout)["target"] == newer, plain.stdout
    bundle.write_bytes(_manifest_naming(bundle.read_bytes(), older))
    edited = run_cli("verify", "--bundle", str(bundle), "--json", *trust, cwd=dev, env=env)
    doc = json.loads(edited.stdout)
    assert edited.returncode == 1 and doc["target"] == newer, edited.stdout
    assert "bundle-member-altered" in {d["code"] for d in doc["defects"]}, doc["defects"]
    # Naming R1 explicitly is the caller's choice, and the edited manifest is still a defect.
    named = run_cli("verify", "--bundle", str(bundle), older, "--json", *trust, cwd=dev, env=env)
    assert named.returncode == 1 and json.loads(named.stdout)["target"] == older, named.stdout


def test_a_seal_key_holder_sealing_from_a_private_copy_is_refused_under_the_witness_policy(
    world: tuple[Path, dict[str, str], str],
) -> None:
    """Issue 22, case 4: the seal-key holder copies the ledger before a reviewer's rejection,
    seals an eligible receipt from the copy (every pointer in it is honest: the copy has no
    rejection to point at), attaches its bundle and pushes it. The bundle verifies by
    itself; the team's auditing witness, which audits the real ledger, never cosigns the
    copy's checkpoint, so a fresh clone's gate (and CI's gate auditing the real store)
    refuses it."""
    import shutil

    top, env, _ = world
    dev = top / "dev"
    private = top / "private-ledger"
    shutil.copytree(dev / ".ledger", private)
    ok("reject", "TASK-1", "--key", "alice", "--reason", "breaks the build", "--yes", cwd=dev, env=env)
    ok("seal", "TASK-1", "--key", "sealer", cwd=dev, env=env)
    audited_cosign(dev, env)  # the witness now holds the real ledger, rejection included

    mine = ("--dir", str(private))
    evil = ok(*mine, "seal", "TASK-1", "--key", "sealer", cwd=dev, env=env)
    with pytest.raises(AssertionError, match="you audited"):
        audited_cosign(dev, env, *mine)  # the auditing witness will not cosign the fork
    ok(*mine, "attach", evil, "--key", "sealer", cwd=dev, env=env)
    ok("receipts", "push", cwd=dev, env=env)

    # Without a witness policy the bundle verifies: only completeness is unproven.
    bundle = top / "evil.zip"
    bundle.write_bytes(_bundle_bytes(dev, evil))
    outside = top / "not-a-repo"
    outside.mkdir()
    trust = ("--trust", str(dev / ".ledger" / "allowed_signers"))
    alone = run_cli("verify", "--bundle", str(bundle), "--json", *trust, cwd=outside, env=NO_KEYS)
    doc = json.loads(alone.stdout)
    assert alone.returncode == 0 and doc["merge_eligible_derived"] is True, alone.stdout
    assert doc["completeness"] == "unproven" and any("completeness UNPROVEN" in w for w in doc["warnings"])
    witness = ("--auditing-witness", auditor_line(top))
    named = run_cli("verify", "--bundle", str(bundle), "--json", *trust, *witness, cwd=outside, env=NO_KEYS)
    assert named.returncode == 1 and [d["code"] for d in json.loads(named.stdout)["defects"]] == [
        "completeness-unproven"
    ]

    clone = fresh_clone(top, "ci-case-4")
    ok("receipts", "fetch", cwd=clone, env=NO_KEYS)
    gated = run_cli("gate", "HEAD", "--json", cwd=clone, env=NO_KEYS)
    doc = json.loads(gated.stdout)
    assert gated.returncode == 1 and doc["receipt"] is None, gated.stdout
    assert "completeness of task TASK-1 up to %s is unproven" % evil in doc["reasons"][0], doc["reasons"]
    assert run_cli("verify", "--commit", "HEAD", cwd=clone, env=NO_KEYS).returncode == 1
    # CI that reaches the real store audits it: the copy's receipt is not an entry of it.
    store = ("--dir", str(dev / ".ledger"))
    state = str(top / "ci-audit.json")
    audited = run_cli(*store, "gate", "HEAD", "--json", "--audit-state", state, cwd=clone, env=NO_KEYS)
    doc = json.loads(audited.stdout)
    assert audited.returncode == 1 and doc["receipt"] is None, audited.stdout
    assert "does not cover this receipt's entry" in doc["reasons"][0], doc["reasons"]
