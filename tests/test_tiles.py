"""The log as C2SP tlog-tiles (issue 27): tile paths and widths as the spec gives them,
the root recomputed from tiles alone, `ledger publish tiles` writing each tile once and
the checkpoint never backwards, and Go's `golang.org/x/mod/sumdb` (code nobody here
wrote) reading our folder with the verifier key `ledger checkpoint vkey` prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, SIGNERS, build_sample, other_records, run_cli
from ledger import DirTileStore, Ledger, TileConflict, add_key, publish_tiles
from verify import LedgerSource

VECTORS = Path(__file__).parent / "vectors" / "tiles"
GO_SOURCE = Path(__file__).parent / "go" / "tilecheck"
GO_PATH = Path("/usr/share/gocode")  # Debian's golang-golang-x-mod-dev


def _grow(root: Path, n: int, start: int = 0) -> None:
    """n more signed entries, then a checkpoint over them."""
    ledger = Ledger.open(root)
    ledger.append_many(other_records("TILES-1", n, start=start), SIGNERS["ci"])
    ledger.checkpoint(SIGNERS["sealer"])
    ledger.close()


def _old_and_new(tmp_path: Path, n: int) -> tuple[Path, Path]:
    """A ledger of n entries copied aside (old), then grown by n more (new)."""
    s = build_sample(tmp_path)
    _grow(s.root, n)
    old = tmp_path / "old"
    shutil.copytree(s.root, old)
    _grow(s.root, n, start=n)
    return old, s.root


def _publish(root: Path, folder: Path) -> None:
    with LedgerSource.open(root) as source:
        publish_tiles(source, DirTileStore(folder))


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _vkey(root: Path) -> str:
    sealer = r.public_key_line(SIGNERS["sealer"].public_key_blob)
    done = run_cli("--dir", str(root), "checkpoint", "vkey", "--log-key", sealer)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# -- the layout -----------------------------------------------------------------------------------


def test_tile_paths_and_widths_are_the_specs() -> None:
    cases = json.loads((VECTORS / "paths.json").read_text())
    for case in cases["paths"]:
        tile = r.Tile(case["level"], case["index"], case["width"])
        assert tile.path() == case["path"] and r.Tile.parse(case["path"]) == tile
    for bad in cases["not_paths"]:
        with pytest.raises(r.FormatError):
            r.Tile.parse(bad)
    for case in cases["sizes"]:
        placed = [(t.level, t.width) for t in r.tiles_for_size(case["size"]) if t.level is not None]
        assert placed.count((0, r.TILE_WIDTH)) == case["full_level_0"]
        assert [p for p in placed if p != (0, r.TILE_WIDTH)] == [tuple(p) for p in case["others"]]


def test_the_root_from_tiles_is_the_trees_at_every_edge() -> None:
    leaves = [r.leaf_hash(b"entry %d" % i) for i in range(66_000)]
    for size in (1, 2, 255, 256, 257, 511, 512, 513, 65_535, 65_536, 65_537, 66_000):
        tree = r.MemoryTree(leaves[:size])
        tiles = {t: r.tile_bytes(t, tree.node) for t in r.tiles_for_size(size) if t.level is not None}
        assert r.root_from_tiles(size, tiles.__getitem__) == r.tree_root(tree, size), size
    short = {t: data[:-1] for t, data in tiles.items()}
    with pytest.raises(r.FormatError, match="holds"):
        r.root_from_tiles(66_000, short.__getitem__)


def test_entry_bundles_round_trip_and_refuse_what_they_cannot_hold() -> None:
    entries = (b"", b"a", bytes(300), bytes(0xFFFF))
    assert r.parse_entry_bundle(r.entry_bundle(entries), 4) == entries
    with pytest.raises(r.FormatError, match="does not fit"):
        r.entry_bundle([bytes(0x10000)])
    with pytest.raises(r.FormatError, match="width 3"):
        r.parse_entry_bundle(r.entry_bundle(entries), 3)
    with pytest.raises(r.FormatError, match="inside an entry"):
        r.parse_entry_bundle(r.entry_bundle(entries)[:-1], 4)


def test_a_verifier_key_round_trips_and_its_id_is_checked() -> None:
    key = r.parse_public_key_blob(SIGNERS["sealer"].public_key_blob)
    text = r.verifier_key("example.com/log", key)
    assert r.parse_verifier_key(text) == ("example.com/log", key, 0x01)
    witness = r.verifier_key("witness.example/w1", key, 0x04)
    assert r.parse_verifier_key(witness) == ("witness.example/w1", key, 0x04) and witness != text
    _, key_id, b64 = text.split("+", 2)
    with pytest.raises(r.FormatError, match="id does not match"):
        r.parse_verifier_key("%s+%s+%s" % ("example.com/other", key_id, b64))


# -- publishing -----------------------------------------------------------------------------------


def test_publish_writes_each_tile_once_and_reports_an_altered_one(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _grow(s.root, 1000)
    folder = tmp_path / "tiles"
    cli = run_cli("--dir", str(s.root), "publish", "tiles", "--to", str(folder))
    assert cli.returncode == 0, cli.stderr
    first = _files(folder)
    assert "tile/0/000" in first and "tile/entries/000" in first
    size = r.parse_checkpoint(r.parse_note(first["checkpoint"]).text).size
    assert {name for name in first if name.startswith("tile/")} == {t.path() for t in r.tiles_for_size(size)}
    again = run_cli("--dir", str(s.root), "publish", "tiles", "--to", str(folder))
    assert "0 tiles written" in again.stdout and _files(folder) == first
    audit = run_cli("verify", "--tiles", str(folder), "--log-vkey", _vkey(s.root))
    assert audit.returncode == 0 and audit.stdout.startswith(
        "VERIFIED: %d tiles at size %d" % (len(r.tiles_for_size(size)), size)
    )
    no_key = run_cli("verify", "--tiles", str(folder))
    assert no_key.returncode == 2 and "--log-vkey" in no_key.stderr
    other_key = r.verifier_key(_vkey(s.root).split("+")[0], r.parse_public_key_blob(SIGNERS["alice"].public_key_blob))
    forged = run_cli("verify", "--tiles", str(folder), "--log-vkey", other_key, "--json")
    assert forged.returncode == 1 and [d["code"] for d in json.loads(forged.stdout)["defects"]] == [
        "checkpoint-signature"
    ]
    # The log grows: only the new tiles are written, every full tile is left as it was.
    _grow(s.root, 300, start=1000)
    grown = run_cli("--dir", str(s.root), "publish", "tiles", "--to", str(folder))
    assert grown.returncode == 0, grown.stderr
    after = _files(folder)
    assert all(after[name] == data for name, data in first.items() if name != "checkpoint")
    new_size = r.parse_checkpoint(r.parse_note(after["checkpoint"]).text).size
    written = int(grown.stdout.split(": ")[1].split(" tiles written")[0])
    assert written == len(set(t.path() for t in r.tiles_for_size(new_size)) - set(first))
    # A full tile changed in the folder: the next publish names it and changes nothing.
    altered = folder / "tile" / "0" / "001"
    data = bytearray(altered.read_bytes())
    data[5] ^= 1
    altered.write_bytes(bytes(data))
    before = _files(folder)
    refused = run_cli("--dir", str(s.root), "publish", "tiles", "--to", str(folder))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    audit = run_cli("verify", "--tiles", str(folder), "--log-vkey", _vkey(s.root), "--json")
    assert audit.returncode == 1, audit.stdout
    assert {d["code"] for d in json.loads(audit.stdout)["defects"]} == {"tile-altered"}
    assert "tile/0/001" in audit.stdout
    assert "published tile tile/0/001 at %s differs from the ledger" % folder in refused.stderr
    assert _files(folder) == before


def test_the_checkpoint_never_moves_backwards_nor_to_a_fork(tmp_path: Path) -> None:
    old, new = _old_and_new(tmp_path, 20)
    folder = tmp_path / "tiles"
    _publish(new, folder)
    published = (folder / "checkpoint").read_bytes()
    with LedgerSource.open(old) as source, pytest.raises(Exception, match="would move it backwards"):
        publish_tiles(source, DirTileStore(folder))
    # A fork of the same log: the old copy grows another way to the same size.
    _grow(old, 20, start=5000)
    with LedgerSource.open(old) as source, pytest.raises(TileConflict):
        publish_tiles(source, DirTileStore(folder))
    assert (folder / "checkpoint").read_bytes() == published


def test_two_publishers_at_once_leave_the_larger_checkpoint(tmp_path: Path) -> None:
    old, new = _old_and_new(tmp_path, 300)
    folder = tmp_path / "tiles"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ledger", "--dir", str(root), "publish", "tiles", "--to", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for root in (old, new)
    ]
    outcomes = [(p.returncode, err) for p in procs for _, err in [p.communicate()]]
    # The newer one always lands; the older one lands first or is refused for going backwards.
    assert outcomes[1][0] == 0, outcomes
    assert outcomes[0][0] == 0 or "would move it backwards" in outcomes[0][1], outcomes
    with LedgerSource.open(new) as source:
        newest = source.newest_checkpoint()
    assert newest is not None and (folder / "checkpoint").read_text() == newest[1]


def test_publish_and_vkey_refuse_bad_input_in_one_line(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    no_checkpoint = run_cli("--dir", str(s.root), "publish", "tiles", "--to", str(tmp_path / "t"))
    assert no_checkpoint.returncode == 2 and "no checkpoint to publish" in no_checkpoint.stderr
    _grow(s.root, 3)
    wrong = run_cli(
        "--dir", str(s.root), "checkpoint", "vkey", "--log-key", r.public_key_line(SIGNERS["alice"].public_key_blob)
    )
    assert (
        wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "did not sign the newest checkpoint" in wrong.stderr
    )
    vkey = _vkey(s.root)
    assert vkey.startswith(Ledger.open(s.root).origin() + "+")


# -- read by Go's sumdb/tlog ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tilecheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("go") is None or not (GO_PATH / "src/golang.org/x/mod/sumdb/tlog").is_dir():
        pytest.skip("Go and Debian's golang-golang-x-mod-dev are not installed (.ci/run installs them)")
    out = tmp_path_factory.mktemp("go") / "tilecheck"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GO_PATH), "GOCACHE": str(out.parent / "cache")}
    subprocess.run(["go", "build", "-o", str(out), "."], cwd=GO_SOURCE, env=env, check=True)
    return out


def test_go_reads_our_tiles_and_proves_every_entry(tilecheck: Path, tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _grow(s.root, 1000)
    folder = tmp_path / "tiles"
    _publish(s.root, folder)
    vkey = _vkey(s.root)
    ok = subprocess.run([str(tilecheck), str(folder), vkey], capture_output=True, text=True)
    size = r.parse_checkpoint(r.parse_note((folder / "checkpoint").read_text()).text).size
    assert ok.returncode == 0 and ok.stdout.startswith("ok: %d entries proven" % size), ok.stderr
    # One flipped byte in a hash tile, or a key that did not sign: Go refuses.
    tile = folder / "tile" / "0" / "002"
    data = bytearray(tile.read_bytes())
    data[40] ^= 1
    tile.write_bytes(bytes(data))
    bad = subprocess.run([str(tilecheck), str(folder), vkey], capture_output=True, text=True)
    assert bad.returncode == 1 and "tilecheck:" in bad.stderr
    tile.write_bytes(bytes(data[:40]) + bytes([data[40] ^ 1]) + bytes(data[41:]))
    other = r.verifier_key(vkey.split("+")[0], r.parse_public_key_blob(SIGNERS["alice"].public_key_blob))
    unsigned = subprocess.run([str(tilecheck), str(folder), other], capture_output=True, text=True)
    assert unsigned.returncode == 1 and "checkpoint" in unsigned.stderr


# -- published to S3 (moto's server mode: a real S3-compatible server on 127.0.0.1) ---------------


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, dict[str, str]]]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": "http://%s:%d" % (host, port),
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket="team-log")
    # Served to anyone, as a team that publishes its log configures the bucket.
    public = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::team-log/*"}
    client.put_bucket_policy(Bucket="team-log", Policy=json.dumps({"Version": "2012-10-17", "Statement": [public]}))
    try:
        yield client, env
    finally:
        server.stop()


def _objects(client: Any) -> dict[str, tuple[str, bytes]]:
    listed = client.list_objects_v2(Bucket="team-log").get("Contents", [])
    return {o["Key"]: (o["ETag"], client.get_object(Bucket="team-log", Key=o["Key"])["Body"].read()) for o in listed}


def test_publish_to_s3_writes_each_tile_once_and_reports_an_altered_one(
    bucket: tuple[Any, dict[str, str]], tmp_path: Path
) -> None:
    client, env = bucket
    s = build_sample(tmp_path)
    _grow(s.root, 600)
    args = ("--dir", str(s.root), "publish", "tiles", "--to", "s3://team-log/logs/a")
    first = run_cli(*args, env=env)
    assert first.returncode == 0, first.stderr
    published = _objects(client)
    size = r.parse_checkpoint(r.parse_note(published["logs/a/checkpoint"][1]).text).size
    assert set(published) == {"logs/a/" + t.path() for t in r.tiles_for_size(size)} | {"logs/a/checkpoint"}
    again = run_cli(*args, env=env)
    assert again.returncode == 0 and ": 0 tiles written" in again.stdout
    assert _objects(client) == published  # same ETags: nothing rewritten
    # Full tiles are served as immutable, the checkpoint as never cached.
    head = client.head_object(Bucket="team-log", Key="logs/a/tile/0/000")
    assert head["CacheControl"].endswith("immutable") and head["ContentType"] == "application/octet-stream"
    # Someone rewrites a full tile in the bucket: the next publish names it, changes nothing.
    data = bytearray(published["logs/a/tile/0/001"][1])
    data[0] ^= 1
    client.put_object(Bucket="team-log", Key="logs/a/tile/0/001", Body=bytes(data))
    before = _objects(client)
    refused = run_cli(*args, env=env)
    assert refused.returncode == 2 and "published tile tile/0/001 at s3://team-log/logs/a differs" in refused.stderr
    assert _objects(client) == before
    # An auditor reads the bucket over plain HTTP, as a static host serves it.
    prefix = "%s/team-log/logs/a" % env["AWS_ENDPOINT_URL"]
    audit = run_cli("verify", "--tiles", prefix, "--log-vkey", _vkey(s.root), "--json")
    assert audit.returncode == 1 and "tile/0/001" in audit.stdout, audit.stdout
    client.put_object(Bucket="team-log", Key="logs/a/tile/0/001", Body=published["logs/a/tile/0/001"][1])
    assert run_cli("verify", "--tiles", prefix, "--log-vkey", _vkey(s.root)).returncode == 0


def test_two_publishers_to_one_bucket_never_move_the_checkpoint_backwards(
    bucket: tuple[Any, dict[str, str]], tmp_path: Path
) -> None:
    client, env = bucket
    old, new = _old_and_new(tmp_path, 300)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ledger", "--dir", str(root), "publish", "tiles", "--to", "s3://team-log/log"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for root in (old, new, old, new)
    ]
    outcomes = [(p.returncode, err) for p in procs for _, err in [p.communicate()]]
    assert all(code == 0 or "would move it backwards" in err for code, err in outcomes), outcomes
    assert outcomes[1][0] == 0 and outcomes[3][0] == 0, outcomes
    with LedgerSource.open(new) as source:
        newest = source.newest_checkpoint()
    body = client.get_object(Bucket="team-log", Key="log/checkpoint")["Body"].read().decode()
    assert newest is not None and body == newest[1]


def test_a_receipt_is_proven_into_the_published_log(tmp_path: Path) -> None:
    s = build_sample(tmp_path)
    _grow(s.root, 300)
    fork = tmp_path / "fork"
    shutil.copytree(s.root, fork)
    folder = tmp_path / "tiles"
    _publish(s.root, folder)
    vkey = _vkey(s.root)
    args = ("--dir", str(s.root), "verify", s.receipt, "--trust", ADMIN_ID, "--tiles", str(folder), "--log-vkey", vkey)
    published = run_cli(*args)
    assert published.returncode == 0, published.stdout
    stranger = r.verifier_key(vkey.split("+")[0], r.parse_public_key_blob(SIGNERS["alice"].public_key_blob))
    unsigned = run_cli(*args[:-1], stranger, "--json")
    assert unsigned.returncode == 1 and [d["code"] for d in json.loads(unsigned.stdout)["defects"]] == ["not-published"]
    bundle = tmp_path / "b.zip"
    assert run_cli("--dir", str(s.root), "export", s.receipt, "-o", str(bundle)).returncode == 0
    offline = run_cli(
        "verify", "--bundle", str(bundle), "--trust", ADMIN_ID, "--tiles", str(folder), "--log-vkey", vkey
    )
    assert offline.returncode == 0, offline.stdout
    # The ledger moves on without publishing: its newest checkpoint is not in the public log.
    _grow(s.root, 10, start=300)
    late = run_cli(*args, "--json")
    assert late.returncode == 1 and [d["code"] for d in json.loads(late.stdout)["defects"]] == ["not-published"]
    # The public log shows another history of the same length and more: a split view.
    _grow(fork, 40, start=9000)
    other = tmp_path / "other-tiles"
    _publish(fork, other)
    split = run_cli(*args[:-4], "--tiles", str(other), "--log-vkey", vkey, "--json")
    assert split.returncode == 1 and [d["code"] for d in json.loads(split.stdout)["defects"]] == ["split-view"]


def test_a_log_named_by_its_url_is_read_by_go_and_verifies(tilecheck: Path, tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    ledger = Ledger.create(root, SIGNERS["admin"], "admin", origin="logs.example.com/team-a")
    for name, role in (("ci", r.Role.DETERMINISTIC), ("sealer", r.Role.SEAL)):
        add_key(ledger, SIGNERS["admin"], name, [role], SIGNERS[name].public_key_blob)
    ledger.close()
    _grow(root, 300)
    folder = tmp_path / "tiles"
    _publish(root, folder)
    vkey = _vkey(root)
    assert vkey.startswith("logs.example.com/team-a+")
    assert (
        r.parse_checkpoint(r.parse_note((folder / "checkpoint").read_text()).text).origin == "logs.example.com/team-a"
    )
    go = subprocess.run([str(tilecheck), str(folder), vkey], capture_output=True, text=True)
    assert go.returncode == 0 and go.stdout.endswith("of logs.example.com/team-a\n"), go.stderr
    audit = run_cli("--dir", str(root), "verify", "--chain", "--trust", ADMIN_ID)
    assert audit.returncode == 0, audit.stdout
    # The origin is signed in the genesis: an unnamed ledger's genesis bytes stay as they were.
    with LedgerSource.open(root) as source:
        genesis = source.by_seq(0)
        assert genesis is not None
        assert r.decode_as(r.Genesis, genesis.body).origin == "logs.example.com/team-a"
    keys = tmp_path / "keys"
    bad = run_cli(
        "--dir",
        str(tmp_path / "bad"),
        "init",
        "--origin",
        "logs example",
        cwd=tmp_path,
        env={"RECEIPT_LEDGER_KEYS": str(keys)},
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no spaces" in bad.stderr
    assert not (tmp_path / "bad").exists() and not keys.exists()  # nothing written


def test_a_tiles_audit_keeps_what_the_auditor_saw(tmp_path: Path) -> None:
    # Issue 47: `verify --tiles` alone ignored --since, --witness-quorum and --policy: a
    # published log rolled back from a kept size was VERIFIED. Now it is held to them.
    old, new = _old_and_new(tmp_path, 300)
    kept_small, kept_large = tmp_path / "small.checkpoint", tmp_path / "large.checkpoint"
    with LedgerSource.open(old) as source:
        kept_small.write_text(source.checkpoints()[-1][1])
    with LedgerSource.open(new) as source:
        kept_large.write_text(source.checkpoints()[-1][1])
    grown, rolled_back = tmp_path / "grown", tmp_path / "rolled-back"
    _publish(new, grown)
    _publish(old, rolled_back)
    vkey = ("--log-vkey", _vkey(new))

    def codes(folder: Path, *args: str) -> tuple[int, list[str]]:
        done = run_cli("verify", "--tiles", str(folder), *vkey, *args, "--json")
        assert "Traceback" not in done.stderr
        return done.returncode, [d["code"] for d in json.loads(done.stdout)["defects"]] if done.stdout else []

    assert codes(grown, "--since", str(kept_small)) == (0, [])  # grew from what was kept
    assert codes(rolled_back, "--since", str(kept_large)) == (1, ["history-rewritten"])
    # A fork: the old ledger grown differently, published; it does not hold the kept root.
    forked = tmp_path / "forked"
    shutil.copytree(old, tmp_path / "fork-ledger")
    _grow(tmp_path / "fork-ledger", 300, start=5000)
    _publish(tmp_path / "fork-ledger", forked)
    assert codes(forked, "--since", str(kept_large)) == (1, ["split-view"])
    # The witnesses asked for, none cosigned.
    witness = "w.example/w1 " + r.public_key_line(SIGNERS["bob"].public_key_blob)
    assert codes(grown, "--witness", witness, "--witness-quorum", "1") == (1, ["witness-quorum"])
    # What is no checkpoint is bad input, in one line.
    bad = run_cli("verify", "--tiles", str(grown), *vkey, "--since", str(tmp_path / "small.checkpoint") + "x")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    junk = tmp_path / "junk.checkpoint"
    junk.write_text("hello\n")
    refused = run_cli("verify", "--tiles", str(grown), *vkey, "--since", str(junk))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


def test_a_missing_entry_bundle_is_named(tmp_path: Path) -> None:
    # Issue 47: after a partial publish the audit must name the entry bundle that is not there.
    s = build_sample(tmp_path)
    _grow(s.root, 600)
    folder = tmp_path / "tiles"
    _publish(s.root, folder)
    (folder / "tile" / "entries" / "001").unlink()
    audit = run_cli("verify", "--tiles", str(folder), "--log-vkey", _vkey(s.root), "--json")
    assert audit.returncode == 1, audit.stdout
    (defect,) = json.loads(audit.stdout)["defects"]
    assert defect["code"] == "tile-missing" and "tile/entries/001" in defect["message"]
