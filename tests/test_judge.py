"""The judge tier: every failure mode is not a pass. The openai backend is
tested against a local HTTP server started here that speaks chat-completions; no test
reaches the network."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import receipts as r
from conftest import ADMIN_ID, JUDGE_SCRIPT, SIGNERS, contract_bytes, judge_table, sign_decision
from ledger import JudgeRun, Ledger, register_contract, run_deterministic, run_judge, seal_receipt
from verify import LedgerSource, TrustRoot, verify_receipt


class ChatServer:
    """A chat-completions endpoint on localhost answering from a script of replies."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any, bool]] = []  # (status, content or raw body, hang until closed)
        self.released = threading.Event()
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((dict(self.headers), body))
                status, content, hang = (
                    server.replies.pop(0) if server.replies else (200, {"verdict": "accept", "confidence": 0.9}, False)
                )
                if hang:
                    server.released.wait()  # an endpoint that never answers while the client waits
                if status == 200 and not isinstance(content, bytes):
                    text = content if isinstance(content, str) else json.dumps(content)
                    content = json.dumps(
                        {
                            "id": "x",
                            "object": "chat.completion",
                            "choices": [
                                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                            ],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 12, "total_tokens": 112},
                        }
                    ).encode()
                data = content if isinstance(content, bytes) else json.dumps(content).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/v1" % self.httpd.server_address[1]
        # A short poll only makes shutdown prompt; requests are answered as they arrive.
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.close()


def openai_table(url: str, model: str = "llama-3.1-8b-instruct", **settings: object) -> str:
    settings = {"timeout_s": 5, **settings}
    lines = ["[judge]", 'backend = "openai"', "base_url = %s" % json.dumps(url), "model = %s" % json.dumps(model)]
    lines += ["%s = %s" % (k, json.dumps(v)) for k, v in settings.items()]
    return "\n".join(lines) + "\n"


