"""Completion contracts: the TOML file that configures a task's ladder, and the rule
that says when a new revision weakens the bar.

Parsing takes bytes (no I/O), so the auditor can read contracts out of the ledger.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._digest import Digest, Domain, domain_hash
from ._errors import FormatError
from ._model import FORMAT_VERSION, LADDER, Role, Tier, check_task_id, check_text, utc_text
from ._toolpolicy import ContractError, ToolPolicy, _document, _freeze, _get, _Reader, _strings, _tools, thaw

__all__ = [
    "thaw",
    "ToolPolicy",
    "JudgeSettings",
    "Waiver",
    "ContractRevision",
    "contract_roles",
    "Check",
    "Contract",
    "ContractError",
    "parse_contract",
    "check_for_registration",
    "weakenings",
    "WEAKENING_RULES",
    "SIGNAL_TYPES",
    "NO_OP_KINDS",
]

SIGNAL_TYPES = frozenset(
    {
        "path_exists",
        "test_passes",
        "file_contains",
        "absence_verified",
        "schema_valid",
        "hash_stable",
        "attribution_declared",
    }
)
CONTRACT_KINDS = frozenset({"code", "research", "planning"})
NO_OP_KINDS = frozenset({"research", "planning"})
_CHECK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class Check:
    """One acceptance check. ``params`` keeps the type-specific fields, sorted, as
    (name, value) pairs with lists turned into tuples, so that checks compare exactly.
    """

    id: str
    type: str
    params: tuple[tuple[str, Any], ...]
    # Run by a Stop hook that has a time budget (``[hooks] stop_budget_s``); the others wait
    # for CI. It shapes the agent's loop only (the signed tier runs every check), so a
    # revision that changes it is not a weakening.
    fast: bool = dataclasses.field(default=False, compare=False)
    # A check known to be flaky is run ``runs`` times and passes when ``min_passes`` of them
    # pass (default: all); every attempt is kept as evidence (docs/format.md §6a).
    runs: int = 1
    min_passes: int = 1

    def param(self, name: str, default: Any = None) -> Any:
        return dict(self.params).get(name, default)


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """The judge tier's rules (part of the contract, so part of its config hash) and,
    optionally, its endpoint (which `.ledger/config.toml` may supply instead).
    """

    backend: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    command: tuple[str, ...] = ()
    timeout_s: int | None = None  # unset: .ledger/config.toml's, else 60
    max_retries: int = 2
    max_tokens: int = 1024
    max_diff_chars: int = 10000
    samples: int = 1
    criteria: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Contract:
    task_id: str
    goal: str
    kind: str
    deliverables: tuple[str, ...]
    invariants: tuple[str, ...]
    owned_files: tuple[str, ...]
    evidence_required: tuple[str, ...]
    checks: tuple[Check, ...]
    required_tiers: tuple[Tier, ...]
    judge_threshold_bp: int
    human_approvals: int
    check_timeout_s: int
    total_timeout_s: int
    max_evidence_age_s: int | None
    secret_env: tuple[str, ...]
    parent: str | None = None
    author_model: str | None = None
    judge: JudgeSettings = JudgeSettings()
    protected_paths: tuple[str, ...] = ()
    tools: ToolPolicy = ToolPolicy()
    repair_attempts: int = 5
    no_progress_after: int = 3
    # Separation of duties: an approval by a key that claimed or authored the change (it
    # signed the task's claim, trace or session-end events) does not count.
    independent_approvers: bool = False
    # The Stop hook's time budget: it runs the checks marked fast within it and defers the
    # rest to CI. None: every check, each within its own timeout.
    stop_budget_s: int | None = None
    # The deterministic tier must run in a clean room (``ledger check --clean-room``): a
    # fresh checkout of the candidate with the protected paths and ``test_files`` restored
    # from the base revision (docs/format.md §6a).
    clean_room: bool = False
    test_files: tuple[str, ...] = ()
    # Every command of a clean room runs in a sandbox (docs/format.md §6a): nothing of the
    # runner (keys, ledger, real checkout, parent processes) is reachable from it.
    sandbox: bool = False
    version: int = 1

    @property
    def no_op(self) -> bool:
        return self.kind in NO_OP_KINDS

    def check(self, check_id: str) -> Check | None:
        for c in self.checks:
            if c.id == check_id:
                return c
        return None


_BUDGET_FIELDS = {"check_timeout_s", "total_timeout_s", "repair_attempts", "no_progress_after"}

# Fields every check may hold, whatever its type; the rest are its type's (``params``).
_COMMON_CHECK_FIELDS = frozenset({"id", "type", "fast", "runs", "min_passes"})
MAX_RUNS = 20

_CHECK_FIELDS = {
    "path_exists": ({"path"}, set()),
    # ``sealed``: the digest of a sealed set of held-out files the run needs (§6e);
    # ``max_exposures``: how many candidates of the task may be run against it.
    "test_passes": ({"command"}, {"timeout_s", "shell", "env", "sealed", "max_exposures"}),
    "file_contains": ({"path"}, {"literal", "regex"}),
    "absence_verified": (set(), {"literal", "regex", "path_glob", "paths"}),
    "schema_valid": ({"path", "schema"}, set()),
    "hash_stable": ({"path"}, {"digest", "command"}),
    # Every added line declared by the agents' provenance records (§6d); ``paths`` narrows it.
    "attribution_declared": (set(), {"paths"}),
}


def _check(r: _Reader, raw: Any, i: int) -> Check:
    if not isinstance(raw, dict):
        raise r.fail("must be a table", "id", "checks", i)
    cid = _get(r, raw, "id", str, tname="checks", index=i)
    if _CHECK_ID.fullmatch(cid) is None:
        raise r.fail("must be 1-64 characters of [A-Za-z0-9._-]", "id", "checks", i)
    ctype = _get(r, raw, "type", str, tname="checks", index=i)
    fast = _get(r, raw, "fast", bool, False, tname="checks", index=i)
    runs, min_passes = _runs(r, raw, i)
    # An unknown type is kept, not refused: the runner records it as a fail with a reason.
    params = {k: v for k, v in raw.items() if k not in _COMMON_CHECK_FIELDS}
    if ctype in _CHECK_FIELDS:
        required, optional = _CHECK_FIELDS[ctype]
        # A misspelt field first: "comand" is what the author wrote, "command" what is missing.
        for field in sorted(params.keys() - required - optional):
            raise r.fail(
                "is not a field of a %s check" % ctype + _nearest(field, required | optional), field, "checks", i
            )
        for field in sorted(required - params.keys()):
            raise r.fail("is required for a %s check" % ctype, field, "checks", i)
        if ctype == "file_contains" and ("literal" in params) == ("regex" in params):
            raise r.fail("needs exactly one of literal or regex", "path", "checks", i)
        if ctype == "absence_verified" and not ({"literal", "regex"} & params.keys()):
            raise r.fail("needs a literal or regex to search for", "type", "checks", i)
        if ctype == "hash_stable" and ("digest" in params) == ("command" in params):
            raise r.fail("needs exactly one of digest (pinned) or command (two builds)", "path", "checks", i)
        if ctype == "test_passes":
            cmd = params["command"]
            if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd)) and not (
                isinstance(cmd, str) and params.get("shell") is True
            ):
                raise r.fail(
                    "must be a non-empty list of strings (or a string with shell = true)", "command", "checks", i
                )
            _sealed_fields(r, params, i)
    return Check(cid, ctype, _freeze(params), fast, runs, min_passes)


def _sealed_fields(r: _Reader, params: dict[str, Any], i: int) -> None:
    """A sealed set is named by its digest; its exposure cap, when set, is at least 1."""
    if "sealed" in params:
        try:
            Digest.parse(params["sealed"])
        except FormatError:
            raise r.fail("must be a sealed set's digest, blake3:<64 hex digits>", "sealed", "checks", i) from None
    if "max_exposures" in params:
        if "sealed" not in params:
            raise r.fail("is a limit of a sealed check: set sealed too", "max_exposures", "checks", i)
        cap = params["max_exposures"]
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise r.fail("must be a whole number of at least 1", "max_exposures", "checks", i)


def _runs(r: _Reader, raw: dict[str, Any], i: int) -> tuple[int, int]:
    """A check's ``runs`` and ``min_passes`` (default: all of them)."""
    runs: int = _get(r, raw, "runs", int, 1, tname="checks", index=i)
    if not 1 <= runs <= MAX_RUNS:
        raise r.fail("must be 1 to %d" % MAX_RUNS, "runs", "checks", i)
    min_passes: int = _get(r, raw, "min_passes", int, runs, tname="checks", index=i)
    if not 1 <= min_passes <= runs:
        raise r.fail("must be 1 to runs (%d)" % runs, "min_passes", "checks", i)
    return runs, min_passes


