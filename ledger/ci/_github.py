"""The GitHub Action's entry point (`ledger ci github`, called by the root action.yml).

It reads what the runner provides (``GITHUB_EVENT_NAME``, ``GITHUB_EVENT_PATH``,
``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``, ``GITHUB_API_URL``, ``GITHUB_REPOSITORY``)
and the action's inputs (``LEDGER_*``), then: fetches the receipt refs and the target
branch (checkout brings neither), writes the keys it was given with mode 0600 and removes
them afterwards, runs the tiers asked for, writes the receipt table to the job summary,
annotates failing file checks, keeps one pull-request comment up to date, and gates.

The tiers run as `ledger` subprocesses, exactly the commands a person would type; the
gate, the summary and the comment are library calls. Only the GitHub REST API is
remote, and only with the token and API URL the runner gives.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from receipts import ReceiptsError, Signer, parse_contract
from verify import Result, Source, Transparency, Trust, verify_receipt
from verify.postgres import redact_url

from .._config import open_source, shared_store
from .._errors import InputError, LedgerError
from .._escape import comment_text, markdown_text
from .._files import write_atomic
from .._git import run_git
from .._layout import DEFAULT_TASK_PATTERN, contract_path, find_task, task_pattern
from ..git._notes import open_bundle
from ..git._sync import fetch_receipts, push_receipts
from ..keys._key_files import load_signer
from ..keys._trust import branch_store, resolve_auditors, resolve_trust
from ..ladder._evidence import blob_tail, last_lines
from ..store._ledger import Ledger
from ..views._render import pr_comment
from ._attest import Attestation, attest_kind, prepare_attestation
from ._gate import GateResult, gate
from ._lines import gate_lines

__all__ = [
    "STEPS",
    "COMMENT_MARKER",
    "GithubEvent",
    "GithubApi",
    "ActionReport",
    "parse_event",
    "task_from",
    "annotation",
    "run_action",
]

STEPS = ("check", "judge", "seal", "gate")
# Events whose commit is gated, never laddered, under `run: auto`; their task comes from
# the commit's title (the merged pull request's), never from a branch name.
_GATE_ONLY = ("merge_group", "push")
COMMENT_MARKER = "<!-- receipt-ledger:comment -->"
_FILE_CHECKS = ("path_exists", "file_contains", "schema_valid", "hash_stable")
# The key names the action writes; each tier signs with its own role's key.
KEY_INPUTS = {"deterministic": "ci", "judge": "judge", "seal": "sealer"}


@dataclass(frozen=True, slots=True)
class GithubEvent:
    """What the action needs from the event payload."""

    name: str
    head_sha: str
    base_ref: str  # the target branch, without refs/heads/
    head_ref: str = ""
    number: int | None = None  # the pull request, when there is one
    title: str = ""
    before: str = ""  # a push's: the branch's commit before it, whose pin judges it


def parse_event(name: str, payload: Mapping[str, Any]) -> GithubEvent:
    """The fields of a ``pull_request`` (or ``pull_request_review``: a review submitted
    after the reviewers' approvals reruns the ladder), ``merge_group`` or ``push`` event
    (`InputError` otherwise). A push is gated on the branch it landed on, under the pin
    that branch held before it (``before``): the pushed commit is the candidate, and a
    candidate never supplies its own trust.
    """
    try:
        if name in ("pull_request", "pull_request_target", "pull_request_review"):
            pr = payload["pull_request"]
            return GithubEvent(
                name,
                str(pr["head"]["sha"]),
                str(pr["base"]["ref"]),
                str(pr["head"]["ref"]),
                int(pr["number"]),
                str(pr.get("title") or ""),
            )
        if name == "merge_group":
            group = payload["merge_group"]
            head_ref = str(group["head_ref"])
            number = re.search(r"/pr-([0-9]+)-", head_ref)
            return GithubEvent(
                name,
                str(group["head_sha"]),
                str(group["base_ref"]).removeprefix("refs/heads/"),
                head_ref.removeprefix("refs/heads/"),
                None,
                str((group.get("head_commit") or {}).get("message") or "").split("\n", 1)[0]
                + (" (#%s)" % number.group(1) if number else ""),
            )
        if name == "push":
            ref = str(payload["ref"])
            if not ref.startswith("refs/heads/"):
                raise InputError("the action gates pushes to a branch, not to %s" % ref)
            branch = ref.removeprefix("refs/heads/")
            message = str((payload.get("head_commit") or {}).get("message") or "")
            title = message.split("\n", 1)[0]
            return GithubEvent(name, str(payload["after"]), branch, branch, None, title, str(payload["before"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError("the %s event payload lacks %s" % (name, exc)) from None
    raise InputError("the action runs on pull_request, pull_request_review, merge_group and push events, not %r" % name)


def task_from(event: GithubEvent, explicit: str, pattern: str = DEFAULT_TASK_PATTERN) -> str:
    """The task id: the input if given, else the first task id (``pattern``, the team's
    ``task_pattern``) in the branch name, else in the pull request's title, in capitals
    (branch ``task-1`` is task ``TASK-1``). In a merge queue the branch is the queue's
    (``gh-readonly-queue/main/pr-7-...``): the task comes from the pull request being
    merged, whose title heads the queue's commit message, never from that branch.
    """
    if explicit:
        return explicit
    texts = (event.title,) if event.name in _GATE_ONLY else (event.head_ref, event.title)
    for text in texts:
        found = find_task(text, pattern)
        if found:
            return found
    raise InputError(
        "no task id: pass the action's `task` input, or name the branch or the pull request title after it (T-1)"
    )


def _escape(text: str, prop: bool = False) -> str:
    # GitHub's workflow-command escaping: data escapes %, CR, LF; properties also ':' and ','.
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotation(path: str, message: str, line: int = 1, title: str = "") -> str:
    """An ``::error`` workflow command that GitHub shows on ``path`` at ``line``."""
    props = "file=%s,line=%d" % (_escape(path, True), line)
    if title:
        props += ",title=%s" % _escape(title, True)
    return "::error %s::%s" % (props, _escape(message))


@dataclass(frozen=True, slots=True)
class GithubApi:
    """The few REST calls the action makes: list, create and update issue comments."""

    base_url: str
    repository: str  # owner/name
    token: str
    opener: Callable[[urllib.request.Request], Any] = urllib.request.urlopen

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            self.base_url.rstrip("/") + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": "Bearer " + self.token,
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "receipt-ledger",
                **({"Content-Type": "application/json"} if body is not None else {}),
            },
        )
        try:
            with self.opener(request) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise InputError("GitHub API %s %s answered %d" % (method, path.split("?")[0], exc.code)) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise InputError("GitHub API %s %s failed: %s" % (method, path.split("?")[0], exc)) from None

    def upsert_comment(self, number: int, body: str, author: str) -> tuple[str, int]:
        """Update the comment carrying `COMMENT_MARKER` that ``author`` wrote, or create one.
        Comments by anyone else are never touched, marker or not: a reader could plant one.
        """
        repo = "/repos/%s/issues" % self.repository
        page = 1
        while True:
            comments = self._call("GET", "%s/%d/comments?per_page=100&page=%d" % (repo, number, page))
            if not isinstance(comments, list):
                raise InputError("GitHub API listed comments as %s, not a list" % type(comments).__name__)
            for comment in comments:
                login = (comment.get("user") or {}).get("login")
                if login == author and COMMENT_MARKER in str(comment.get("body") or ""):
                    self._call("PATCH", "%s/comments/%d" % (repo, int(comment["id"])), {"body": body})
                    return "updated", int(comment["id"])
            if len(comments) < 100:
                break
            page += 1
        created = self._call("POST", "%s/%d/comments" % (repo, number), {"body": body})
        return "created", int(created["id"])


@dataclass(slots=True)
class ActionReport:
    """What one run did, for the summary and the outputs."""

    task: str
    steps: tuple[str, ...]
    tier_exits: dict[str, int] = field(default_factory=dict)
    annotations: list[str] = field(default_factory=list)
    receipt: str | None = None
    result: Result | None = None
    manifest: dict[str, Any] | None = None  # the verified bundle's: checks, goal, decisions
    outputs: dict[str, str] = field(default_factory=dict)  # a failing check's last output, from the bundle
    gated: GateResult | None = None
    comment: str | None = None
    notes: list[str] = field(default_factory=list)
    page: Path | None = None  # the verified bundle's report.html, for the workflow artifact
    run_url: str = ""  # the workflow run's page, where the artifact is listed
    attest: str = "none"  # the `attest` input: what actions/attest is handed (`_attest`)
    attestation: Attestation | None = None
    attest_refused: str | None = None  # why the verified receipt could not be attested

    @property
    def ok(self) -> bool:
        """The job's outcome: the gate's decision when it ran, else the tiers'."""
        if self.gated is not None:
            return not self.gated.blocks
        return bool(self.tier_exits) and all(code == 0 for code in self.tier_exits.values())


def _steps(text: str, event: str = "pull_request") -> tuple[str, ...]:
    """The steps the ``run`` input names; ``auto`` (the default) is every step on a pull
    request and the gate alone in a merge queue or on a push, whose commit holds a tree
    that was reviewed (or nothing to seal).
    """
    if text.strip() in ("", "auto"):
        return ("gate",) if event in _GATE_ONLY else STEPS
    asked = [s.strip() for s in text.split(",") if s.strip()] or ["all"]
    if "all" in asked:
        return STEPS
    unknown = [s for s in asked if s not in STEPS]
    if unknown:
        raise InputError(
            "the action's `run` input takes %s, all or auto, not %s" % (", ".join(STEPS), ", ".join(unknown))
        )
    return tuple(s for s in STEPS if s in asked)


def _write_keys(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """Each key input given, as a 0600 file in a 0700 folder; the names written."""
    written = {}
    for role, name in KEY_INPUTS.items():
        text = env.get("LEDGER_%s_KEY" % role.upper(), "")
        if not text.strip():
            continue
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text.strip() + "\n")
        written[role] = name
    return written


def _file_annotations(ledger_dir: Path, task: str, check_doc: Mapping[str, Any]) -> list[str]:
    """An annotation per failing check that names a file in the contract `ledger check` used."""
    path = contract_path(ledger_dir, task)
    try:
        contract = parse_contract(path.read_bytes(), str(path))
    except (OSError, ReceiptsError):
        return []
    by_id = {c.id: c for c in contract.checks}
    out = []
    for row in check_doc.get("checks", []):
        check = by_id.get(str(row.get("id")))
        if check is None or row.get("result") == "pass" or check.type not in _FILE_CHECKS:
            continue
        path = check.param("path")
        if isinstance(path, str) and path:
            out.append(annotation(path, str(row.get("reason") or "failed"), 1, "receipt-ledger check %s" % check.id))
    return out


Runner = Callable[[Sequence[str], Mapping[str, str], Path], "subprocess.CompletedProcess[str]"]


def _run_ledger(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "ledger", *args], cwd=cwd, env=dict(env), capture_output=True, text=True
    )
    sys.stderr.write(done.stderr)
    return done


