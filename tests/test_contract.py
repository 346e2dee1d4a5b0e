"""Completion contracts: parsing, located errors, weakening."""

from __future__ import annotations

import dataclasses

import pytest
from docs_as_written import blocks

import receipts as r

EXAMPLE = b"""version = 1
task = "TASK-7"
goal = "greet() returns a friendly greeting"
kind = "code"
owned_files = ["greet.py", "test_greet.py"]
evidence_required = ["tests"]
secret_env = ["API_TOKEN"]

[policy]
required_tiers = ["deterministic", "judge", "human"]
judge_threshold = 0.8
human_approvals = 2

[budgets]
check_timeout_s = 60
total_timeout_s = 600

[freshness]
max_evidence_age_s = 86400

[[checks]]
id = "tests"
type = "test_passes"
command = ["python", "-m", "pytest", "-q"]

[[checks]]
id = "readme"
type = "file_contains"
path = "README.md"
literal = "Quickstart"
"""


def test_example_contract_parses() -> None:
    c = r.parse_contract(EXAMPLE, "TASK-7.toml")
    assert c.task_id == "TASK-7" and c.judge_threshold_bp == 8000 and c.human_approvals == 2
    assert [x.id for x in c.checks] == ["tests", "readme"]
    assert c.check("tests") is not None and c.check("tests").param("command") == ("python", "-m", "pytest", "-q")  # type: ignore[union-attr]
    assert c.required_tiers == r.LADDER and not c.no_op


@pytest.mark.parametrize(
    "old,new,line,field",
    [
        (b"judge_threshold = 0.8", b"judge_threshold = 1.8", 11, "policy.judge_threshold"),
        (b'literal = "Quickstart"', b'literal = "Quickstart"\nregex = "Q"', 29, "checks[1].path"),
        (b'command = ["python", "-m", "pytest", "-q"]', b'command = "pytest"', 24, "checks[0].command"),
        (b'task = "TASK-7"', b'task = "bad task"', 2, "task"),
        (b'kind = "code"', b'kind = "essay"', 4, "kind"),
        (b"human_approvals = 2", b'human_approvals = "two"', 12, "policy.human_approvals"),
        (b'type = "file_contains"', b'type = "file_contains"\ncolour = "red"', 29, "checks[1].colour"),
    ],
)
def test_errors_name_file_line_and_field(old: bytes, new: bytes, line: int, field: str) -> None:
    with pytest.raises(r.ContractError) as err:
        r.parse_contract(EXAMPLE.replace(old, new), "TASK-7.toml")
    assert str(err.value).startswith("TASK-7.toml:%d: %s:" % (line, field)), str(err.value)


def test_toml_syntax_error_names_file_and_line() -> None:
    with pytest.raises(r.ContractError, match=r"TASK-7.toml: .*line 2"):
        r.parse_contract(b"version = 1\ntask = \n", "TASK-7.toml")


def test_unknown_signal_type_is_kept_for_the_runner_to_fail() -> None:
    c = r.parse_contract(EXAMPLE + b'\n[[checks]]\nid = "vibes"\ntype = "looks_good"\n')
    assert c.check("vibes") is not None and c.check("vibes").type not in r.SIGNAL_TYPES  # type: ignore[union-attr]


def test_weakenings() -> None:
    old = r.parse_contract(EXAMPLE)
    assert r.weakenings(old, old) == ()
    dropped = dataclasses.replace(old, checks=old.checks[1:])
    assert r.weakenings(old, dropped) == ("check tests was dropped",)
    echo = r.parse_contract(EXAMPLE.replace(b'["python", "-m", "pytest", "-q"]', b'["echo", "PASS"]'))
    assert r.weakenings(old, echo) == ("check tests was changed",)
    lower = r.parse_contract(EXAMPLE.replace(b"0.8", b"0.5").replace(b'"judge", "human"', b'"judge"'))
    assert set(r.weakenings(old, lower)) == {
        "tier human is no longer required",
        "judge threshold (basis points) lowered from 8000 to 5000",
    }
    noop = r.parse_contract(EXAMPLE.replace(b'kind = "code"', b'kind = "research"'))
    assert r.weakenings(old, noop) == ("task kind changed from code to the no-op kind research",)
    stronger = r.parse_contract(
        EXAMPLE + b'\n[[checks]]\nid = "lint"\ntype = "test_passes"\ncommand = ["ruff", "check"]\n'
    )
    assert r.weakenings(old, stronger) == ()


