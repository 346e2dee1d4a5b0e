"""Completion contracts (groundwork for issue 3): parsing, located errors, weakening."""

from __future__ import annotations

import dataclasses

import pytest

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
        "judge threshold lowered from 8000 to 5000 basis points",
    }
    noop = r.parse_contract(EXAMPLE.replace(b'kind = "code"', b'kind = "research"'))
    assert r.weakenings(old, noop) == ("task kind changed from code to the no-op kind research",)
    stronger = r.parse_contract(
        EXAMPLE + b'\n[[checks]]\nid = "lint"\ntype = "test_passes"\ncommand = ["ruff", "check"]\n'
    )
    assert r.weakenings(old, stronger) == ()