def _quorum(text: str) -> int | None:
    if not text.strip():
        return None
    if not text.strip().isdigit():
        raise InputError("audited-quorum %r: give a whole number" % text.strip()[:40])
    return int(text)


def _store(env: Mapping[str, str], repo: Path, trust_ref: str) -> str | None:
    """The shared store the tiers write to and the gate audits: the ``store`` input, else
    the target branch's ``.ledger/config.toml`` (`branch_store`); None for the runner's
    directory (``LEDGER_DIR``, else the workspace's ``.ledger``). The checkout's config is
    the candidate's, so one that names another store is refused rather than obeyed.
    """
    if env.get("LEDGER_STORE"):
        return shared_store(repo / ".ledger", env["LEDGER_STORE"])
    if env.get("LEDGER_DIR"):
        return None  # the runner's own ledger directory and its config, not the checkout's
    store = branch_store(repo, trust_ref)
    proposed = shared_store(repo / ".ledger", None)
    if proposed != store:
        raise InputError(
            "the pull request's .ledger/config.toml names the store %s, the target branch %s names %s:"
            " a candidate does not choose the ledger it is checked against (give the action's store input"
            " to override)"
            % (redact_url(proposed) if proposed else "(none)", trust_ref, redact_url(store) if store else "(none)")
        )
    return store