BASE = dataclasses.replace(
    r.parse_contract(EXAMPLE),
    deliverables=("greet.py",),
    invariants=("no network",),
    author_model="claude-sonnet",
    independent_approvers=True,
    protected_paths=(".github/*",),
    judge=r.JudgeSettings(
        backend="openai",
        base_url="http://127.0.0.1:1/v1",
        model="gpt-4.1-mini",
        api_key_env="K",
        criteria=("is friendly",),
        samples=3,
        max_retries=1,
        max_diff_chars=5000,
    ),
    tools=r.ToolPolicy(
        allowed=("read", "edit"),
        denied=("shell",),
        requires_human=("deploy",),
        max_steps=10,
        schemas=(("edit", (("type", "object"),)),),
    ),
    repair_attempts=3,
    no_progress_after=2,
    clean_room=True,
    sandbox=True,
    test_files=("tests/*",),
)
J, T = BASE.judge, BASE.tools
# One revision per rule of ADR 0017, each lowering the bar in exactly the way the rule names.
WEAKER = {
    "check-dropped-or-changed": dataclasses.replace(BASE, checks=BASE.checks[1:]),
    "tier-no-longer-required": dataclasses.replace(BASE, required_tiers=BASE.required_tiers[:2]),
    "judge-threshold-lowered": dataclasses.replace(BASE, judge_threshold_bp=5000),
    "human-approvals-lowered": dataclasses.replace(BASE, human_approvals=1),
    "no-op-kind": dataclasses.replace(BASE, kind="planning"),
    "evidence-age-raised": dataclasses.replace(BASE, max_evidence_age_s=None),
    "evidence-no-longer-required": dataclasses.replace(BASE, evidence_required=()),
    "goal-changed": dataclasses.replace(BASE, goal="greet() returns something"),
    "deliverable-dropped": dataclasses.replace(BASE, deliverables=()),
    "invariant-dropped": dataclasses.replace(BASE, invariants=()),
    "owned-files-widened": dataclasses.replace(BASE, owned_files=BASE.owned_files + ("**",)),
    "secret-name-dropped": dataclasses.replace(BASE, secret_env=()),
    "author-model-changed": dataclasses.replace(BASE, author_model="gpt-4.1"),
    "judge-replaced": dataclasses.replace(BASE, judge=dataclasses.replace(J, backend="command", command=("true",))),
    "judge-retries-raised": dataclasses.replace(BASE, judge=dataclasses.replace(J, max_retries=5)),
    "judge-samples-lowered": dataclasses.replace(BASE, judge=dataclasses.replace(J, samples=1)),
    "judge-sees-less": dataclasses.replace(BASE, judge=dataclasses.replace(J, max_diff_chars=100)),
    "judge-criterion-dropped": dataclasses.replace(BASE, judge=dataclasses.replace(J, criteria=())),
    "protected-path-dropped": dataclasses.replace(BASE, protected_paths=()),
    "tool-no-longer-denied": dataclasses.replace(BASE, tools=dataclasses.replace(T, denied=())),
    "tool-no-longer-requires-human": dataclasses.replace(BASE, tools=dataclasses.replace(T, requires_human=())),
    "more-tools-allowed": dataclasses.replace(BASE, tools=dataclasses.replace(T, allowed=("read", "edit", "shell"))),
    "step-limit-raised": dataclasses.replace(BASE, tools=dataclasses.replace(T, max_steps=None)),
    "tool-schema-changed": dataclasses.replace(BASE, tools=dataclasses.replace(T, schemas=())),
    "repair-budget-raised": dataclasses.replace(BASE, repair_attempts=9),
    "no-progress-budget-raised": dataclasses.replace(BASE, no_progress_after=9),
    "independent-approvers-dropped": dataclasses.replace(BASE, independent_approvers=False),
    "clean-room-dropped": dataclasses.replace(BASE, clean_room=False),
    "sandbox-dropped": dataclasses.replace(BASE, sandbox=False),
    "test-file-dropped": dataclasses.replace(BASE, test_files=()),
}
RULES = dict(r.WEAKENING_RULES)


def test_every_weakening_rule_has_a_case() -> None:
    assert set(WEAKER) == set(RULES)


