"""action.yml and every workflow in docs/ pass actionlint and zizmor, and the
linters are shown to catch what they are here to catch."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        message = "%s is not installed (it is in the test extra: pip install -e '.[test]')" % name
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def doc_workflows() -> list[tuple[str, str]]:
    """Every YAML block in docs/*.md that is a workflow (it has `on:` and `jobs:`)."""
    found = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for i, block in enumerate(_BLOCK.findall(doc.read_text(encoding="utf-8"))):
            if re.search(r"^on:", block, re.M) and re.search(r"^jobs:", block, re.M):
                found.append(("%s-%d" % (doc.stem, i), block))
    return found


def _workspace(tmp_path: Path) -> Path:
    """A repository holding our action at its root and the docs' workflows, as a team's would."""
    ws = tmp_path / "ws"
    (ws / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(ROOT / "action.yml", ws / "action.yml")
    for name, block in doc_workflows():
        (ws / ".github" / "workflows" / (name + ".yml")).write_text(block)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # --offline, and no token in reach: a linter here never reaches GitHub.
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN")}
    env["NO_COLOR"] = "1"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_docs_hold_the_complete_workflow_in_fewer_than_30_lines() -> None:
    workflows = dict(doc_workflows())
    assert "ci-0" in workflows, sorted(workflows)
    ci = workflows["ci-0"]
    assert len(ci.strip().splitlines()) < 30
    assert re.search(r"^  pull_request:", ci, re.M) and re.search(r"^  merge_group:", ci, re.M)
    # Every input the doc passes is one action.yml declares.
    declared = set(re.findall(r"^  ([a-z-]+):\n    description:", (ROOT / "action.yml").read_text(), re.M))
    used = set(re.findall(r"^          ([a-z-]+): \$\{\{ secrets\.", ci, re.M))
    assert used and used <= declared, (used, declared)


def test_zizmor_finds_nothing_in_the_action_and_the_docs(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    res = _run([_tool("zizmor"), "--offline", "--no-progress", "action.yml", ".github/workflows"], ws)
    assert res.returncode == 0, res.stdout + res.stderr


def test_actionlint_finds_nothing_in_the_docs_and_checks_the_action_they_use(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    # actionlint reads a local action's metadata when a workflow uses it: point each at ours.
    for name, block in doc_workflows():
        local = re.sub(r"uses: OWNER/receipt-ledger@[0-9a-f]{40} # v1", "uses: ./", block)
        assert local != block, name
        (ws / ".github" / "workflows" / ("local-%s.yml" % name)).write_text(local)
    res = _run([_tool("actionlint"), "-no-color", "-shellcheck=", "-pyflakes="], ws)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_linters_do_catch_what_they_are_for(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    workflow = ws / ".github" / "workflows" / "ci-0.yml"
    text = workflow.read_text()
    # A script injection (the title is attacker-controlled) and an input the action lacks.
    bad = text.replace(
        "      # Pin the commit",
        "      - run: echo ${{ github.event.pull_request.title }}\n      # Pin the commit",
    )
    workflow.write_text(bad)
    assert _run([_tool("zizmor"), "--offline", "--no-progress", ".github/workflows"], ws).returncode != 0
    local = re.sub(r"uses: OWNER/receipt-ledger@[0-9a-f]{40} # v1", "uses: ./", text).replace(
        "seal-key:", "sealing-key:"
    )
    workflow.write_text(local)
    linted = _run([_tool("actionlint"), "-no-color", "-shellcheck=", "-pyflakes="], ws)
    assert linted.returncode != 0 and "sealing-key" in linted.stdout, linted.stdout