def _tiers(r: _Reader, policy: dict[str, Any]) -> tuple[Tier, ...]:
    names = (
        _strings(r, policy, "required_tiers", "policy")
        if "required_tiers" in policy
        else tuple(t.value for t in LADDER)
    )
    try:
        chosen = {Tier(n) for n in names}
    except ValueError:
        raise r.fail("tiers are deterministic, judge and human", "required_tiers", "policy") from None
    if not chosen:
        raise r.fail("must name at least one tier", "required_tiers", "policy")
    return tuple(t for t in LADDER if t in chosen)


def _nearest(name: str, known: object) -> str:
    """``; did you mean X?`` for the closest known name, or nothing when none is close."""
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=1)  # type: ignore[call-overload]
    return "; did you mean %r?" % close[0] if close else ""


# Every top-level field a version 1 contract may hold.
_CONTRACT_FIELDS = frozenset(
    {
        "version",
        "task",
        "goal",
        "kind",
        "deliverables",
        "invariants",
        "owned_files",
        "evidence_required",
        "checks",
        "policy",
        "budgets",
        "freshness",
        "secret_env",
        "parent",
        "author_model",
        "judge",
        "protected_paths",
        "tools",
        "hooks",
        "test_files",
    }
)
_POLICY_FIELDS = frozenset(
    {"required_tiers", "judge_threshold", "human_approvals", "independent_approvers", "clean_room", "sandbox"}
)
# Version 2 changes two defaults: a code task's checks run in the clean room, and its
# commands in the sandbox, unless its policy opts out. Version 1 keeps its signed meaning
# (both off unless set).
CONTRACT_VERSIONS = frozenset({1, 2})
_HOOKS_FIELDS = frozenset({"stop_budget_s"})


