"""A GitHub Actions runner for one job, as strict as the hosted one about what our docs use.

It reads the workflow (from `docs/ci.md`, as written) and our `action.yml`, evaluates
`${{ }}` expressions against the runner's contexts (`github` with the event payload,
`inputs`, `secrets`, `steps`, `runner`), and runs each step as the runner does:

- `actions/checkout@SHA`: a fresh `git init`, a depth-1 fetch of exactly the commit the
  workflow asks for, checked out detached (no branches, tags, notes or receipt refs), with
  `origin` left configured (`persist-credentials`), as actions/checkout v4 leaves it;
- our composite action: each `run:` step written to a script file and run by
  `bash --noprofile --norc -eo pipefail FILE` with the step's `env:`, a fresh
  `$GITHUB_OUTPUT` file per step (outputs read back in both of its syntaxes), the job's
  `$GITHUB_STEP_SUMMARY`, `if: always()` honoured and any other step skipped after a
  failure; the action's outputs evaluated from its steps' outputs;
- `actions/upload-artifact@SHA` in the composite action: the file kept under the run's
  artifacts (`<top>/../artifacts/REPO/RUN/NAME/`), refused when the name exists on the run
  unless `overwrite` (a rerun uploads again into the same run);
- `actions/attest@SHA` (v4) in the composite action, as far as it can run without the
  network: its inputs checked as it checks them, the job's permissions as GitHub enforces
  them (no OIDC token without `id-token: write`, no attestation stored without
  `attestations: write`), and the in-toto Statement v1 it would sign kept under the run's
  attestations (`<top>/../attestations/REPO/RUN/<subject sha256>.json`). Not run: the
  Sigstore signature and the upload to GitHub's API; `gh attestation verify` checks those.

One step is not run: "Install receipt-ledger" (a venv and a `pip install` of the action's
folder, which needs a package index, and tests never reach the network). Its script is
checked to be the install it has always been, and the venv it would make is provided: a
`bin/python` that runs this test session's interpreter, where the package is installed.
An expression or a `uses:` this runner does not know fails the test, never passes quietly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")
_INSTALL = (
    'python3 -m venv "$RUNNER_TEMP/receipt-ledger-venv"\n'
    '"$RUNNER_TEMP/receipt-ledger-venv/bin/pip" install --quiet --disable-pip-version-check "${ACTION_PATH}[postgres]"\n'
)


@dataclass
class StepRun:
    """What one step did: its name, whether it ran, its exit code and its log."""

    name: str
    ran: bool
    code: int = 0
    log: str = ""


@dataclass
class JobRun:
    """The job's result as GitHub shows it: success or failure, each step's log, the step
    summary (Markdown), and the action's outputs."""

    success: bool
    steps: list[StepRun]
    summary: str
    outputs: dict[str, str]
    run_id: int
    artifacts: Path  # where this run's artifacts are kept, by name
    attestations: Path  # where this run's attestations are kept, by subject digest

    @property
    def log(self) -> str:
        return "\n".join("## %s\n%s" % (s.name, s.log) for s in self.steps)


@dataclass
class Runner:
    """One hosted runner's job: its folders under ``top`` and what GitHub gives the job."""

    top: Path
    remote: str  # the repository's URL, as checkout fetches it
    event_name: str
    event: Mapping[str, Any]
    secrets: Mapping[str, str]
    api_url: str
    repository: str = "acme/app"
    token: str = "ghs_test-token"
    run_attempt: int = 1
    run_id: int = 4242
    extra_env: Mapping[str, str] = field(default_factory=dict)
    permissions: Mapping[str, str] = field(default_factory=dict)  # the job's token, as its workflow grants it

    def __post_init__(self) -> None:
        self.workspace = self.top / "work" / "app"
        self.temp = self.top / "temp"
        for folder in (self.workspace, self.temp, self.top / "home"):
            folder.mkdir(parents=True, exist_ok=True)
        self.event_path = self.top / "event.json"
        self.event_path.write_text(json.dumps(self.event))
        self.summary_path = self.temp / "step_summary"
        self.summary_path.write_text("")

    def base_env(self) -> dict[str, str]:
        """The variables the runner sets for every step."""
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            {
                "CI": "true",
                "GITHUB_ACTIONS": "true",
                "HOME": str(self.top / "home"),
                "GITHUB_EVENT_NAME": self.event_name,
                "GITHUB_EVENT_PATH": str(self.event_path),
                "GITHUB_WORKSPACE": str(self.workspace),
                "GITHUB_REPOSITORY": self.repository,
                "GITHUB_API_URL": self.api_url,
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_SHA": self.sha(),
                "GITHUB_RUN_ID": str(self.run_id),
                "GITHUB_RUN_ATTEMPT": str(self.run_attempt),
                "GITHUB_STEP_SUMMARY": str(self.summary_path),
                "RUNNER_TEMP": str(self.temp),
                "RUNNER_OS": "Linux",
                "GIT_CONFIG_NOSYSTEM": "1",
            }
        )
        env.update(self.extra_env)
        return env

    def sha(self) -> str:
        """GITHUB_SHA: the commit the event is about (a pull request's head here)."""
        if self.event_name == "push":
            return str(self.event["after"])
        if self.event_name == "merge_group":
            return str(self.event["merge_group"]["head_sha"])
        return str(self.event["pull_request"].get("merge_commit_sha") or self.event["pull_request"]["head"]["sha"])

    def contexts(self, steps: Mapping[str, Mapping[str, str]], inputs: Mapping[str, str]) -> dict[str, Any]:
        return {
            "github": {
                "event": self.event,
                "event_name": self.event_name,
                "sha": self.sha(),
                "token": self.token,
                "repository": self.repository,
                "workspace": str(self.workspace),
                "action_path": str(ROOT),
                "run_attempt": str(self.run_attempt),
            },
            "runner": {"temp": str(self.temp), "os": "Linux"},
            "secrets": dict(self.secrets),
            "steps": {k: {"outputs": dict(v)} for k, v in steps.items()},
            "inputs": dict(inputs),
        }


