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

from _common import demo_repo, filler, peak_command, seal_demo_receipt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import receipts as r
from ledger import Ledger, add_key

SIZES = (1_000, 10_000, 100_000, 1_000_000)
# Byte-compiled modules are cached as a user's install caches them (a shell that sets
# PYTHONDONTWRITEBYTECODE would make every cold start compile, a constant that hides growth).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
WALK_UPTO = 100_000  # the full walk at 1M takes a minute per run (its memory stays flat): measured up to here only


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


def _run(args: list[str], cwd: Path, codes: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """CPU seconds (user + system, its worker processes included) and peak RSS in MiB (of
    the main process) of one whole `ledger ARGS` process."""
    peak = cwd.parent / "peak.kib"
    cmd = peak_command(args, peak)
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in codes:
        raise SystemExit("%s exited %d: %s" % (" ".join(args), proc.returncode, err.decode()[-400:]))
    return usage.ru_utime + usage.ru_stime, int(peak.read_text()) / 1024


def _commands(d: Path) -> dict[str, list[str]]:
    base = ["--dir", str(d / "ledger")]
    receipt, trust = (d / "receipt").read_text(), (d / "trust").read_text()
    return {
        "verify (proof)": [*base, "verify", receipt, "--trust", trust, "--method", "proof"],
        "verify (walk)": [*base, "verify", receipt, "--trust", trust, "--method", "walk"],
        "export": [*base, "export", receipt, "-o", str(d / "bundle.zip")],
        "gate": [*base, "gate", "HEAD", "--trust", trust],
        "verify --chain": [*base, "verify", "--chain", "--trust", trust, "--save-state", str(d / "state.json")],
    }


def _warm(d: Path, repeat: int) -> dict[str, float]:
    """In one process, the same receipt verified by proof and by walking the chain."""
    code = (
        "import sys, time\n"
        "from verify import LedgerSource, TrustRoot, verify_receipt\n"
        "src = LedgerSource.open(__import__('pathlib').Path(sys.argv[1]))\n"
        "trust = TrustRoot(frozenset({sys.argv[3]}), 'bench')\n"
        "out = {}\n"
        "for method, n in (('proof', 20), ('walk', 1)):\n"
        "    best = None\n"
        "    for _ in range(%d):\n"
        "        t = time.process_time()\n"
        "        for _ in range(n):\n"
        "            assert verify_receipt(src, sys.argv[2], trust, method=method).ok\n"
        "        took = (time.process_time() - t) / n\n"
        "        best = took if best is None else min(best, took)\n"
        "    out[method] = best\n"
        "print(out['proof'], out['walk'])\n" % repeat
    )
    got = subprocess.run(
        [sys.executable, "-c", code, str(d / "ledger"), (d / "receipt").read_text(), (d / "trust").read_text()],
        env=ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    proof, walk = float(got[0]), float(got[1])
    return {"proof_ms": round(proof * 1000, 2), "walk_ms": round(walk * 1000, 1), "walk / proof": round(walk / proof)}


def _resume(d: Path, new: int, repeat: int) -> dict[str, float]:
    """--resume after ``new`` entries appended (and a checkpoint), against a full audit of
    the same ledger; a copy of the state is resumed from each time."""
    keys = {n: (d.parent / "keys" / n).read_bytes() for n in ("ci", "sealer")}
    signers = {
        n: r.Ed25519Signer(serialization.load_ssh_private_key(k, None))  # type: ignore[arg-type]
        for n, k in keys.items()
    }
    ledger = Ledger.open(d / "ledger")
    filler(ledger, signers["ci"], new)
    ledger.checkpoint(signers["sealer"])
    ledger.close()
    trust = (d / "trust").read_text()
    base = ["--dir", str(d / "ledger"), "verify", "--chain", "--trust", trust]
    full, resumed = [], []
    for _ in range(repeat):
        shutil.copy(d / "state.json", d / "state-copy.json")
        resumed.append(_run([*base, "--resume", str(d / "state-copy.json")], d / "repo")[0])
        full.append(_run(base, d / "repo")[0])
    return {
        "resume_cpu_s": round(statistics.median(resumed), 3),
        "full_cpu_s": round(statistics.median(full), 3),
        "resume / full": round(statistics.median(resumed) / statistics.median(full), 4),
    }


def measure(out: Path, repeat: int = 3, sizes: tuple[int, ...] = SIZES) -> dict[str, object]:
    rows: dict[str, dict[str, object]] = {}
    for size in sizes:
        d = out / str(size)
        if not d.is_dir():
            continue
        cmds = _commands(d)
        if size > WALK_UPTO:
            del cmds["verify (walk)"]
        # attach once so that the gate has a receipt in git to check
        _run(["--dir", str(d / "ledger"), "attach", (d / "receipt").read_text()], d / "repo")
        _run(["--help"], d / "repo")  # compiles what is not cached yet
        cpu: dict[str, list[float]] = {name: [] for name in (*cmds, "python -c pass")}
        rss: dict[str, float] = {}
        for _ in range(repeat):  # interleaved: every command sees the same machine
            for name, cmd in (*cmds.items(), ("python -c pass", ["--nothing"])):
                # the gate may block: the receipt it decides by is what it is, and costs the same
                seconds, peak = _run(cmd, d / "repo", (0, 1) if name == "gate" else (0,))
                cpu[name].append(seconds)
                rss[name] = max(rss.get(name, 0.0), peak)
        rows[str(size)] = {
            name: {"cpu_s": round(statistics.median(v), 3), "peak_mib": round(rss[name], 1)} for name, v in cpu.items()
        }
        if size == 100_000:
            rows[str(size)]["warm"] = _warm(d, repeat)
        if size == SIZES[-1]:
            rows[str(size)]["resume after 1000"] = _resume(d, 1000, repeat)
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
        only = tuple(int(n) for n in sys.argv[3:]) or SIZES
        print(json.dumps(measure(where, sizes=only), indent=1))
    print("%.0f s" % (time.perf_counter() - started), file=sys.stderr)