def _stop_budget(r: _Reader, hooks: dict[str, Any]) -> int | None:
    for name in sorted(hooks.keys() - _HOOKS_FIELDS):
        raise r.fail("is not a hooks setting" + _nearest(name, _HOOKS_FIELDS), name, "hooks")
    budget: int | None = _get(r, hooks, "stop_budget_s", int, None, tname="hooks")
    if budget is not None and budget < 1:
        raise r.fail("must be at least 1", "stop_budget_s", "hooks")
    return budget


def _declared_checks(r: _Reader, doc: dict[str, Any]) -> tuple[Check, ...]:
    checks = tuple(_check(r, c, i) for i, c in enumerate(_get(r, doc, "checks", list, [])))
    ids = [c.id for c in checks]
    for i, cid in enumerate(ids):
        if cid in ids[:i]:
            raise r.fail("duplicate check id %r" % cid, "id", "checks", i)
    return checks


def _policy(r: _Reader, policy: dict[str, Any]) -> tuple[float, int, bool]:
    """The policy table's judge threshold, required approvals and independence rule."""
    # A misspelt policy field would otherwise fall back to its default, silently: a lower bar.
    for name in sorted(policy.keys() - _POLICY_FIELDS):
        raise r.fail("is not a policy field" + _nearest(name, _POLICY_FIELDS), name, "policy")
    threshold = _get(r, policy, "judge_threshold", (int, float), 0.7, tname="policy")
    if not 0 <= threshold <= 1:
        raise r.fail("must be between 0 and 1", "judge_threshold", "policy")
    approvals = _get(r, policy, "human_approvals", int, 1, tname="policy")
    if approvals < 0:
        raise r.fail("must not be negative", "human_approvals", "policy")
    return threshold, approvals, _get(r, policy, "independent_approvers", bool, False, tname="policy")