def _scalar(value: Any) -> str:
    """A YAML value as the runner hands it to a step: a string (booleans in lower case)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def evaluate(text: str, contexts: Mapping[str, Any]) -> str:
    """``text`` with each ``${{ expr }}`` replaced, for the expressions GitHub documents
    that our files use: context paths, string literals and ``a || b``."""

    def one(match: re.Match[str]) -> str:
        value = _expression(match.group(1), contexts)
        return "" if value is None else str(value)

    return _EXPRESSION.sub(one, text)


def _expression(expr: str, contexts: Mapping[str, Any]) -> Any:
    for operand in (part.strip() for part in expr.split("||")):
        value = _operand(operand, contexts)
        if value:  # GitHub's || yields the first truthy operand
            return value
    return _operand(expr.split("||")[-1].strip(), contexts)


def _operand(text: str, contexts: Mapping[str, Any]) -> Any:
    if re.fullmatch(r"'[^']*'", text):
        return text[1:-1]
    if not re.fullmatch(r"[a-z_]+(\.[\w-]+)*", text):
        raise AssertionError("this runner does not evaluate the expression %r" % text)
    head, *path = text.split(".")
    if head not in contexts:
        raise AssertionError("no context %r on this runner (in %r)" % (head, text))
    value: Any = contexts[head]
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def workflow_job(text: str, job: str = "ladder") -> dict[str, Any]:
    """The job ``job`` of the workflow ``text``, checked to run on the runner's event."""
    doc = yaml.safe_load(text)
    jobs = doc["jobs"]
    assert job in jobs, "the workflow has no job %r" % job
    # A job's permissions replace the workflow's; none at all is GitHub's default (read).
    granted = jobs[job].get("permissions", doc.get("permissions", {"contents": "read"}))
    return dict(jobs[job], on=doc[True] if True in doc else doc["on"], permissions=granted or {})


def run_job(runner: Runner, workflow: str, job: str = "ladder") -> JobRun:
    """Run ``job`` of the workflow text ``workflow`` for ``runner``'s event."""
    spec = workflow_job(workflow, job)
    assert runner.event_name in spec["on"], "the workflow does not run on %s" % runner.event_name
    trigger = spec["on"][runner.event_name] or {}
    if "types" in trigger:
        assert runner.event.get("action") in trigger["types"], "the workflow does not run on this activity type"
    if "branches" in trigger and runner.event_name == "push":
        branch = str(runner.event["ref"]).removeprefix("refs/heads/")
        assert branch in trigger["branches"], "the workflow does not run on pushes to %s" % branch
    runner.permissions = dict(spec["permissions"])
    outputs: dict[str, str] = {}
    steps: list[StepRun] = []
    failed = False
    for step in spec["steps"]:
        uses = str(step.get("uses", ""))
        assert _PINNED.match(uses), "a step uses an action not pinned by its commit: %r" % uses
        context = runner.contexts({}, {})
        given = {k: evaluate(_scalar(v), context) for k, v in (step.get("with") or {}).items()}
        if uses.startswith("actions/checkout@"):
            steps.append(_checkout(runner, given))
        elif uses.split("@")[0].endswith("/receipt-ledger"):
            ran, outputs = _composite(runner, given)
            steps.extend(ran)
        else:
            raise AssertionError("this runner does not know the action %r" % uses)
        failed = failed or any(s.code != 0 for s in steps)
        if failed:
            break
    kept = runner.top.parent / "artifacts" / runner.repository / str(runner.run_id)
    attested = runner.top.parent / "attestations" / runner.repository / str(runner.run_id)
    return JobRun(not failed, steps, runner.summary_path.read_text(), outputs, runner.run_id, kept, attested)