@pytest.mark.parametrize("name", sorted(WEAKER))
def test_each_weakening_is_caught_by_its_own_rule(name: str) -> None:
    weaker = WEAKER[name]
    assert RULES[name](BASE, weaker), name
    assert r.weakenings(BASE, weaker)
    assert [rule for rule, check in RULES.items() if check(BASE, weaker)] == [name]  # the case is that change alone
    assert r.weakenings(BASE, BASE) == () and not RULES[name](weaker, weaker)


def test_judge_replacement_names_each_changed_field() -> None:
    other = dataclasses.replace(BASE, judge=dataclasses.replace(J, base_url="http://evil.example/v1", model="yes-man"))
    assert {line.split(" changed")[0] for line in r.weakenings(BASE, other)} == {
        "the judge's base_url",
        "the judge's model",
    }


def test_tightening_is_not_weakening() -> None:
    tighter = dataclasses.replace(
        BASE,
        owned_files=BASE.owned_files[:1],
        deliverables=BASE.deliverables + ("README.md",),
        human_approvals=3,
        judge=dataclasses.replace(J, samples=5, criteria=J.criteria + ("has tests",), max_retries=0),
        tools=dataclasses.replace(T, denied=T.denied + ("rm",), max_steps=5),
        repair_attempts=1,
    )
    assert r.weakenings(BASE, tighter) == ()


def test_the_agents_loop_settings_are_not_weakenings() -> None:
    # They choose what the Stop hook runs in the agent's loop; the signed tier runs every
    # check whatever they say, so loosening them lowers no bar.
    assert BASE.checks, "the base contract needs a check for this test"
    looser = dataclasses.replace(
        BASE, stop_budget_s=1, checks=tuple(dataclasses.replace(c, fast=not c.fast) for c in BASE.checks)
    )
    assert r.weakenings(BASE, looser) == ()
    changed = dataclasses.replace(BASE, checks=tuple(dataclasses.replace(c, id=c.id + "x") for c in BASE.checks))
    assert r.weakenings(BASE, changed) != ()  # while any other change to a check still is


def test_the_stop_budget_of_the_docs_parses_as_they_say() -> None:
    (example,) = blocks("agents.md", "The repair loop", "toml")
    contract = r.parse_contract(b'task = "T-1"\n' + example.text.encode())
    assert contract.stop_budget_s == 30
    assert [(check.id, check.fast) for check in contract.checks] == [("lint", True)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('task = "T-1"\npolcy = {}\n', "contract:2: polcy: is not a contract field; did you mean 'policy'?"),
        (
            'task = "T-1"\n[budgets]\ncheck_timeout = 5\n',
            "contract:3: budgets.check_timeout: is not a budget; did you mean 'check_timeout_s'?",
        ),
        (
            'task = "T-1"\n[[checks]]\nid = "t"\ntype = "test_passes"\ncomand = ["true"]\n',
            "contract:5: checks[0].comand: is not a field of a test_passes check; did you mean 'command'?",
        ),
    ],
)
def test_a_misspelt_field_is_named_with_its_line_and_the_nearest_name(text: str, said: str) -> None:
    with pytest.raises(r.ContractError) as caught:
        r.parse_contract(text.encode())
    assert str(caught.value) == said


def test_a_revision_records_its_reason_and_source_only_when_given() -> None:
    plain = r.ContractRevision("TASK-7", EXAMPLE, None)
    said = r.ContractRevision("TASK-7", EXAMPLE, None, "lint is advisory", "ticket OPS-12")
    # Without them, the body is the four keys it always was (its hash unchanged).
    assert set(r.canonical_loads(r.encode_body(plain))) == {"v", "task", "contract", "previous"}
    fields = r.canonical_loads(r.encode_body(said))
    assert (fields["reason"], fields["from"]) == ("lint is advisory", "ticket OPS-12")
    assert r.decode_as(r.ContractRevision, r.encode_body(said)) == said
    assert r.decode_as(r.ContractRevision, r.encode_body(plain)) == plain
    assert said.provenance() == "reason: lint is advisory; criteria from: ticket OPS-12"
    assert plain.provenance() == "NO REASON RECORDED"
    for bad in ({**fields, "from": ""}, {**fields, "why": "x"}, {**fields, "reason": 7}):
        with pytest.raises(r.FormatError):
            r.decode_as(r.ContractRevision, r.canonical_dumps(bad))
    with pytest.raises(r.FormatError, match="control characters"):
        r.ContractRevision("TASK-7", EXAMPLE, None, "a\x1b[2Jcleared screen")