def _timeouts(r: _Reader, budgets: dict[str, Any]) -> tuple[int, int]:
    check_timeout = _get(r, budgets, "check_timeout_s", int, 300, tname="budgets")
    total_timeout = _get(r, budgets, "total_timeout_s", int, 1800, tname="budgets")
    if not 0 < check_timeout <= total_timeout:
        raise r.fail("must be positive and at most total_timeout_s", "check_timeout_s", "budgets")
    for field in sorted(budgets.keys() - _BUDGET_FIELDS):
        raise r.fail("is not a budget" + _nearest(field, _BUDGET_FIELDS), field, "budgets")
    return check_timeout, total_timeout


def check_for_registration(data: bytes, source: str = "contract") -> Contract:
    """Parse a contract as a writer must before signing it: everything `parse_contract`
    refuses, and also a check type this runner does not know (which a verifier keeps, and
    fails, in a contract already signed), named with its line and the nearest known type.

    Raises:
        ContractError: the first problem, as ``SOURCE:LINE: FIELD: message``.
    """
    contract = parse_contract(data, source)
    r, _ = _document(data, source)
    for i, check in enumerate(contract.checks):
        if check.type not in SIGNAL_TYPES:
            known = "known: %s" % ", ".join(sorted(SIGNAL_TYPES))
            raise r.fail(
                "%r is not a check type%s (%s)" % (check.type, _nearest(check.type, SIGNAL_TYPES), known),
                "type",
                "checks",
                i,
            )
    return contract


def parse_contract(data: bytes, source: str = "contract") -> Contract:
    """Parse a contract's exact bytes (whose config hash the tier records carry)."""
    r, doc = _document(data, source)
    version = _get(r, doc, "version", int, 1)
    if version not in CONTRACT_VERSIONS:
        raise r.fail("versions 1 and 2 are known", "version")
    task = _get(r, doc, "task", str)
    try:
        check_task_id(task)
    except FormatError as exc:
        raise r.fail(str(exc), "task") from None
    kind = _get(r, doc, "kind", str, "code")
    if kind not in CONTRACT_KINDS:
        raise r.fail("must be one of %s" % ", ".join(sorted(CONTRACT_KINDS)), "kind")
    checks = _declared_checks(r, doc)
    policy = _get(r, doc, "policy", dict, {})
    threshold, approvals, independent = _policy(r, policy)
    budgets = _get(r, doc, "budgets", dict, {})
    check_timeout, total_timeout = _timeouts(r, budgets)
    secure_default = version >= 2 and kind == "code"
    clean_room = _get(r, policy, "clean_room", bool, secure_default, tname="policy")
    freshness = _get(r, doc, "freshness", dict, {})
    max_age = _get(r, freshness, "max_evidence_age_s", int, None, tname="freshness")
    for field in sorted(doc.keys() - _CONTRACT_FIELDS):
        raise r.fail("is not a contract field" + _nearest(field, _CONTRACT_FIELDS), field)
    return Contract(
        task_id=task,
        goal=_get(r, doc, "goal", str, ""),
        kind=kind,
        deliverables=_strings(r, doc, "deliverables"),
        invariants=_strings(r, doc, "invariants"),
        owned_files=_strings(r, doc, "owned_files"),
        evidence_required=_strings(r, doc, "evidence_required"),
        checks=checks,
        required_tiers=_tiers(r, policy),
        judge_threshold_bp=round(threshold * 10000),
        human_approvals=approvals,
        check_timeout_s=check_timeout,
        total_timeout_s=total_timeout,
        max_evidence_age_s=max_age,
        secret_env=_strings(r, doc, "secret_env"),
        parent=_parent(r, doc),
        author_model=_get(r, doc, "author_model", str, None),
        judge=_judge(r, _get(r, doc, "judge", dict, {})),
        protected_paths=_strings(r, doc, "protected_paths"),
        tools=_tools(r, _get(r, doc, "tools", dict, {})),
        repair_attempts=_positive(r, budgets, "repair_attempts", 5),
        no_progress_after=_positive(r, budgets, "no_progress_after", 3),
        independent_approvers=independent,
        stop_budget_s=_stop_budget(r, _get(r, doc, "hooks", dict, {})),
        clean_room=clean_room,
        test_files=_strings(r, doc, "test_files"),
        # On with the clean room from version 2; version 1 keeps the meaning it was signed with.
        sandbox=_get(r, policy, "sandbox", bool, clean_room and version >= 2, tname="policy"),
        version=version,
    )