def judged(
    env: tuple[Path, Ledger], judge: str, command: str = "print('1 passed')", top: str = "", **kw: Any
) -> tuple[JudgeRun, bytes]:
    repo, ledger = env
    contract = contract_bytes(command=command, judge=judge, top=top)
    # Tests swap the judge between runs of one task: a weakening only an admin may sign (ADR 0017).
    register_contract(ledger, "TASK-1", contract, SIGNERS["admin"], reason="the test swaps the judge")
    run = run_deterministic(
        ledger, repo=repo, task_id="TASK-1", contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    return run_judge(
        ledger,
        task_id="TASK-1",
        contract_bytes=contract,
        candidate=run.record.input_hash,
        signer=SIGNERS["judge"],
        **kw,
    ), contract


def seal_and_verify(env: tuple[Path, Ledger], contract: bytes, candidate: r.Digest) -> Any:
    repo, ledger = env
    sign_decision(ledger, repo, contract, candidate, SIGNERS["alice"], note="ok")
    _, sealed = seal_receipt(ledger, task_id="TASK-1", signer=SIGNERS["sealer"], input_hash=candidate)
    return verify_receipt(LedgerSource.open(ledger.root), str(sealed.body_hash), TrustRoot(frozenset({ADMIN_ID}), "t"))


def test_a_clear_accept_passes_and_verifies(env: tuple[Path, Ledger]) -> None:
    result, contract = judged(env, judge_table("accept", "0.9"))
    assert result.outcome.verdict is r.Verdict.PASS and result.record.confidence_bp == 9000
    check = seal_and_verify(env, contract, result.record.input_hash)
    assert check.ok and check.derived_eligible, check.defects


def test_accept_at_confidence_069_is_review_not_eligible(env: tuple[Path, Ledger]) -> None:
    result, contract = judged(env, judge_table("accept", "0.69"))
    assert (
        result.outcome.verdict is r.Verdict.REVIEW and "below the threshold of 0.70" in result.outcome.reason
    )  # a decimal, as people read it
    check = seal_and_verify(env, contract, result.record.input_hash)
    assert check.ok and not check.derived_eligible and "tier judge verdict is review" in check.eligibility_reasons


def test_prose_without_json_is_retried_then_is_no_verdict(env: tuple[Path, Ledger]) -> None:
    # A judge whose answers cannot be read did not judge: a skip (it blocks), not a fail.
    result, _ = judged(env, judge_table("prose"))
    assert result.attempts == 3 and result.outcome.verdict is r.Verdict.SKIP
    assert "could not judge" in result.outcome.reason and "no JSON object" in result.outcome.reason


def test_json_in_a_code_fence_inside_prose_is_read(env: tuple[Path, Ledger]) -> None:
    result, _ = judged(env, judge_table("fenced", "0.8"))
    assert result.outcome.verdict is r.Verdict.PASS and result.record.confidence_bp == 8000


def test_a_verdict_the_parser_does_not_know_is_not_a_pass(env: tuple[Path, Ledger]) -> None:
    result, _ = judged(env, judge_table("unknown", max_retries=0))
    assert result.outcome.verdict is r.Verdict.SKIP and "unknown verdict 'maybe'" in result.outcome.reason


def test_retries_are_capped_across_runs(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    result, contract = judged(env, judge_table("count", str(calls), "retry", max_retries=1))
    assert result.attempts == 2 and result.outcome.verdict is r.Verdict.FAIL
    assert calls.read_text().count("call") == 2
    repo, ledger = env
    again = run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=result.record.input_hash, signer=SIGNERS["judge"]
    )
    assert (
        again.attempts == 0 and again.outcome.verdict is r.Verdict.FAIL and "retries exhausted" in again.outcome.reason
    )
    assert calls.read_text().count("call") == 2  # the backend was not asked again


def test_judge_skipped_when_the_deterministic_tier_failed(env: tuple[Path, Ledger], tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    result, contract = judged(env, judge_table("count", str(calls), "accept", "0.9"), command="raise SystemExit(1)")
    assert result.outcome.verdict is r.Verdict.SKIP and not calls.exists()
    check = seal_and_verify(env, contract, result.record.input_hash)
    assert check.ok and not check.derived_eligible
    assert [t.status for t in check.tiers][:2] == ["fail", "skip"]


def test_an_unconfigured_or_unreachable_backend_is_a_skip(env: tuple[Path, Ledger]) -> None:
    result, _ = judged(env, openai_table("http://127.0.0.1:9/v1", api_key_env="NO_SUCH_KEY_VAR"), environ={})
    assert result.outcome.verdict is r.Verdict.SKIP and "NO_SUCH_KEY_VAR is not set" in result.outcome.reason


def test_openai_backend_speaks_chat_completions(env: tuple[Path, Ledger], chat: ChatServer) -> None:
    chat.replies.append(
        (200, {"verdict": "accept", "confidence": 0.95, "findings": [], "reasons": ["real fix"]}, False)
    )
    result, _ = judged(env, openai_table(chat.url, api_key_env="JUDGE_KEY"), environ={"JUDGE_KEY": "sk-test"})
    assert result.outcome.verdict is r.Verdict.PASS and result.record.confidence_bp == 9500
    headers, body = chat.requests[0]
    assert headers["Authorization"] == "Bearer sk-test"
    assert body["temperature"] == 0 and body["max_tokens"] == 1024 and body["model"] == "llama-3.1-8b-instruct"
    request = json.loads(body["messages"][1]["content"])
    assert request["task"] == "TASK-1" and "app.py" in request["diff"] and request["diff_truncated"] is False


def test_stats_report_judge_tokens_only_where_the_replies_carry_them(
    env: tuple[Path, Ledger], chat: ChatServer
) -> None:
    from conftest import run_cli
    from ledger import stats

    _, ledger = env
    judged(env, judge_table("accept", "0.9"))  # the scripted command judge reports no usage
    (row,) = [s.as_dict() for s in stats(ledger, "TASK-1", min_trials=1)]
    assert row["cost"] == {"judge_tokens_per_run": None} and row["time_ms"]["judge"] is not None
    judged(env, openai_table(chat.url, samples=2))  # two samples, 112 tokens each
    (row,) = [s.as_dict() for s in stats(ledger, "TASK-1", min_trials=1)]
    assert row["cost"] == {"judge_tokens_per_run": 224}  # the run without usage is not counted as zero
    shown = run_cli("--dir", str(ledger.root), "stats", "--task-prefix", "TASK-1")
    assert shown.returncode == 0 and "judge tokens per run: 224" in shown.stdout, shown.stdout + shown.stderr


def test_http_500_is_retried_then_is_no_verdict(env: tuple[Path, Ledger], chat: ChatServer) -> None:
    chat.replies += [(500, b'{"error": "boom"}', False)] * 3
    result, _ = judged(env, openai_table(chat.url))
    assert result.outcome.verdict is r.Verdict.SKIP and len(chat.requests) == 3 and "HTTP 500" in result.outcome.reason


def test_an_endpoint_that_never_answers_times_out(env: tuple[Path, Ledger], chat: ChatServer) -> None:
    chat.replies.append((200, {"verdict": "accept", "confidence": 0.9}, True))
    result, _ = judged(env, openai_table(chat.url, timeout_s=1, max_retries=0))
    assert result.outcome.verdict is r.Verdict.SKIP and "no answer" in result.outcome.reason


def test_a_judge_of_the_authors_model_family_is_review(env: tuple[Path, Ledger], chat: ChatServer) -> None:
    result, _ = judged(env, openai_table(chat.url, model="gpt-4.1-mini"), top='author_model = "openai/gpt-4o"\n')
    assert result.outcome.verdict is r.Verdict.REVIEW and "same model family" in result.outcome.reason


def test_the_diff_sent_is_truncated_and_says_so(env: tuple[Path, Ledger], chat: ChatServer) -> None:
    repo, ledger = env
    (repo / "app.py").write_text("x = 1\n" * 3000)
    from conftest import git

    git(repo, "commit", "-qam", "TASK-1: big")
    result, _ = judged(env, openai_table(chat.url))
    request = json.loads(chat.requests[0][1]["messages"][1]["content"])
    assert len(request["diff"]) == 10000 and request["diff_truncated"] is True and request["diff_chars"] > 10000
    run_doc = next(e for e in result.record.evidence if e.check_id == "judge:run")
    assert json.loads(ledger.blob_path(run_doc.digest).read_bytes())["diff_truncated"] is True


def test_consensus_needs_a_majority_and_swaps_criteria_order(env: tuple[Path, Ledger], chat: ChatServer) -> None:
    accept = {"verdict": "accept", "confidence": 0.9}
    chat.replies += [(200, accept, False), (200, {"verdict": "reject", "confidence": 0.8}, False), (200, accept, False)]
    top = 'deliverables = ["first", "second"]\n'
    result, _ = judged(env, openai_table(chat.url), top=top, samples=3)
    assert result.outcome.verdict is r.Verdict.PASS and "2 of 3 samples" in result.outcome.reason
    orders = [json.loads(body["messages"][1]["content"])["criteria"] for _, body in chat.requests]
    assert orders[0] == ["first", "second"] and orders[1] == ["second", "first"]
    chat.replies += [
        (200, accept, False),
        (200, {"verdict": "reject", "confidence": 0.8}, False),
        (200, "prose", False),
    ]
    split, _ = judged(env, openai_table(chat.url, max_retries=0), top=top.replace("second", "third"), samples=3)
    assert split.outcome.verdict is r.Verdict.REVIEW and "no majority" in split.outcome.reason


@pytest.mark.parametrize(
    "text,expected",
    [
        ('{"verdict": "accept", "confidence": 0.9}', ("accept", 9000)),
        ('Sure!\n```json\n{"verdict": "Reject", "confidence": 1}\n```', ("reject", 10000)),
        ('My answer: {"verdict": "retry", "confidence": 0.1} hope that helps', ("retry", 1000)),
        ('{"verdict": "accept", "confidence": 1.5}', None),
        ('{"verdict": "accept", "confidence": true}', None),
        ('{"verdict": "accept"}', None),
        ('{"verdict": "lgtm", "confidence": 0.9}', None),
        ("", None),
        ("[1, 2, 3]", None),
    ],
)
def test_parse_is_tolerant_in_form_and_strict_in_meaning(text: str, expected: tuple[str, int] | None) -> None:
    answer = r.parse_answer(text)
    if expected is None:
        assert isinstance(answer, str)
    else:
        assert isinstance(answer, r.Answer) and (answer.verdict, answer.confidence_bp) == expected


def test_model_family() -> None:
    assert r.model_family("anthropic/claude-3-5-sonnet") == r.model_family("claude-sonnet-4") == "claude"
    assert r.model_family("gpt-4o") == r.model_family("openai/gpt-4.1-mini") == "gpt"
    assert r.model_family("llama-3.1-8b") != r.model_family("qwen2.5-coder")


def test_the_request_the_judge_receives_is_the_one_the_spec_documents(
    env: tuple[Path, Ledger], chat: ChatServer
) -> None:
    # issue 11, item 12: the request format was undocumented; this keeps docs/format.md §6b and the code together.
    import re

    judged(env, openai_table(chat.url))
    (_, body), *_ = chat.requests
    assert [m["role"] for m in body["messages"]] == ["system", "user"] and body["temperature"] == 0
    sent = json.loads(body["messages"][1]["content"])
    spec = (Path(__file__).resolve().parents[1] / "docs" / "format.md").read_text()
    documented = spec[spec.index("**The request.**") : spec.index("A command judge receives")]
    assert set(sent) == set(re.findall(r"`([a-z_]+)`(?: =|,| \(| and)", documented)) - {"judge"}
    assert sent["format"] == "receipt-ledger/judge-request/v1"


@pytest.mark.parametrize(
    ("claimed", "verdict"), [("gpt-5.1-codex", r.Verdict.REVIEW), ("claude-sonnet-4-5", r.Verdict.PASS)]
)
def test_the_model_an_agent_claimed_with_takes_the_place_of_author_model(
    env: tuple[Path, Ledger], claimed: str, verdict: r.Verdict
) -> None:
    """Issue 14: an agent hook records the model in the claim; with no author_model in the
    contract, the judge's different-family rule holds against it, and verify re-derives
    the same verdict from the recorded run."""
    from ledger import record_event, resolve_candidate

    repo, ledger = env
    contract = contract_bytes(judge=judge_table("accept", "0.95", model="gpt-4o"))
    register_contract(ledger, "TASK-1", contract, SIGNERS["admin"], reason="the test swaps the judge")
    run = run_deterministic(
        ledger, repo=repo, task_id="TASK-1", contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    assert run.record.input_hash == resolve_candidate("HEAD", repo)
    record_event(
        ledger, SIGNERS["agent"], "TASK-1", r.EventType.ANSWER_PROPOSED, run.record.input_hash, {"model": claimed}
    )
    judged = run_judge(
        ledger, task_id="TASK-1", contract_bytes=contract, candidate=run.record.input_hash, signer=SIGNERS["judge"]
    )
    assert judged.outcome.verdict is verdict
    if verdict is r.Verdict.REVIEW:
        assert "same model family" in judged.outcome.reason
    receipt = seal_and_verify(env, contract, run.record.input_hash)
    judge_line = next(t for t in receipt.tiers if t.tier is r.Tier.JUDGE)
    assert judge_line.status == verdict.value and not [d for d in receipt.defects if d.code == "verdict-not-entailed"]


def test_a_broken_judge_is_no_verdict_and_once_fixed_judges_the_same_candidate(
    env: tuple[Path, Ledger], tmp_path: Path
) -> None:
    # The judge's program is missing, then it exits non-zero with a message: each run says
    # it could not judge, with the program's own words, and uses up no retries; once
    # fixed, the same candidate is judged (no new commit needed). The judge comes from
    # config.toml, so the contract, and with it the candidate's config, never changes.
    repo, ledger = env
    contract = contract_bytes(judge="")
    register_contract(ledger, "TASK-1", contract, SIGNERS["admin"], reason="the test swaps the judge")
    run = run_deterministic(
        ledger, repo=repo, task_id="TASK-1", contract_bytes=contract, source="c.toml", signer=SIGNERS["ci"]
    )
    config = tmp_path / "config.toml"

    def judge_with(*command: str) -> JudgeRun:
        config.write_text('[judge]\nbackend = "command"\ncommand = %s\n' % json.dumps(list(command)))
        return run_judge(
            ledger,
            task_id="TASK-1",
            contract_bytes=contract,
            candidate=run.record.input_hash,
            signer=SIGNERS["judge"],
            config_toml=config,
        )

    missing = judge_with(str(tmp_path / "no-such-judge"))
    assert missing.outcome.verdict is r.Verdict.SKIP and missing.attempts == 3
    assert "could not judge: transport: cannot run the judge command" in missing.outcome.reason
    assert "no-such-judge" in missing.outcome.reason
    failing = tmp_path / "failing_judge.py"
    failing.write_text("import sys\nsys.stderr.write('judge: no API key configured\\n')\nsys.exit(3)\n")
    broken = judge_with(sys.executable, str(failing))
    assert broken.outcome.verdict is r.Verdict.SKIP and broken.attempts == 3
    assert "exited 3: judge: no API key configured" in broken.outcome.reason
    fixed = judge_with(sys.executable, JUDGE_SCRIPT, "accept", "0.9")
    assert fixed.outcome.verdict is r.Verdict.PASS and fixed.attempts == 1, fixed.outcome.reason