def run_action(env: Mapping[str, str], repo: Path, runner: Runner = _run_ledger) -> ActionReport:
    """One run of the action in ``repo`` (the checked-out workspace); see the module docstring."""
    event_path = env.get("GITHUB_EVENT_PATH", "")
    try:
        payload = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError("cannot read the event payload %r: %s" % (event_path, exc)) from None
    event = parse_event(env.get("GITHUB_EVENT_NAME", ""), payload)
    try:
        pattern = task_pattern(repo / ".ledger")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    report = ActionReport(
        task_from(event, env.get("LEDGER_TASK", "").strip(), pattern),
        _steps(env.get("LEDGER_RUN", "auto"), event.name),
        attest=attest_kind(env.get("LEDGER_ATTEST", "")),
    )
    remote = env.get("LEDGER_REMOTE", "origin")
    trust_ref = env.get("LEDGER_TRUST_REF", "").strip() or "%s/%s" % (remote, event.base_ref)
    _fetch_target(repo, remote, event)
    fetch_receipts(repo, remote)
    store = _store(env, repo, trust_ref)
    sealer = _run_tiers(env, repo, event, report, store, runner)
    if "gate" in report.steps:
        _gate_step(env, repo, event, report, trust_ref, store, sealer)
    _publish(env, event, report)
    return report