def _positive(r: _Reader, table: dict[str, Any], name: str, default: int) -> int:
    value: int = _get(r, table, name, int, default, tname="budgets")
    if value < 1:
        raise r.fail("must be at least 1", name, "budgets")
    return value


_JUDGE_FIELDS = {
    "backend",
    "base_url",
    "model",
    "api_key_env",
    "command",
    "timeout_s",
    "max_retries",
    "max_tokens",
    "max_diff_chars",
    "samples",
    "criteria",
}


def _judge(r: _Reader, table: dict[str, Any]) -> JudgeSettings:
    for field in sorted(table.keys() - _JUDGE_FIELDS):
        raise r.fail("is not a judge setting", field, "judge")
    backend = _get(r, table, "backend", str, None, tname="judge")
    if backend not in (None, "openai", "command"):
        raise r.fail("must be openai or command", "backend", "judge")
    ints = {}
    timeout = _get(r, table, "timeout_s", int, None, tname="judge")
    if timeout is not None and timeout < 1:
        raise r.fail("must be at least 1", "timeout_s", "judge")
    for name, default, low in (
        ("max_retries", 2, 0),
        ("max_tokens", 1024, 1),
        ("max_diff_chars", 10000, 0),
        ("samples", 1, 1),
    ):
        value = _get(r, table, name, int, default, tname="judge")
        if value < low:
            raise r.fail("must be at least %d" % low, name, "judge")
        ints[name] = value
    return JudgeSettings(
        backend=backend,
        base_url=_get(r, table, "base_url", str, None, tname="judge"),
        model=_get(r, table, "model", str, None, tname="judge"),
        api_key_env=_get(r, table, "api_key_env", str, None, tname="judge"),
        command=_strings(r, table, "command", "judge"),
        criteria=_strings(r, table, "criteria", "judge"),
        timeout_s=timeout,
        **ints,
    )


def _parent(r: _Reader, doc: dict[str, Any]) -> str | None:
    parent: str | None = _get(r, doc, "parent", str, None)
    if parent is not None:
        try:
            check_task_id(parent)
        except FormatError as exc:
            raise r.fail(str(exc), "parent") from None
    return parent


def _dropped(old: tuple[str, ...], new: tuple[str, ...], what: str) -> list[str]:
    return ["%s dropped: %s" % (what, item) for item in old if item not in new]


def _changed(old: object, new: object, what: str) -> list[str]:
    return [] if old == new else ["%s changed from %r to %r" % (what, old, new)]


def _checks(old: Contract, new: Contract) -> list[str]:
    found = []
    for check in old.checks:
        now = new.check(check.id)
        if now is None:
            found.append("check %s was dropped" % check.id)
        elif now != check:
            found.append("check %s was changed" % check.id)
    return found


def _raised(old: int | None, new: int | None, what: str) -> list[str]:
    # None means no limit: from a limit to none is raised too.
    if old is not None and (new is None or new > old):
        return ["%s raised from %s to %s" % (what, old, "no limit" if new is None else new)]
    return []


def _lowered(old: int, new: int, what: str) -> list[str]:
    return ["%s lowered from %d to %d" % (what, old, new)] if new < old else []


def _more_tools(old: ToolPolicy, new: ToolPolicy) -> list[str]:
    return (
        ["more tools are allowed"] if old.allowed and (not new.allowed or set(new.allowed) - set(old.allowed)) else []
    )


def _schemas(old: ToolPolicy, new: ToolPolicy) -> list[str]:
    now = dict(new.schemas)
    return [
        "the argument schema of tool %s was changed or dropped" % name
        for name, schema in old.schemas
        if now.get(name) != schema
    ]