def _checkout(runner: Runner, given: Mapping[str, str]) -> StepRun:
    ref = given.get("ref") or runner.sha()
    script = [
        ["git", "init", "-q", str(runner.workspace)],
        ["git", "remote", "add", "origin", runner.remote],
        ["git", "fetch", "-q", "--no-tags", "--prune", "--no-recurse-submodules", "--depth=1", "origin", ref],
        ["git", "checkout", "-q", "--force", "--detach", "FETCH_HEAD"],
    ]
    log = []
    for command in script:
        done = subprocess.run(command, cwd=runner.workspace, env=runner.base_env(), capture_output=True, text=True)
        log.append(done.stdout + done.stderr)
        if done.returncode != 0:
            return StepRun("checkout", True, done.returncode, "".join(log))
    return StepRun("checkout", True, 0, "".join(log))


def _composite(runner: Runner, given: Mapping[str, str]) -> tuple[list[StepRun], dict[str, str]]:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    unknown = set(given) - set(action["inputs"])
    assert not unknown, "the workflow gives the action inputs it does not declare: %s" % sorted(unknown)
    base = runner.contexts({}, {})
    inputs = {
        name: given[name] if given.get(name) else evaluate(str(spec.get("default", "")), base)
        for name, spec in action["inputs"].items()
    }
    step_outputs: dict[str, dict[str, str]] = {}
    ran: list[StepRun] = []
    failed = False
    for step in action["runs"]["steps"]:
        context = runner.contexts(step_outputs, inputs)
        if not _condition(str(step.get("if", "success()")), context, failed):
            ran.append(StepRun(step["name"], False))
            continue
        if "uses" in step:
            uses = str(step["uses"])
            if uses.startswith("actions/attest@"):
                result, outputs = _attest(runner, uses, step.get("with") or {}, context)
                ran.append(result)
                step_outputs[str(step.get("id", ""))] = outputs
            else:
                ran.append(_upload_artifact(runner, uses, step.get("with") or {}, context))
            failed = failed or ran[-1].code != 0
            continue
        assert step.get("shell") == "bash", "a composite step without shell: bash"
        env = {k: evaluate(_scalar(v), context) for k, v in (step.get("env") or {}).items()}
        script = str(step["run"])
        if step["name"] == "Install receipt-ledger":
            ran.append(_provide_install(runner, script))
            continue
        result, outputs = _run_script(runner, step["name"], script, env)
        ran.append(result)
        step_outputs[str(step.get("id", ""))] = outputs
        failed = failed or result.code != 0
    context = runner.contexts(step_outputs, inputs)
    return ran, {name: evaluate(str(spec["value"]), context) for name, spec in action["outputs"].items()}


def _condition(text: str, contexts: Mapping[str, Any], failed: bool) -> bool:
    """An ``if:`` made of ``&&``-joined terms: ``success()``, ``always()``, ``failure()``,
    or a comparison of a context value with a string literal (``==``, ``!=``). Without a
    status function, GitHub adds ``success()``."""
    terms = [t.strip() for t in text.split("&&")]
    status = [t for t in terms if t in ("success()", "always()", "failure()")]
    verdict = {"success()": not failed, "always()": True, "failure()": failed}[status[0] if status else "success()"]
    for term in terms:
        if term in status:
            continue
        match = re.fullmatch(r"(\S+)\s*(==|!=)\s*'([^']*)'", term)
        assert match, "this runner does not evaluate the condition %r" % term
        value = str(_operand(match.group(1), contexts) or "")
        verdict = verdict and ((value == match.group(3)) == (match.group(2) == "=="))
    return verdict