def _fetch_target(repo: Path, remote: str, event: GithubEvent) -> None:
    """The target branch (where the trust pin is), which checkout does not bring. After a
    push the branch holds the pushed commit itself: it is taken as it was before the push.
    """
    target = "refs/remotes/%s/%s" % (remote, event.base_ref)
    shallow = run_git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == b"true"
    if event.name != "push":
        # The whole history, whatever the checkout's depth: the candidate is judged against
        # its merge base with the target branch, never against "the first commit".
        deepen = ["--unshallow"] if shallow else []
        spec = "+refs/heads/%s:%s" % (event.base_ref, target)
        fetched = run_git(repo, "fetch", "--quiet", "--no-tags", *deepen, remote, spec)
        if fetched.returncode != 0:
            raise InputError(
                "cannot fetch the target branch %s and its history from %s (give actions/checkout"
                " fetch-depth: 0 and keep its credentials)" % (event.base_ref, remote)
            )
        return
    if not re.fullmatch("[0-9a-f]{40}", event.before) or event.before == "0" * 40:
        raise InputError(
            "the push created %s: there is no earlier pin to judge it by (gate it in its pull request)" % event.base_ref
        )
    # In a shallow checkout (actions/checkout's default) one commit is enough to gate.
    fetched = run_git(repo, "fetch", "--quiet", "--no-tags", *(["--depth=1"] if shallow else []), remote, event.before)
    if fetched.returncode != 0 or run_git(repo, "update-ref", target, event.before).returncode != 0:
        raise InputError(
            "cannot fetch %s as it was before the push (%s) from %s" % (event.base_ref, event.before, remote)
        )


def _run_tiers(
    env: Mapping[str, str], repo: Path, event: GithubEvent, report: ActionReport, store: str | None, runner: Runner
) -> Signer | None:
    """Check, judge and seal, each with its own key from the secrets, written to a private
    folder that is removed whatever happens; a step without its key is skipped, and says so.
    Returns the seal key, loaded before its file goes, for the gate to record its decision
    (None without one).
    """
    keys = Path(env.get("RUNNER_TEMP") or "/tmp") / ("receipt-ledger-keys-" + secrets.token_hex(6))
    child = {k: v for k, v in env.items() if not k.endswith("_KEY") or not k.startswith("LEDGER_")}
    child.update(RECEIPT_LEDGER_KEYS=str(keys))
    if store is not None:
        child["LEDGER_STORE"] = store
    try:
        written = _write_keys(env, keys)
        for step, role in (("check", "deterministic"), ("judge", "judge"), ("seal", "seal")):
            if step not in report.steps:
                continue
            if role not in written:
                report.notes.append(
                    "%s skipped: no %s key (secrets are not given to forked pull requests)" % (step, role)
                )
                continue
            # Progress for the job's log while the ladder runs (stdout stays the gate's decision).
            print(
                "receipt-ledger: %s %s on %s ..." % (step, report.task, event.head_sha[:12]),
                file=sys.stderr,
                flush=True,
            )
            _tier(step, report, repo, event, child, written[role], runner)
            print("receipt-ledger: %s exited %d" % (step, report.tier_exits.get(step, -1)), file=sys.stderr, flush=True)
        return load_signer(str(keys / written["seal"])) if "seal" in written and "gate" in report.steps else None
    finally:
        shutil.rmtree(keys, ignore_errors=True)