# Every way a revision can lower the bar, by a stable name (docs/format.md §5a lists the same
# names; a test keeps the two equal). A revision that does only what no rule names tightens it.
WEAKENING_RULES: tuple[tuple[str, Callable[[Contract, Contract], list[str]]], ...] = (
    ("check-dropped-or-changed", _checks),
    (
        "tier-no-longer-required",
        lambda o, n: ["tier %s is no longer required" % t for t in o.required_tiers if t not in n.required_tiers],
    ),
    (
        "judge-threshold-lowered",
        lambda o, n: _lowered(o.judge_threshold_bp, n.judge_threshold_bp, "judge threshold (basis points)"),
    ),
    ("human-approvals-lowered", lambda o, n: _lowered(o.human_approvals, n.human_approvals, "human approvals")),
    (
        "independent-approvers-dropped",
        lambda o, n: (
            ["approvers no longer have to differ from the keys that claimed or authored the change"]
            if o.independent_approvers and not n.independent_approvers
            else []
        ),
    ),
    (
        "clean-room-dropped",
        lambda o, n: (
            ["the deterministic tier no longer has to run in a clean room"] if o.clean_room and not n.clean_room else []
        ),
    ),
    (
        "sandbox-dropped",
        lambda o, n: (
            ["the clean room's commands no longer have to run in a sandbox"] if o.sandbox and not n.sandbox else []
        ),
    ),
    ("test-file-dropped", lambda o, n: _dropped(o.test_files, n.test_files, "test file (restored in a clean room)")),
    (
        "no-op-kind",
        lambda o, n: (
            ["task kind changed from %s to the no-op kind %s" % (o.kind, n.kind)] if not o.no_op and n.no_op else []
        ),
    ),
    ("evidence-age-raised", lambda o, n: _raised(o.max_evidence_age_s, n.max_evidence_age_s, "the evidence age limit")),
    (
        "evidence-no-longer-required",
        lambda o, n: _dropped(o.evidence_required, n.evidence_required, "required evidence"),
    ),
    ("goal-changed", lambda o, n: _changed(o.goal, n.goal, "the goal")),
    ("deliverable-dropped", lambda o, n: _dropped(o.deliverables, n.deliverables, "deliverable")),
    ("invariant-dropped", lambda o, n: _dropped(o.invariants, n.invariants, "invariant")),
    (
        "owned-files-widened",
        lambda o, n: ["owned files widened: %s" % p for p in n.owned_files if p not in o.owned_files],
    ),
    ("secret-name-dropped", lambda o, n: _dropped(o.secret_env, n.secret_env, "secret name (no longer redacted)")),
    (
        "author-model-changed",
        lambda o, n: _changed(o.author_model, n.author_model, "the declared author model") if o.author_model else [],
    ),
    (
        "judge-replaced",
        lambda o, n: [
            msg
            for field in ("backend", "base_url", "model", "api_key_env", "command")
            for msg in _changed(getattr(o.judge, field), getattr(n.judge, field), "the judge's %s" % field)
        ],
    ),
    ("judge-retries-raised", lambda o, n: _raised(o.judge.max_retries, n.judge.max_retries, "judge retries")),
    ("judge-samples-lowered", lambda o, n: _lowered(o.judge.samples, n.judge.samples, "judge samples")),
    (
        "judge-sees-less",
        lambda o, n: _lowered(
            o.judge.max_diff_chars, n.judge.max_diff_chars, "the diff shown to the judge (characters)"
        ),
    ),
    ("judge-criterion-dropped", lambda o, n: _dropped(o.judge.criteria, n.judge.criteria, "judge criterion")),
    ("protected-path-dropped", lambda o, n: _dropped(o.protected_paths, n.protected_paths, "protected path")),
    (
        "tool-no-longer-denied",
        lambda o, n: ["tool %s is no longer denied" % t for t in o.tools.denied if t not in n.tools.denied],
    ),
    (
        "tool-no-longer-requires-human",
        lambda o, n: [
            "tool %s no longer requires a human" % t for t in o.tools.requires_human if t not in n.tools.requires_human
        ],
    ),
    ("more-tools-allowed", lambda o, n: _more_tools(o.tools, n.tools)),
    ("step-limit-raised", lambda o, n: _raised(o.tools.max_steps, n.tools.max_steps, "the step limit")),
    ("tool-schema-changed", lambda o, n: _schemas(o.tools, n.tools)),
    ("repair-budget-raised", lambda o, n: _raised(o.repair_attempts, n.repair_attempts, "the repair budget")),
    (
        "no-progress-budget-raised",
        lambda o, n: _raised(o.no_progress_after, n.no_progress_after, "the no-progress budget"),
    ),
)


