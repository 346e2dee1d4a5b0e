"""Which task a change is: ids found in branch names and titles as the docs write them
(``T-1``), a team's own pattern from ``.ledger/config.toml``, and in a merge queue the pull
request being merged, never the queue's branch (``gh-readonly-queue/main/pr-7-...``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import InputError, find_task, parse_event, task_from, task_pattern


def _pull_request(branch: str, title: str) -> dict[str, object]:
    return {
        "pull_request": {
            "number": 7,
            "title": title,
            "head": {"sha": "a" * 40, "ref": branch},
            "base": {"ref": "main"},
        }
    }


def _merge_group(pr: int, message: str) -> dict[str, object]:
    return {
        "merge_group": {
            "head_sha": "b" * 40,
            "head_ref": "refs/heads/gh-readonly-queue/main/pr-%d-%s" % (pr, "c" * 40),
            "base_ref": "refs/heads/main",
            "head_commit": {"message": message + "\n\nCo-authored-by: someone"},
        }
    }


@pytest.mark.parametrize(
    ("branch", "title", "task"),
    [
        ("T-1-friendlier-greeting", "", "T-1"),  # the docs' own id: one letter
        ("feature/t-12", "", "T-12"),
        ("cleanup", "TASK-3: tidy", "TASK-3"),
        ("abc-123-x", "T-9 elsewhere", "ABC-123"),  # the branch first
    ],
)
def test_the_docs_ids_are_found_in_branches_and_titles(branch: str, title: str, task: str) -> None:
    event = parse_event("pull_request", _pull_request(branch, title))
    assert task_from(event, "") == task


def test_a_merge_queue_takes_the_task_from_the_pull_request_not_the_queue_branch() -> None:
    event = parse_event("merge_group", _merge_group(7, "T-1: friendlier greeting (#7)"))
    assert "pr-7" in event.head_ref  # what an id search of the branch would pick
    assert task_from(event, "") == "T-1"


def test_a_queue_commit_without_a_task_id_is_no_task_not_pr_7() -> None:
    event = parse_event("merge_group", _merge_group(7, "friendlier greeting (#7)"))
    with pytest.raises(InputError, match="no task id"):
        task_from(event, "")


def test_a_team_pattern_from_config_toml_is_used(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('task_pattern = "ENG_[0-9]+"\n')
    pattern = task_pattern(tmp_path)
    event = parse_event("pull_request", _pull_request("feat/eng_42-search", ""))
    assert task_from(event, "", pattern) == "ENG_42"
    assert find_task("T-1 is not ours", pattern) is None


def test_without_a_pattern_the_default_holds_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    assert find_task("see T-1", task_pattern(tmp_path)) == "T-1"
    (tmp_path / "config.toml").write_text('task_pattern = "([unclosed"\n')
    with pytest.raises(ValueError, match="not a regular expression"):
        task_pattern(tmp_path)


def test_an_id_inside_a_longer_word_or_number_is_not_one() -> None:
    assert find_task("XT-12a") is None
    assert find_task("T-123456") == "T-123456"
    assert find_task("version2-3") == "VERSION2-3"