def _gate_step(
    env: Mapping[str, str],
    repo: Path,
    event: GithubEvent,
    report: ActionReport,
    trust_ref: str,
    store: str | None,
    sealer: Signer | None = None,
) -> None:
    """Gate the pull request's head under the target branch's trust, recording the decision
    in the ledger with the seal key when there is one (the population shows it), then verify
    the deciding receipt's bundle for the summary.
    """
    trust = resolve_trust(
        explicit=env.get("LEDGER_TRUST", "").strip() or None,
        unsafe_tofu=False,
        repo=repo,
        ledger_root=repo / ".ledger",
        trust_ref=trust_ref,
        judges_candidate=True,
    )
    auditors, quorum = resolve_auditors(
        explicit=[line for line in env.get("LEDGER_AUDITING_WITNESSES", "").splitlines() if line.strip()],
        quorum=_quorum(env.get("LEDGER_AUDITED_QUORUM", "")),
        repo=repo,
        trust_ref=trust_ref,
    )
    # The runner reaches the store the tiers wrote to: where no auditing witness has
    # cosigned yet, the gate audits its chain itself (a full audit unless the state is kept).
    ledger_dir = Path(env["LEDGER_DIR"]) if env.get("LEDGER_DIR") else repo / ".ledger"
    recorder = _recorder(ledger_dir, store, sealer, report)
    try:
        report.gated = gate(
            repo,
            event.head_sha,
            trust,
            transparency=Transparency(auditors=auditors, audited_quorum=quorum),
            open_ledger=lambda: open_source(ledger_dir, store),
            audit_state=Path(
                env.get("LEDGER_AUDIT_STATE")
                or Path(env.get("RUNNER_TEMP") or "/tmp") / "receipt-ledger-audit-state.json"
            ),
            recorder=recorder,
            task=report.task,
        )
    finally:
        if recorder is not None:
            recorder[0].close()
    # The summary, the page and the outputs describe the receipt that decided, which is not
    # always the one this run sealed (a rerun or a merge queue passes on the reviewed one).
    decided = report.gated.receipt or report.gated.decided_by
    if decided:
        report.receipt = decided
    if report.receipt:
        _verify_bundle(env, repo, report, report.receipt, trust)


def _verify_bundle(env: Mapping[str, str], repo: Path, report: ActionReport, receipt: str, trust: Trust) -> None:
    """The deciding receipt's bundle from git, verified for the summary, the page and the attestation."""
    with open_bundle(repo, receipt) as bundle:
        if bundle is None:
            return
        from verify import BundleLayout, BundleSource

        with BundleSource(bundle) as source:
            checked = verify_receipt(source, receipt, trust, Transparency(require_checkpoint=True))
            report.result = _as_decided(report, receipt, checked)
            if checked.ok:  # its renderings were re-derived and compared: both are verified
                report.manifest = json.loads(source.read(BundleLayout.MANIFEST))
                report.outputs = failing_outputs(source, report.manifest)
                report.page = _keep_page(env, source.read(BundleLayout.REPORT_HTML))
                _attest(env, report, bundle, source)


def _as_decided(report: ActionReport, receipt: str, checked: Result) -> Result:
    """The result the summary shows for ``receipt``: where the gate verified it, the gate's
    own verification, its completeness the gate's (an auditing witness's cosignature, or
    the gate's own audit of the store), so that the receipt's section cannot say
    "UNPROVEN" under the gate's pass; else the bundle's (``checked``).
    """
    found = next(
        (c for c in (report.gated.checks if report.gated else ()) if c.note.receipt == receipt and c.result),
        None,
    )
    if found is None or found.result is None:
        return checked
    return dataclasses.replace(found.result, completeness=found.completeness)