def weakenings(old: Contract, new: Contract) -> tuple[str, ...]:
    """How ``new`` lowers the bar set by ``old``: one line per change any rule of
    `WEAKENING_RULES` names (ADR 0017). Any change to an existing check counts: we cannot
    tell a tightened command from a loosened one, so we do not try; likewise any change to
    who judges, and to the goal.
    """
    return tuple(line for _, rule in WEAKENING_RULES for line in rule(old, new))


MAX_CONTRACT_SIZE = 256 * 1024


@dataclass(frozen=True, slots=True)
class ContractRevision:
    """A chain body recording one revision of a task's contract: its exact bytes, the
    config hash of the revision it replaces (None for the first), and, as a waiver does,
    why it was made and where its criteria came from (a person, a ticket or the agent):
    a revision that weakens the contract is refused without a reason (§3.4a).
    """

    task_id: str
    contract: bytes
    previous: Digest | None
    reason: str = ""  # empty: none recorded (encoded without the key)
    criteria_from: str = ""
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported contract revision version %r" % (self.version,))
        check_task_id(self.task_id)
        check_text(self.reason, "a contract revision's reason", empty_ok=True, limit=4096)
        check_text(self.criteria_from, "where a contract revision's criteria came from", empty_ok=True, limit=512)
        if not isinstance(self.contract, bytes) or not 0 < len(self.contract) <= MAX_CONTRACT_SIZE:
            raise FormatError("contract bytes must be 1 to %d bytes" % MAX_CONTRACT_SIZE)
        if self.previous is not None and not isinstance(self.previous, Digest):
            raise FormatError("previous must be a Digest")

    @property
    def config_hash(self) -> Digest:
        return domain_hash(Domain.CONFIG, self.contract)

    def provenance(self) -> str:
        """The reason and the criteria's source in words, for a weakening's line."""
        said = "reason: %s" % self.reason if self.reason else "NO REASON RECORDED"
        return said + ("; criteria from: %s" % self.criteria_from if self.criteria_from else "")

    def parse(self) -> Contract:
        contract = parse_contract(self.contract, "contract of %s" % self.task_id)
        if contract.task_id != self.task_id:
            raise ContractError("contract of %s names task %s" % (self.task_id, contract.task_id))
        return contract


def contract_roles(weakening: bool) -> tuple[Role, ...]:
    """Who may sign a contract revision: the deterministic runner or an admin may record
    one that keeps or raises the bar; only an admin may lower it.
    """
    return (Role.ADMIN,) if weakening else (Role.DETERMINISTIC, Role.ADMIN)


@dataclass(frozen=True, slots=True)
class Waiver:
    """An admin's decision that one failing check of one contract revision stops blocking
    a task until ``expires``.
    """

    task_id: str
    check_id: str
    config_hash: Digest
    reason: str
    expires: int
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FormatError("unsupported waiver version %r" % (self.version,))
        check_task_id(self.task_id)
        if not isinstance(self.check_id, str) or _CHECK_ID.fullmatch(self.check_id) is None:
            raise FormatError("waiver check id must be 1-64 characters of [A-Za-z0-9._-]")
        if not isinstance(self.config_hash, Digest):
            raise FormatError("waiver config must be a Digest")
        if not isinstance(self.reason, str) or not self.reason.strip() or len(self.reason) > 4096:
            raise FormatError("a waiver needs a reason")
        if isinstance(self.expires, bool) or not isinstance(self.expires, int) or not 0 < self.expires < (1 << 40):
            raise FormatError("waiver expiry must be a positive integer time")

    def in_force(self, at: int) -> bool:
        """Whether the waiver still holds at time ``at`` (it ends at ``expires``, exclusive)."""
        return at < self.expires

    def describe(self, seq: int, signer: str) -> str:
        """The one wording of a waiver, wherever it is shown (status, check, verify, reports).

        Args:
            seq: the position of the waiver's entry.
            signer: who signed it, as the caller names keys.
        """
        return "entry %d: %s waived %s until %s: %s" % (seq, signer, self.check_id, utc_text(self.expires), self.reason)
