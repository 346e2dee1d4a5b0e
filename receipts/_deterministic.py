"""The deterministic tier's evidence formats and its verdict rule.

The runner captures facts (an exit code, whether a path existed, which files a search
covered) into JSON evidence; the rule below turns facts into a verdict. The runner
decides with this rule and the verifier re-derives with it from the stored evidence,
so a record whose verdict does not follow from its evidence is caught.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._contract import Check, Contract, ToolPolicy, Waiver, thaw
from ._digest import Digest
from ._errors import FormatError
from ._model import TierRecord, Verdict
from ._provenance import PROVENANCE_FORMAT, declared_facts, undeclared
from ._sealed import RevealedSet, revealed_findings

__all__ = [
    "CHECK_RESULT_FORMAT",
    "SNAPSHOT_FORMAT",
    "CHECK_RESULT_MEDIA_TYPE",
    "SNAPSHOT_MEDIA_TYPE",
    "NON_TRIVIAL_SIGNALS",
    "Outcome",
    "declared_params",
    "check_evidence_id",
    "result_key",
    "derive_attempts",
    "parse_evidence_json",
    "derive_check",
    "derive_deterministic",
    "integrity_failure",
    "requires_report",
    "EvidenceReader",
    "rederive_deterministic",
    "waivers_in_force",
    "tally_check_runs",
]

CHECK_RESULT_FORMAT = "receipt-ledger/check-result/v1"
SNAPSHOT_FORMAT = "receipt-ledger/snapshot/v1"
CHECK_RESULT_MEDIA_TYPE = "application/vnd.receipt-ledger.check-result+json"
SNAPSHOT_MEDIA_TYPE = "application/vnd.receipt-ledger.snapshot+json"
# Signals that show real work happened when nothing else is attributed to a task.
NON_TRIVIAL_SIGNALS = frozenset({"test_passes", "schema_valid", "hash_stable"})
MAX_EVIDENCE_JSON = 4 << 20


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    waived: tuple[str, ...] = ()  # failing checks that a waiver kept from blocking
    failed: tuple[str, ...] = ()  # every check that failed, waived or not


def check_evidence_id(check_id: str) -> str:
    return "check:" + check_id


def result_key(check: Check, attempt: int) -> str:
    """Where attempt ``attempt`` (1-based) of ``check`` is kept among a record's results: the
    check's id for a check run once, ``ID#N`` for each attempt of one run ``runs`` times
    (a ``#`` never appears in a check id).
    """
    return check.id if check.runs == 1 else "%s#%d" % (check.id, attempt)


def derive_attempts(
    check: Check, results: Mapping[str, Mapping[str, Any]], require_report: bool = False
) -> tuple[bool, str, int]:
    """Whether ``check`` passed, from the results of all its attempts: every attempt must be
    recorded (one dropped fails the check) and ``min_passes`` of them pass. Returns
    (passed, why, how many attempts passed). ``require_report`` as `derive_check`.
    """
    if check.runs == 1:
        ok, why = derive_check(check, results.get(check.id), require_report)
        return ok, why, int(ok)
    passes, missing, first_failure = 0, [], ""
    for attempt in range(1, check.runs + 1):
        result = results.get(result_key(check, attempt))
        if result is None:
            missing.append(str(attempt))
            continue
        ok, why = derive_check(check, result, require_report)
        if ok and result.get("attempt") != attempt:
            ok, why = False, "the recorded attempt is numbered %r" % (result.get("attempt"),)
        passes += int(ok)
        if not ok and not first_failure:
            first_failure = "run %d: %s" % (attempt, why)
    if missing:
        return False, "attempt %s of %d not recorded" % (", ".join(missing), check.runs), passes
    said = "passed %d of %d runs (needs %d)" % (passes, check.runs, check.min_passes)
    if passes < check.min_passes:
        return False, "%s; %s" % (said, first_failure), passes
    return True, said if passes < check.runs else "", passes


def declared_params(check: Check) -> dict[str, Any]:
    """A check's parameters as JSON values, exactly as the contract declares them."""
    return {k: thaw(v) for k, v in check.params}


def parse_evidence_json(data: bytes, expected_format: str) -> dict[str, Any]:
    if len(data) > MAX_EVIDENCE_JSON:
        raise FormatError("evidence JSON larger than %d bytes" % MAX_EVIDENCE_JSON)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError("evidence is not JSON: %s" % exc) from None
    if not isinstance(doc, dict) or doc.get("format") != expected_format:
        raise FormatError("evidence is not a %s document" % expected_format)
    return doc


def _fact(facts: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = facts.get(name)
    if isinstance(value, bool) and kind is not bool and not (isinstance(kind, tuple) and bool in kind):
        raise FormatError("fact %s has the wrong type" % name)
    if not isinstance(value, kind):
        raise FormatError("fact %s is missing or has the wrong type" % name)
    return value


def _path_exists_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    if _fact(facts, "escaped", bool):
        return False, "path %s is outside the repository" % check.param("path")
    if _fact(facts, "exists", bool) and _fact(facts, "matches", list):
        return True, "exists: %s" % ", ".join(str(m) for m in facts["matches"][:5])
    where = facts.get("checked")
    note = " (translated from worktree path %s)" % facts["translated_from"] if facts.get("translated_from") else ""
    return False, "%s does not exist in the main checkout%s" % (where or check.param("path"), note)


def _test_passes_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    if _fact(facts, "timed_out", bool):
        return False, "timed out after %s s" % facts.get("timeout_s")
    if facts.get("error"):
        return False, "could not run: %s" % facts["error"]
    if "sealed_run" in facts:  # held-out tests: the runner's signed outcome until reveal (§6e)
        run = _fact(facts, "sealed_run", dict)
        cap = check.param("max_exposures")
        if isinstance(cap, int) and _fact(run, "exposure", int) > cap:
            return False, "the run was candidate %d against the sealed set, past its cap of %d" % (run["exposure"], cap)
        if "revealed_findings" in run:  # put there by `rederive_deterministic` from a verified reveal only
            found = run["revealed_findings"]
            said = "; ".join(found[:5]) if found else "every held-out test passed"
            return not found, "sealed set %s, revealed: %s" % (check.param("sealed"), said)
        said = "sealed set %s: %s (its content is not public before reveal)" % (
            check.param("sealed"),
            _fact(run, "summary", str),
        )
        return _fact(run, "passed", bool), said
    code = _fact(facts, "exit_code", int)
    if "control" in facts:  # a sandboxed pytest run: what ran decides, with the control (§6a)
        from ._harness import test_report_findings

        found = test_report_findings(facts)
        if found:
            return False, "; ".join(found[:5])
        report = facts["report"]["tests"]
        passed = sum(1 for v in report.values() if v == "passed")
        return True, "%d test(s) passed; the control test failed, as it must" % passed
    return (code == 0), "exit code %d" % code


def _file_contains_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    if _fact(facts, "file_digest", (str, type(None))) is None:
        return False, "%s does not exist" % check.param("path")
    if _fact(facts, "matched", bool):
        return True, "found at line %s" % facts.get("line")
    return False, "no match in %s" % check.param("path")


def _absence_verified_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    if not _fact(facts, "completed", bool):
        return False, "the search did not complete"
    searched = _fact(facts, "files_searched", int)
    matches = _fact(facts, "matches", list)
    if searched <= 0:
        return False, "the search covered no files: absence not shown"
    if matches:
        return False, "found %d match(es), e.g. %s" % (len(matches), matches[0])
    return True, "absent from %d searched file(s)" % searched


def _schema_valid_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    if _fact(facts, "valid", bool) and not _fact(facts, "errors", list):
        return True, "valid against %s" % check.param("schema")
    return False, "; ".join(str(e) for e in facts.get("errors") or ["invalid"])[:300]


def _hash_stable_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    digests = _fact(facts, "digests", list)
    if not digests or any(d is None for d in digests):
        return False, "artifact %s missing" % check.param("path")
    pinned = check.param("digest")
    if pinned is not None:
        return (digests == [pinned]), "digest %s pinned %s" % (digests[0], pinned)
    if len(digests) != 2:
        return False, "two builds are needed to show stability"
    return (digests[0] == digests[1]), "build digests %s" % ("match" if digests[0] == digests[1] else "differ")


def _attribution_declared_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    records = _fact(facts, "records", list)
    if not all(isinstance(d, str) for d in records):
        # The verifier re-reads only a list of digests: anything else is never believed.
        return False, "the result's list of provenance records is malformed"
    unreadable = _fact(facts, "unreadable", list)
    if unreadable:
        return False, "provenance record(s) missing, altered or invalid: %s" % ", ".join(str(d) for d in unreadable)
    if not records:
        return False, "no provenance record was stored for this task (ledger evidence add)"
    changed = _fact(facts, "changed", dict)
    globs = check.param("paths")
    if isinstance(globs, (list, tuple)):
        import fnmatch

        changed = {p: v for p, v in changed.items() if any(fnmatch.fnmatchcase(p, str(g)) for g in globs)}
    missing = undeclared(changed, _fact(facts, "declared_ranges", dict), _fact(facts, "declared_files", list))
    if missing:
        shown = "; ".join(missing[:10]) + ("; and %d more file(s)" % (len(missing) - 10) if len(missing) > 10 else "")
        return False, "changed lines no provenance record declares: %s" % shown
    return True, "every added line of %d file(s) is declared by %d record(s)" % (len(changed), len(records))


# Each signal type's rule: whether its recorded facts show a pass, and why.
_FACT_RULES: Mapping[str, Callable[[Check, Mapping[str, Any]], tuple[bool, str]]] = {
    "path_exists": _path_exists_facts,
    "test_passes": _test_passes_facts,
    "file_contains": _file_contains_facts,
    "absence_verified": _absence_verified_facts,
    "schema_valid": _schema_valid_facts,
    "hash_stable": _hash_stable_facts,
    "attribution_declared": _attribution_declared_facts,
}


def _derive_facts(check: Check, facts: Mapping[str, Any]) -> tuple[bool, str]:
    rule = _FACT_RULES.get(check.type)
    if rule is None:
        return False, "unknown signal type %r: cannot be evaluated" % check.type
    return rule(check, facts)


def requires_report(contract: Contract, check: Check) -> bool:
    """Whether ``check`` must be judged by its test report and control (§6a): a pytest
    command of a contract whose clean room is sandboxed.
    """
    if not (contract.sandbox and check.type == "test_passes"):
        return False
    from ._harness import runs_pytest  # the harness rules load only for a sandboxed contract

    return runs_pytest(thaw(check.param("command")))


def derive_check(check: Check, result: Mapping[str, Any] | None, require_report: bool = False) -> tuple[bool, str]:
    """Whether one check passed, from its recorded result. Anything missing, malformed or
    recorded for a different check than the contract declares is a fail; so is, with
    ``require_report`` (`requires_report`), a test run recorded without its report.
    """
    if result is None:
        return False, "no recorded result"
    if result.get("id") != check.id or result.get("type") != check.type:
        return False, "the recorded result is for another check"
    if result.get("declared") != declared_params(check):
        return False, "the recorded check is not the one the contract declares"
    facts = result.get("facts")
    if not isinstance(facts, dict):
        return False, "the recorded result has no facts"
    if check.param("sealed") is not None and not isinstance(facts.get("sealed_run"), dict):
        # A runner that did not run the sealed set did not run the check the contract declares.
        if facts.get("error"):
            return False, "could not run: %s" % facts["error"]
        return False, "the check's sealed set %s was not run" % check.param("sealed")
    if require_report and "control" not in facts and "sealed_run" not in facts:
        if facts.get("error"):
            return False, "could not run: %s" % facts["error"]
        return False, "the contract requires the run's test report and control test; none was recorded"
    try:
        return _derive_facts(check, facts)
    except FormatError as exc:
        return False, "malformed facts: %s" % exc


def derive_deterministic(
    contract: Contract,
    results: Mapping[str, Mapping[str, Any]],
    snapshot: Mapping[str, Any] | None,
    waivers: Mapping[str, str] | None = None,
) -> Outcome:
    """The deterministic tier's verdict from the contract and the recorded evidence.

    Args:
        contract: the contract the candidate is checked against.
        results: the recorded check results, by check id.
        snapshot: the candidate snapshot (None when none was recorded: a fail).
        waivers: check ids mapped to a description of the waiver in force for them: such a
            check may fail without blocking, and the outcome says so.

    Returns:
        The verdict with its reasons (why it failed) and warnings (what a reviewer should know).
    """
    if snapshot is None:
        return Outcome(Verdict.FAIL, ("no candidate snapshot was recorded",), ())
    reasons: list[str] = []
    warnings: list[str] = []
    waived: list[str] = []
    passed: list[Check] = []
    for check in contract.checks:
        ok, why, passes = derive_attempts(check, results, requires_report(contract, check))
        if check.param("sealed") is not None and not _revealed(results, check):
            warnings.append("%s is sealed: its held-out tests and output stay private until revealed" % check.id)
        if ok:
            passed.append(check)
            if passes < check.runs:
                warnings.append("%s is flaky: %s" % (check.id, why))
        elif waivers and check.id in waivers:
            waived.append(check.id)
            warnings.append("%s failed (%s) but is waived: %s" % (check.id, why, waivers[check.id]))
        else:
            reasons.append("%s: %s" % (check.id, why))
    reasons.extend(
        "required evidence %s was not recorded" % item
        for item in contract.evidence_required
        if item not in results and not any(key.startswith(item + "#") for key in results)
    )
    # Integrity: the process, not only the result. These fail the tier whatever else passed.
    reasons.extend(_integrity_reasons(contract, snapshot))
    room_reasons, room_warnings = _clean_room_findings(contract, snapshot)
    reasons.extend(room_reasons)
    warnings.extend(room_warnings)
    if contract.version >= 2 and not contract.no_op and not (contract.clean_room and contract.sandbox):
        # Version 2's default for a code task is the sandboxed clean room: leaving it is said every time.
        warnings.append(
            "the contract opts out of the sandboxed clean room (policy.clean_room or policy.sandbox = false)"
        )
    if str(snapshot.get("base_source", "")).startswith("fallback:"):
        warnings.append("the diff base fell back to HEAD~1: no main branch was found to compare with (pass --base)")
    attribution_reasons, attribution_warnings = _attribution_findings(contract, snapshot, passed)
    reasons.extend(attribution_reasons)
    warnings.extend(attribution_warnings)
    failed = tuple(c.id for c in contract.checks if c not in passed)
    return Outcome(Verdict.FAIL if reasons else Verdict.PASS, tuple(reasons), tuple(warnings), tuple(waived), failed)


def _integrity_reasons(contract: Contract, snapshot: Mapping[str, Any]) -> list[str]:
    """What the snapshot shows the process did against the rules: protected paths, the trace."""
    reasons = [
        "integrity: the candidate changes protected path %s" % path for path in _protected_changes(contract, snapshot)
    ]
    process = snapshot.get("process")
    if contract.tools != ToolPolicy() and (not isinstance(process, dict) or process.get("trace") is None):
        reasons.append("the contract sets a tool policy but no agent trace was checked")
    if not isinstance(process, dict):
        return reasons
    rejected = process.get("rejected_calls")
    unapproved = process.get("unapproved_human_calls")
    if not isinstance(rejected, int) or not isinstance(unapproved, int):
        reasons.append("integrity: the recorded process facts are malformed")
        return reasons
    if rejected:
        reasons.append("integrity: the agent's trace has %d rejected tool call(s)" % rejected)
    if unapproved:
        reasons.append("integrity: %d tool call(s) needed a human approval that was not recorded" % unapproved)
    return reasons


def _clean_room_findings(contract: Contract, snapshot: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Whether the checks ran where the contract says, and the clean room did its job: every
    changed file the protected paths or test files match was restored from the base (or is
    new, with nothing to restore).
    """
    room = snapshot.get("clean_room")
    if room is None:
        required = contract.clean_room
        return (
            ["the contract requires a clean-room run; these checks ran in the working tree"] if required else []
        ), []
    if not isinstance(room, dict):
        return ["the clean room's record is malformed"], []
    restored, kept_new, changed = room.get("restored"), room.get("kept_new"), snapshot.get("changed_files")
    removed = room.get("removed", [])
    lists = (restored, kept_new, changed, removed)
    if (
        not all(isinstance(v, list) and all(isinstance(p, str) for p in v) for v in lists)
        or not isinstance(room.get("network_cut"), bool)
        or not isinstance(room.get("network"), str)
    ):
        return ["the clean room's record is malformed"], []
    assert isinstance(restored, list) and isinstance(kept_new, list) and isinstance(changed, list)
    assert isinstance(removed, list)
    if room.get("base") != snapshot.get("base"):
        return ["the clean room restored from %s, not from the base %s" % (room.get("base"), snapshot.get("base"))], []
    import fnmatch

    globs = (*contract.protected_paths, *contract.test_files)
    covered = set(restored) | set(kept_new) | set(removed)
    reasons = [
        "clean room: %s changed but was not restored from the base" % path
        for path in changed
        if path not in covered and any(fnmatch.fnmatchcase(path, g) for g in globs)
    ]
    if contract.sandbox:
        reasons += _sandbox_reasons(contract, room, changed, restored, removed)
    warnings = [] if room["network_cut"] else ["the clean room's network was %s" % room["network"]]
    return reasons, warnings


def _revealed(results: Mapping[str, Mapping[str, Any]], check: Check) -> bool:
    """Whether a sealed check's recorded run was judged by its revealed content."""
    facts = (results.get(result_key(check, 1)) or {}).get("facts")
    run = facts.get("sealed_run") if isinstance(facts, dict) else None
    return isinstance(run, dict) and "revealed_findings" in run


def _sandbox_reasons(
    contract: Contract, room: Mapping[str, Any], changed: list[str], restored: list[str], removed: list[str]
) -> list[str]:
    """A sandboxed contract's room: the sandbox as required, and every harness file the
    candidate changed restored from the base (or, new, removed).
    """
    from ._harness import is_harness_path, sandbox_findings

    allowed = set(contract.secret_env)
    for check in contract.checks:
        env = thaw(check.param("env", ()))
        if isinstance(env, list):
            allowed.update(str(v) for v in env)
    reasons = ["sandbox: %s" % r for r in sandbox_findings(room, frozenset(allowed))]
    handled = set(restored) | set(removed)
    reasons += [
        "harness: %s changed but was neither restored from the base nor removed" % path
        for path in changed
        if is_harness_path(path) and path not in handled
    ]
    kept = room.get("kept_new") or []
    reasons += ["harness: the candidate's new %s was kept" % path for path in kept if is_harness_path(str(path))]
    return reasons


def _attribution_findings(
    contract: Contract, snapshot: Mapping[str, Any], passed: list[Check]
) -> tuple[list[str], list[str]]:
    """Whether the checks grade this task's own work: the reasons and warnings that follow."""
    reasons: list[str] = []
    warnings: list[str] = []
    attribution = snapshot.get("attribution")
    strength = attribution.get("strength") if isinstance(attribution, dict) else None
    subtasks = snapshot.get("subtasks") if isinstance(snapshot.get("subtasks"), list) else []
    if strength not in ("strong", "weak", "none"):
        reasons.append("the snapshot records no attribution")
    elif not contract.no_op:
        if snapshot.get("diff_empty") is not False:
            reasons.append("empty diff: a %s task changed nothing" % contract.kind)
        elif strength == "none":
            reasons.append("nothing is attributed to %s: its checks would grade other work" % contract.task_id)
        if not contract.checks:
            reasons.append("the contract declares no checks: nothing was verified")
        if strength == "weak":
            warnings.append("weak attribution: only changes to owned files tie this candidate to %s" % contract.task_id)
    elif strength == "none":
        if any(c.type in NON_TRIVIAL_SIGNALS for c in passed):
            warnings.append(
                "nothing attributed to %s; passed on a non-trivial signal: needs human review" % contract.task_id
            )
        elif subtasks:
            warnings.append("planning task passed on the subtasks it created: %s" % ", ".join(str(s) for s in subtasks))
        else:
            reasons.append("nothing attributed, no non-trivial signal passed and no subtasks were created")
    return reasons, warnings


EvidenceReader = Callable[[Digest, str], "dict[str, Any] | None"]
"""Reads one evidence blob as JSON of a format: None when it is missing, no longer hashes
to its digest, or is not that format. Verifiers and the lifecycle pass their own."""


def rederive_deterministic(
    record: TierRecord,
    contract: Contract,
    read: EvidenceReader,
    waivers: Mapping[str, str] | None = None,
    reveals: Mapping[str, RevealedSet] | None = None,
) -> Outcome:
    """The deterministic verdict that ``record``'s stored evidence entails (§6a): the one
    rule behind `ledger verify` step 5e and `ledger status`. Two results for one check
    cancel each other; a result must name its own check; the snapshot must be of the
    record's candidate. A sealed check's result is judged by its revealed content when
    ``reveals`` (sealed set digest: what a verified reveal made public) holds its set (§6e).
    """
    snapshot = None
    results: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for ref in record.evidence:
        if ref.check_id == "snapshot" and ref.media_type == SNAPSHOT_MEDIA_TYPE:
            snapshot = read(ref.digest, SNAPSHOT_FORMAT)
        elif ref.check_id.startswith("check:") and ref.media_type == CHECK_RESULT_MEDIA_TYPE:
            check_id = ref.check_id[6:]
            if check_id in seen:
                results.pop(check_id, None)  # two results for one check: neither is believed
                continue
            seen.add(check_id)
            doc = read(ref.digest, CHECK_RESULT_FORMAT)
            if doc is not None and doc.get("id") == check_id.partition("#")[0]:
                results[check_id] = _sealed_reread(_provenance_reread(doc, read), contract, reveals or {})
    if snapshot is not None and snapshot.get("candidate") != str(record.input_hash):
        return Outcome(
            Verdict.FAIL,
            ("the recorded snapshot is of a different candidate",),
            (),
            failed=tuple(c.id for c in contract.checks),
        )
    return derive_deterministic(contract, results, snapshot, waivers)


def _provenance_reread(result: dict[str, Any], read: EvidenceReader) -> dict[str, Any]:
    """An `attribution_declared` result with what its provenance records declare read again
    from the stored records (§6d), not taken from the result: an altered record is caught.
    """
    facts = result.get("facts")
    if result.get("type") != "attribution_declared" or not isinstance(facts, dict):
        return result
    records = facts.get("records")
    if not isinstance(records, list) or not all(isinstance(d, str) for d in records):
        return result
    docs = []
    for digest in records:
        try:
            docs.append((digest, read(Digest.parse(digest), PROVENANCE_FORMAT)))
        except FormatError:
            docs.append((digest, None))
    return {**result, "facts": {**facts, **declared_facts(docs)}}


def _sealed_reread(result: dict[str, Any], contract: Contract, reveals: Mapping[str, RevealedSet]) -> dict[str, Any]:
    """A sealed check's result with its revealed findings, when its set was revealed; a
    ``revealed_findings`` the record itself carries is never believed (it is dropped).
    """
    facts = result.get("facts")
    if not isinstance(facts, dict) or not isinstance(facts.get("sealed_run"), dict):
        return result
    run = {k: v for k, v in facts["sealed_run"].items() if k != "revealed_findings"}
    check = contract.check(str(result.get("id")))
    sealed = check.param("sealed") if check is not None else None
    if isinstance(sealed, str) and sealed in reveals:
        run["revealed_findings"] = revealed_findings(sealed, run, reveals[sealed])
    return {**result, "facts": {**facts, "sealed_run": run}}


def tally_check_runs(record: TierRecord, contract: Contract, read: EvidenceReader, tally: dict[str, list[int]]) -> None:
    """Add each run of each check of one deterministic record to ``tally`` (check id: [runs,
    passes]), each judged by `derive_check` under ``contract`` (the one the record names):
    the count behind pass^k in `ledger stats` and the web view.
    """
    for ref in record.evidence:
        if not ref.check_id.startswith("check:") or ref.media_type != CHECK_RESULT_MEDIA_TYPE:
            continue
        check = contract.check(ref.check_id[6:].partition("#")[0])
        if check is None:
            continue
        ok, _ = derive_check(check, read(ref.digest, CHECK_RESULT_FORMAT))
        counts = tally.setdefault(check.id, [0, 0])
        counts[0] += 1
        counts[1] += int(ok)


def _protected_changes(contract: Contract, snapshot: Mapping[str, Any]) -> list[str]:
    if not contract.protected_paths:
        return []
    changed = snapshot.get("changed_files")
    if not isinstance(changed, list):
        return ["(the snapshot does not list the changed files)"]
    import fnmatch

    return [str(p) for p in changed if any(fnmatch.fnmatchcase(str(p), g) for g in contract.protected_paths)]


def integrity_failure(reasons: tuple[str, ...]) -> bool:
    """True when a deterministic outcome failed on the process (protected paths, trace)."""
    return any(r.startswith("integrity:") for r in reasons)


def waivers_in_force(
    waivers: Iterable[tuple[int, Waiver, str]], record: TierRecord, record_seq: int
) -> dict[str, list[tuple[int, Waiver, str]]]:
    """§6c: of (seq, waiver, signer) in chain order, those of the record's task and contract,
    appended before the record (at ``record_seq``) and in force at the record's own date,
    by check id.
    """
    found: dict[str, list[tuple[int, Waiver, str]]] = {}
    for seq, waiver, signer in waivers:
        if (
            seq < record_seq
            and waiver.task_id == record.task_id
            and waiver.config_hash == record.config_hash
            and waiver.in_force(record.created)
        ):
            found.setdefault(waiver.check_id, []).append((seq, waiver, signer))
    return found
