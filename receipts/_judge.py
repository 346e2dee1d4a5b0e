"""The judge tier's rules: how a reply is read, and how replies become a verdict.

A judge's answer is a measurement, not a fact. Anything that is not a clear accept at
or above the contract's confidence threshold, from a judge independent of the author,
is not a pass. The runner decides with these functions and the verifier re-derives with
them from the stored reply bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from ._contract import Contract
from ._model import Verdict
from ._provenance import declared_facts

__all__ = [
    "JUDGE_RUN_FORMAT",
    "JUDGE_RUN_MEDIA_TYPE",
    "Answer",
    "SampleOutcome",
    "reply_text",
    "parse_answer",
    "model_family",
    "sample_outcome",
    "attempt_outcome",
    "derive_judge",
    "new_judge_run",
]

JUDGE_RUN_FORMAT = "receipt-ledger/judge-run/v1"
JUDGE_RUN_MEDIA_TYPE = "application/vnd.receipt-ledger.judge-run+json"
_VERDICTS = ("accept", "retry", "reject")
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Answer:
    verdict: str  # accept, retry or reject
    confidence_bp: int
    findings: tuple[Any, ...]
    reasons: tuple[str, ...]
    # The separate finding (§6b): does the change game the checks instead of doing the work?
    # None where the reply does not say (replies recorded before the question was asked).
    gaming: bool | None = None
    gaming_note: str = ""


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    verdict: Verdict
    confidence_bp: int
    reason: str


def reply_text(backend: str, body: bytes) -> str | None:
    """The judge's text inside a reply: the first choice's message for an OpenAI-style
    chat completion, the whole output for a command.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if backend != "openai":
        return text
    try:
        doc = json.loads(text)
        content = doc["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _candidates(text: str) -> list[str]:
    out = [text.strip()]
    out += [m.group(1) for m in _FENCE.finditer(text)]
    return out


def parse_answer(text: str | None) -> Answer | str:
    """Read a judge's JSON answer out of its reply: tolerant of code fences and prose
    around it, strict about what it means. Returns the answer or why there is none.
    """
    if text is None or not text.strip():
        return "empty reply"
    decoder = json.JSONDecoder()
    found: Any = None
    for candidate in _candidates(text):
        try:
            found = json.loads(candidate)
            break
        except ValueError:
            continue
    if found is None:
        for m in re.finditer(r"\{", text):
            try:
                found, _ = decoder.raw_decode(text, m.start())
            except ValueError:
                continue
            if isinstance(found, dict) and "verdict" in found:
                break
            found = None
    if not isinstance(found, dict):
        return "no JSON object in the reply"
    verdict = found.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().lower() not in _VERDICTS:
        return "unknown verdict %r" % (verdict,)
    confidence = found.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
        return "confidence %r is not a number in [0, 1]" % (confidence,)
    findings = found.get("findings", [])
    reasons = found.get("reasons", [])
    gaming = found.get("gaming")
    if gaming is not None and not isinstance(gaming, bool):
        return "gaming %r is not true or false" % (gaming,)
    return Answer(
        verdict=verdict.strip().lower(),
        confidence_bp=round(float(confidence) * 10000),
        findings=tuple(findings) if isinstance(findings, list) else (),
        reasons=tuple(str(x) for x in reasons) if isinstance(reasons, list) else (str(reasons),),
        gaming=gaming,
        gaming_note=str(found.get("gaming_note") or "")[:300],
    )


def model_family(model: str) -> str:
    """A model's family: the first word of its name after any provider prefix
    (``anthropic/claude-3-5-sonnet`` and ``claude-sonnet-4`` are both ``claude``).
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    m = re.match(r"[a-z]+", name)
    return m.group(0) if m else name


def sample_outcome(answer: Answer | str, *, threshold_bp: int, independent: bool) -> SampleOutcome:
    if isinstance(answer, str):
        return SampleOutcome(Verdict.RETRY, 0, "no usable answer (%s): retry, flagged for review" % answer)
    if answer.gaming:  # whatever the verdict and confidence: gaming the checks is not doing the work
        note = answer.gaming_note or "; ".join(answer.reasons)[:300] or "no note"
        return SampleOutcome(
            Verdict.FAIL, answer.confidence_bp, "the judge found the change games the checks: %s" % note
        )
    if answer.verdict == "reject":
        return SampleOutcome(
            Verdict.FAIL, answer.confidence_bp, "the judge rejected: %s" % "; ".join(answer.reasons)[:300]
        )
    if answer.verdict == "retry":
        return SampleOutcome(Verdict.RETRY, answer.confidence_bp, "the judge asked for a retry")
    if answer.confidence_bp < threshold_bp:
        return SampleOutcome(
            Verdict.REVIEW,
            answer.confidence_bp,
            "accepted at confidence %s, below the threshold of %s"
            % (confidence_text(answer.confidence_bp), confidence_text(threshold_bp)),
        )
    if not independent:
        return SampleOutcome(
            Verdict.REVIEW, answer.confidence_bp, "the judge is of the same model family as the author"
        )
    return SampleOutcome(
        Verdict.PASS, answer.confidence_bp, "accepted at confidence %s" % confidence_text(answer.confidence_bp)
    )


def confidence_text(bp: int) -> str:
    """A confidence in basis points as people read it: ``0.90`` for 9000 (the signed value
    stays an integer; only its wording is a decimal).
    """
    whole, frac = divmod(bp, 10000)
    return "%d.%s" % (whole, ("%04d" % frac).rstrip("0").ljust(2, "0"))


def attempt_outcome(samples: Sequence[SampleOutcome]) -> SampleOutcome:
    """A strict majority of samples decides; without one the answer needs review."""
    if not samples:
        return SampleOutcome(Verdict.RETRY, 0, "no sample")
    if len(samples) == 1:
        return samples[0]
    confidence = sorted(s.confidence_bp for s in samples)[(len(samples) - 1) // 2]
    for verdict in (Verdict.PASS, Verdict.FAIL, Verdict.RETRY):
        votes = [s for s in samples if s.verdict is verdict]
        if len(votes) * 2 > len(samples):
            return SampleOutcome(
                verdict, confidence, "%d of %d samples: %s" % (len(votes), len(samples), votes[0].reason)
            )
    return SampleOutcome(Verdict.REVIEW, confidence, "no majority among %d samples" % len(samples))


def new_judge_run(
    contract: Contract,
    *,
    skipped: str | None,
    prior_attempts: int,
    backend: str,
    endpoint: str | None,
    model: str,
    diff_chars: int,
    samples: int,
) -> dict[str, Any]:
    """The judge run's document (format.md §6b) before any attempt: the writer's half of
    the document `derive_judge` below reads. The runner appends each attempt's samples to
    its ``attempts`` list.
    """
    return {
        "format": JUDGE_RUN_FORMAT,
        "skipped": skipped,
        "prior_attempts": prior_attempts,
        "max_retries": contract.judge.max_retries,
        "backend": backend,
        "endpoint": endpoint,
        "model": model,
        "diff_truncated": diff_chars > contract.judge.max_diff_chars,
        "diff_chars": diff_chars,
        "attempts": [],
        "samples": samples,
    }


def derive_judge(
    run: Mapping[str, Any],
    replies: Mapping[str, bytes],
    contract: Contract,
    provenance: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> SampleOutcome:
    """The judge tier's verdict from a recorded run (see docs/format.md §6b) under its
    contract. Missing or malformed parts count as unusable answers; a run in which no
    sample gave a usable answer is a skip (the judge could not judge), not a verdict.
    ``provenance``: the run's provenance documents by digest (§6d), whose models are authors.
    """
    skipped = run.get("skipped")
    if isinstance(skipped, str) and skipped:
        return SampleOutcome(Verdict.SKIP, 0, skipped)
    settings = contract.judge
    cap = 1 + settings.max_retries
    prior = run.get("prior_attempts")
    attempts = run.get("attempts")
    model = run.get("model")
    backend = run.get("backend")
    if (
        not _is_count(prior)
        or not isinstance(attempts, list)
        or not isinstance(model, str)
        or not isinstance(backend, str)
    ):
        return SampleOutcome(Verdict.FAIL, 0, "the judge run record is malformed")
    wanted = run.get("samples", settings.samples)
    authors, problem = _recorded_authors(run, provenance or {}, contract)
    if problem := _shape_problem(prior + len(attempts), cap, wanted, settings.samples) or problem:
        return SampleOutcome(Verdict.FAIL, 0, problem)
    independent = _independent(run, contract, model, authors)
    threshold = contract.judge_threshold_bp
    last: SampleOutcome | None = None
    problems: list[str] = []  # why samples had no usable answer, in order
    answered = False
    for attempt in attempts:
        if last is not None and last.verdict is not Verdict.RETRY:
            return SampleOutcome(Verdict.FAIL, 0, "an attempt was made after the judge had ruled")
        answers = _attempt_answers(attempt, replies, backend)
        if len(answers) != wanted:
            answers = ["expected %d sample(s)" % wanted]
        answered = answered or any(isinstance(a, Answer) for a in answers)
        problems += [a for a in answers if isinstance(a, str)]
        last = attempt_outcome([sample_outcome(a, threshold_bp=threshold, independent=independent) for a in answers])
    if last is not None and not answered:
        # Not one answer came back that could be read: the judge did not judge. That is no
        # verdict on the candidate (it blocks, as a skip does) and uses up no retries.
        return SampleOutcome(Verdict.SKIP, 0, "the judge could not judge: %s" % problems[-1])
    if last is None:
        if prior >= cap:
            return SampleOutcome(
                Verdict.FAIL, 0, "retries exhausted: %d attempts were already made for this candidate" % prior
            )
        return SampleOutcome(Verdict.FAIL, 0, "the judge was never asked")
    if last.verdict is Verdict.RETRY and prior + len(attempts) >= cap:
        return SampleOutcome(
            Verdict.FAIL, 0, "retries exhausted after %d attempts; last: %s" % (prior + len(attempts), last.reason)
        )
    return last


def _shape_problem(attempts: int, cap: int, wanted: object, required: int) -> str:
    if attempts > cap:
        return "more attempts than the retry cap allows"
    if not _is_count(wanted) or wanted < required:
        return "fewer samples than the contract requires"
    return ""


def _recorded_authors(
    run: Mapping[str, Any], provenance: Mapping[str, Mapping[str, Any] | None], contract: Contract
) -> tuple[tuple[str, ...], str]:
    """The models the run's provenance records name, and why they cannot be used (a record
    missing or altered, or naming another family than the contract's declared author).
    """
    records = run.get("provenance", [])
    if not isinstance(records, list) or not all(isinstance(d, str) for d in records):
        return (), "the judge run's provenance list is malformed"
    facts = declared_facts([(d, provenance.get(d)) for d in records])
    if facts["unreadable"]:
        return (), "provenance record(s) missing, altered or invalid: %s" % ", ".join(facts["unreadable"])
    models: tuple[str, ...] = tuple(facts["models"])
    declared = contract.author_model
    others = [m for m in models if declared and model_family(m) != model_family(declared)]
    if others:
        return models, "the contract declares the author model %s; the provenance records name %s" % (
            declared,
            ", ".join(others),
        )
    return models, ""


def _independent(run: Mapping[str, Any], contract: Contract, model: str, recorded: tuple[str, ...] = ()) -> bool:
    """Whether the judge's model family differs from every author's: the contract's
    declared author, else the author model the run recorded from the agent's own claim,
    and each model the provenance records name (a run with none is judged as before).
    """
    author = contract.author_model
    if author is None and isinstance(run.get("author_model"), str) and run["author_model"]:
        author = run["author_model"]
    authors = ((author,) if author else ()) + recorded
    return all(model_family(model) != model_family(a) for a in authors)


def _is_count(value: object) -> TypeGuard[int]:
    """A non-negative int that is not a bool (JSON's true is not a count)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _attempt_answers(attempt: object, replies: Mapping[str, bytes], backend: str) -> list[str | Answer]:
    """Each sample of one recorded attempt as the judge's answer, or why it is unusable."""
    answers: list[str | Answer] = []
    for sample in attempt if isinstance(attempt, list) else []:
        if not isinstance(sample, dict):
            answers.append("malformed sample")
        elif sample.get("error"):
            answers.append("transport: %s" % sample["error"])
        else:
            body = replies.get(str(sample.get("reply")))
            answers.append(parse_answer(reply_text(backend, body)) if body is not None else "reply evidence missing")
    return answers