def failing_outputs(source: Source, manifest: Mapping[str, Any]) -> dict[str, str]:
    """Each failing check's last printed lines (its stdout, then its stderr, of its last
    attempt), read from the verified bundle: the failing assertion the agent's Stop showed.

    Args:
        source: the verified bundle.
        manifest: its manifest.json, as verified.
    """
    from receipts import Digest, ReceiptsError

    def last(check: dict[str, Any], part: str) -> bytes:
        own = [f for f in check.get("files") or [] if str(f.get("name", "")).endswith(":" + part)]
        try:
            return blob_tail(source.open_blob(Digest.parse(str(own[-1]["digest"])))) if own else b""
        except ReceiptsError:
            return b""

    found = {}
    for check in manifest.get("checks") or []:
        if isinstance(check, dict) and check.get("status") == "fail":
            text = last_lines(last(check, part) for part in ("stdout", "stderr"))
            if text:
                found[str(check.get("id"))] = text
    return found


def _attest(env: Mapping[str, str], report: ActionReport, bundle: Path, source: Source) -> None:
    if report.attest == "none" or not env.get("RUNNER_TEMP") or report.result is None or not report.receipt:
        return
    try:
        report.attestation = prepare_attestation(
            Path(env["RUNNER_TEMP"]), bundle, source, report.result, report.receipt
        )
    except InputError as exc:
        report.attest_refused = str(exc)


# The action's upload step takes the page from here (action.yml); one per job.
REPORT_ARTIFACT = "receipt-ledger-report"


def _keep_page(env: Mapping[str, str], page: bytes) -> Path | None:
    """The report page written where the action's upload step finds it, on a runner."""
    if not env.get("RUNNER_TEMP"):
        return None
    path = Path(env["RUNNER_TEMP"]) / REPORT_ARTIFACT / "report.html"
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, page)
    return path


