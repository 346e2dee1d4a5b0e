"""How verification scales with the ledger (issue 15): cold `ledger verify HASH` (by proof,
and by walking the chain where that finishes in reasonable time), `ledger export`,
`ledger gate`, `ledger verify --chain` and `--resume`, on ledgers of 1k, 10k, 100k and
1M entries with one sealed three-tier receipt near the end of each.

Every figure is a whole process (CPU time user+system, peak RSS from wait4), repeated and
interleaved with `python -c pass`, and printed as a ratio: against the same command at
1k entries, against `python -c pass`, or against the full audit. Nothing here is a test.

  python bench/scaling.py build DIR     # grows one ledger, copying it at each size (slow: 1M appends)
  python bench/scaling.py measure DIR   # the table
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import demo_repo, filler, seal_demo_receipt  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

import receipts as r  # noqa: E402
from ledger import Ledger, add_key  # noqa: E402

SIZES = (1_000, 10_000, 100_000, 1_000_000)
WALK_UPTO = 100_000  # the full walk at 1M takes minutes and gigabytes: measured up to here only
LEDGER = [sys.executable, "-m", "ledger"]


def build(out: Path) -> None:
    out.mkdir(parents=True)
    keys = {n: Ed25519PrivateKey.generate() for n in ("admin", "ci", "judge", "alice", "sealer")}
    signers = {n: r.Ed25519Signer(k) for n, k in keys.items()}
    work = out / "work"
    ledger = Ledger.create(work / "ledger", signers["admin"], "admin")
    for name, role in (("ci", r.Role.DETERMINISTIC), ("judge", r.Role.JUDGE), ("alice", r.Role.HUMAN)):
        add_key(ledger, signers["admin"], name, [role], signers[name].public_key_blob)
    add_key(ledger, signers["admin"], "sealer", [r.Role.SEAL], signers["sealer"].public_key_blob)
    (out / "keys").mkdir()
    for name, key in keys.items():
        (out / "keys" / name).write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            )
        )
    repo = demo_repo(work / "repo")
    for size in SIZES:
        filler(ledger, signers["ci"], size - 8 - ledger.reader.count())
        sealed = seal_demo_receipt(ledger, signers, repo)
        ledger.checkpoint(signers["sealer"])
        ledger.close()
        shutil.copytree(work, out / str(size), symlinks=True)
        (out / str(size) / "receipt").write_text(str(sealed.body_hash))
        (out / str(size) / "trust").write_text(r.fingerprint(signers["admin"].public_key_blob))
        print("built %d entries" % (size,), file=sys.stderr, flush=True)
        ledger = Ledger.open(work / "ledger")
    ledger.close()


def _run(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS in MiB of one whole process."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        raise SystemExit("%s exited %d: %s" % (" ".join(cmd), proc.returncode, err.decode()[-400:]))
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _commands(d: Path) -> dict[str, list[str]]:
    base = [*LEDGER, "--dir", str(d / "ledger")]
    receipt, trust = (d / "receipt").read_text(), (d / "trust").read_text()
    return {
        "verify (proof)": [*base, "verify", receipt, "--trust", trust, "--method", "proof"],
        "verify (walk)": [*base, "verify", receipt, "--trust", trust, "--method", "walk"],
        "export": [*base, "export", receipt, "-o", str(d / "bundle.zip")],
        "gate": [*base, "gate", "HEAD", "--trust", trust],
    }


def measure(out: Path, repeat: int = 3) -> dict[str, object]:
    rows: dict[str, dict[str, object]] = {}
    for size in SIZES:
        d = out / str(size)
        if not d.is_dir():
            continue
        cmds = _commands(d)
        if size > WALK_UPTO:
            del cmds["verify (walk)"]
        # attach once so that the gate has a receipt in git to check
        _run([*LEDGER, "--dir", str(d / "ledger"), "attach", (d / "receipt").read_text()], d / "repo")
        cpu: dict[str, list[float]] = {name: [] for name in (*cmds, "python -c pass")}
        rss: dict[str, float] = {}
        for _ in range(repeat):  # interleaved: every command sees the same machine
            for name, cmd in (*cmds.items(), ("python -c pass", [sys.executable, "-c", "pass"])):
                seconds, peak = _run(cmd, d / "repo")
                cpu[name].append(seconds)
                rss[name] = max(rss.get(name, 0.0), peak)
        rows[str(size)] = {
            name: {"cpu_s": round(statistics.median(v), 3), "peak_mib": round(rss[name], 1)} for name, v in cpu.items()
        }
        print(json.dumps({size: rows[str(size)]}), file=sys.stderr, flush=True)
    ratios = {}
    if "1000" in rows and "1000000" in rows:
        small, large = rows["1000"], rows["1000000"]
        for name in ("verify (proof)", "export", "gate"):
            ratios["%s 1M / 1k" % name] = round(large[name]["cpu_s"] / small[name]["cpu_s"], 2)  # type: ignore[index]
    return {"machine": os.uname().nodename, "load": os.getloadavg(), "rows": rows, "ratios": ratios}


if __name__ == "__main__":
    what, where = sys.argv[1], Path(sys.argv[2])
    started = time.perf_counter()
    if what == "build":
        build(where)
    else:
        print(json.dumps(measure(where), indent=1))
    print("%.0f s" % (time.perf_counter() - started), file=sys.stderr)