def _upload_artifact(runner: Runner, uses: str, given: Mapping[str, Any], contexts: Mapping[str, Any]) -> StepRun:
    """actions/upload-artifact v4: the files at ``path`` kept under the artifact's ``name``
    (in ``top/artifacts``), replacing an earlier one only with ``overwrite``."""
    assert _PINNED.match(uses) and uses.startswith("actions/upload-artifact@"), "unknown action %r" % uses
    inputs = {k: evaluate(_scalar(v), contexts) for k, v in given.items()}
    source = Path(inputs["path"])
    kept = runner.top.parent / "artifacts" / runner.repository / str(runner.run_id) / inputs["name"]
    if kept.exists() and inputs.get("overwrite") != "true":
        return StepRun("upload-artifact", True, 1, "an artifact with this name already exists on the run\n")
    if not source.is_file():
        code = 1 if inputs.get("if-no-files-found", "warn") == "error" else 0
        return StepRun("upload-artifact", True, code, "no files were found at %s\n" % source)
    kept.mkdir(parents=True, exist_ok=True)
    (kept / source.name).write_bytes(source.read_bytes())
    return StepRun("upload-artifact", True, 0, "uploaded %s\n" % source.name)


def _attest(
    runner: Runner, uses: str, given: Mapping[str, Any], contexts: Mapping[str, Any]
) -> tuple[StepRun, dict[str, str]]:
    """actions/attest v4 without the network (see the module docstring): the Statement it
    would sign for a subject file and a predicate file, kept by the subject's digest."""
    import hashlib

    assert _PINNED.match(uses), "unknown action %r" % uses
    inputs = {k: evaluate(_scalar(v), contexts) for k, v in given.items() if evaluate(_scalar(v), contexts)}
    subjects = [k for k in ("subject-path", "subject-digest", "subject-checksums") if k in inputs]
    predicates = [k for k in ("predicate", "predicate-path") if k in inputs]
    if len(subjects) != 1 or len(predicates) != 1 or "predicate-type" not in inputs:
        return StepRun("attest", True, 1, "one subject, one predicate and a predicate-type are required\n"), {}
    for needed in ("id-token", "attestations"):
        if runner.permissions.get(needed) != "write":
            return StepRun("attest", True, 1, "the job's token lacks %s: write\n" % needed), {}
    assert subjects == ["subject-path"] and predicates == ["predicate-path"], "this runner reads files only"
    subject, predicate = Path(inputs["subject-path"]), Path(inputs["predicate-path"])
    if not subject.is_file() or not predicate.is_file() or predicate.stat().st_size > 16 << 20:
        return StepRun("attest", True, 1, "no subject file, or no predicate file of at most 16 MB\n"), {}
    digest = hashlib.sha256(subject.read_bytes()).hexdigest()
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": subject.name, "digest": {"sha256": digest}}],
        "predicateType": inputs["predicate-type"],
        "predicate": json.loads(predicate.read_text(encoding="utf-8")),
    }
    kept = runner.top.parent / "attestations" / runner.repository / str(runner.run_id)
    kept.mkdir(parents=True, exist_ok=True)
    (kept / (digest + ".json")).write_text(json.dumps(statement, indent=2))
    url = "https://github.com/%s/attestations/%s" % (runner.repository, digest[:12])
    return StepRun("attest", True, 0, "attested %s\n" % subject.name), {"attestation-url": url, "bundle-path": ""}


def _provide_install(runner: Runner, script: str) -> StepRun:
    assert script == _INSTALL, "the install step changed: this runner provides the venv it used to make"
    venv = runner.temp / "receipt-ledger-venv" / "bin"
    venv.mkdir(parents=True, exist_ok=True)
    python = venv / "python"
    python.write_text('#!/bin/sh\nexec %s "$@"\n' % json.dumps(sys.executable))
    python.chmod(0o755)
    return StepRun("Install receipt-ledger", True, 0, "(provided: %s)\n" % sys.executable)


def _run_script(runner: Runner, name: str, script: str, env: Mapping[str, str]) -> tuple[StepRun, dict[str, str]]:
    output_file = runner.temp / ("output_" + os.urandom(4).hex())
    output_file.write_text("")
    script_file = runner.temp / (os.urandom(4).hex() + ".sh")
    script_file.write_text(script)
    full = {**runner.base_env(), **env, "GITHUB_OUTPUT": str(output_file)}
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
        cwd=runner.workspace,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return StepRun(name, True, done.returncode, done.stdout + done.stderr), _read_outputs(output_file.read_text())


def _read_outputs(text: str) -> dict[str, str]:
    """``$GITHUB_OUTPUT``'s two forms: ``name=value`` and ``name<<DELIMITER`` ... ``DELIMITER``."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            else:
                raise AssertionError("an output %r without its closing delimiter" % name)
            out[name] = "\n".join(body)
        elif line:
            name, value = line.split("=", 1)
            out[name] = value
    return out