def _run_url(env: Mapping[str, str]) -> str:
    parts = [env.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    if not all(parts):
        return ""
    return "%s/%s/actions/runs/%s" % tuple(parts)


def _recorder(
    ledger_dir: Path, store: str | None, sealer: Signer | None, report: ActionReport
) -> tuple[Ledger, Signer] | None:
    """Where the gate records its decision: the ledger the tiers append to, with the seal
    key. A job without either (a queue's gate-only run on a runner with no ledger) gates
    all the same and says the decision was not recorded: the record is for the population,
    the decision comes from the receipts in git.
    """
    if sealer is None:
        return None
    try:
        return Ledger.open(ledger_dir, store=store), sealer
    except LedgerError as exc:
        report.notes.append("the gate's decision was not recorded: %s" % exc)
        return None


def _tier(
    step: str,
    report: ActionReport,
    repo: Path,
    event: GithubEvent,
    child: Mapping[str, str],
    key: str,
    runner: Runner,
) -> None:
    task = report.task
    head = run_git(repo, "rev-parse", "HEAD").stdout.decode().strip()
    if step == "check" and head != event.head_sha:
        # The deterministic tier checks the working tree: it must be the commit that merges.
        raise InputError(
            "the workspace is at %s, not the pull request's head %s: check it out (actions/checkout with"
            " ref: the head sha)" % (head[:12], event.head_sha[:12])
        )
    if step == "check":
        target = "refs/remotes/%s/%s" % (child.get("LEDGER_REMOTE", "origin"), event.base_ref)
        base = run_git(repo, "merge-base", "HEAD", target)
        if base.returncode != 0:
            raise InputError("the pull request's head shares no history with %s: no base to judge it against" % target)
        # The contract in force is read where the trust pin is: the trust-ref input, else the target.
        trust_ref = (child.get("LEDGER_TRUST_REF") or "").strip() or target
        args = ["check", task, "--key", key, "--json", "--base", base.stdout.decode().strip(), "--trust-ref", trust_ref]
        done = runner(args, child, repo)
        report.tier_exits["check"] = done.returncode
        try:
            ledger_dir = Path(child["LEDGER_DIR"]) if child.get("LEDGER_DIR") else repo / ".ledger"
            report.annotations += _file_annotations(ledger_dir, task, json.loads(done.stdout))
        except ValueError:
            report.notes.append("check printed no result: %s" % (done.stderr.strip().splitlines() or ["?"])[-1])
    elif step == "judge":
        report.tier_exits["judge"] = runner(
            ["judge", task, "--key", key, "--input", event.head_sha], child, repo
        ).returncode
    else:
        sealed = runner(["seal", task, "--key", key, "--input", event.head_sha], child, repo)
        report.tier_exits["seal"] = sealed.returncode
        if sealed.returncode != 0:
            report.notes.append("seal failed: %s" % (sealed.stderr.strip().splitlines() or ["?"])[-1])
            return
        report.receipt = sealed.stdout.strip()
        for line in sealed.stderr.strip().splitlines():  # the seal's own words: eligible or why not
            print("receipt-ledger: %s" % line, file=sys.stderr, flush=True)
        attached = runner(["attach", report.receipt, "--key", key, "--commit", event.head_sha], child, repo)
        if attached.returncode != 0:
            report.notes.append("attach failed: %s" % (attached.stderr.strip().splitlines() or ["?"])[-1])
            return
        push_receipts(repo, child.get("LEDGER_REMOTE", "origin"))


def summary_markdown(report: ActionReport, event: GithubEvent) -> str:
    """The job summary and the pull-request comment: one table, the decision, how to re-check."""
    parts = [COMMENT_MARKER]
    comment = (
        pr_comment(report.result, report.receipt, report.manifest, event.head_sha, report.outputs).rstrip("\n")
        if report.result is not None and report.receipt
        else "### receipt-ledger: %s, no verified receipt yet" % comment_text(report.task)
    )
    if report.gated is not None:
        # The gate decides the job: its decision heads the summary, in the log's words
        # (GATE PASS, GATE FAIL), and the receipt it rests on follows under its own heading.
        said = gate_lines(report.gated)
        parts.append("### receipt-ledger: %s **%s**" % (comment_text(report.task), comment_text(said[0])))
        parts += ["- %s" % comment_text(line.strip()) for line in said[1:]]
        parts.append("")
        comment = comment.replace("### receipt-ledger: ", "#### The receipt: ", 1)
    parts.append(comment)
    if report.page is not None and report.run_url:
        parts.append("")
        parts.append(
            "The auditor's page for this receipt: the `%s` artifact of [this run](%s)."
            % (REPORT_ARTIFACT, markdown_text(report.run_url))
        )
    for note in report.notes:
        parts.append("- note: %s" % comment_text(note))
    return "\n".join(parts) + "\n"


def _publish(env: Mapping[str, str], event: GithubEvent, report: ActionReport) -> None:
    report.run_url = _run_url(env)
    if report.attest != "none" and report.attestation is None:
        why = report.attest_refused or "no receipt was verified from its bundle in this run"
        report.notes.append("no attestation: %s" % why)
    for line in report.annotations:
        print(line)
    markdown = summary_markdown(report, event)
    if env.get("GITHUB_STEP_SUMMARY"):
        with open(env["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as out:
            out.write(markdown)
    if env.get("GITHUB_OUTPUT"):
        # Where the gate ran, its decision is the job's: one answer in every output.
        eligible = (
            report.gated.passed
            if report.gated is not None
            else bool(report.result and report.result.ok and report.result.derived_eligible)
        )
        with open(env["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
            out.write("receipt=%s\n" % (report.receipt or ""))
            out.write("decision=%s\n" % (report.gated.decision if report.gated else "not-run"))
            out.write("merge-eligible=%s\n" % str(eligible).lower())
            out.write("report=%s\n" % (report.page or ""))
            found = report.attestation
            out.write("attest-subject=%s\n" % (found.subject if found else ""))
            out.write("attest-predicate=%s\n" % (found.predicate if found else ""))
            out.write("attest-predicate-type=%s\n" % (found.predicate_type if found else ""))
    token = env.get("GITHUB_TOKEN", "")
    if event.number is not None and token and env.get("LEDGER_COMMENT", "true") != "false":
        api = GithubApi(env.get("GITHUB_API_URL", "https://api.github.com"), env.get("GITHUB_REPOSITORY", ""), token)
        try:
            how, _ = api.upsert_comment(event.number, markdown, env.get("LEDGER_COMMENT_AUTHOR", "github-actions[bot]"))
            report.comment = how
        except InputError as exc:
            # A forked pull request's token may not write comments: the decision stands without one.
            report.notes.append("the pull-request comment was not written: %s" % exc)
