"""The verifier reads as the spec: the step labels in verify/ and in docs/format.md §8
are the same set, so neither can gain or lose a step without the other."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABEL = re.compile(r"#\s*(\d[a-z]?)\.\s")


def _code_labels() -> set[str]:
    labels: set[str] = set()
    for path in (ROOT / "verify").glob("*.py"):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            if tok.type == tokenize.COMMENT:
                labels.update(LABEL.findall(tok.string))
    return labels


def _spec_steps() -> list[str]:
    """The step labels of docs/format.md §8, in the order the spec gives them."""
    text = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    section = text[text.index("## 8. Verification") : text.index("## 9. Transparency")]
    return re.findall(r"^\s*(?:- )?(\d[a-z]?)\.\s", section, re.M)


def _spec_labels() -> set[str]:
    return set(_spec_steps())


def _step_order(label: str) -> tuple[int, str]:
    return int(label[0]), label[1:]


def test_every_step_of_the_spec_is_a_labelled_step_of_the_code_and_back() -> None:
    code, spec = _code_labels(), _spec_labels()
    assert spec, "no numbered steps found in docs/format.md §8"
    assert code == spec, "only in code: %s; only in the spec: %s" % (sorted(code - spec), sorted(spec - code))


def test_the_spec_gives_each_step_once_and_in_order() -> None:
    # A label used twice (a second numbered list in §8, say) would let one of them drift
    # from the code unseen; a step out of order reads as a different procedure.
    steps = _spec_steps()
    assert len(steps) == len(set(steps)), [s for s in steps if steps.count(s) > 1]
    assert steps == sorted(steps, key=_step_order)


def test_the_labels_cover_the_whole_ladder_of_steps() -> None:
    # Guards the parser above: a regex that found nothing would make the first test vacuous.
    assert {str(n) for n in range(1, 9)} <= _spec_labels()
    assert {"2a", "2g", "4a", "4b", "5a", "5g"} <= _code_labels()


def test_the_weakening_rules_of_code_and_spec_are_the_same_list() -> None:
    import receipts

    text = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    section = text[text.index("## 5a. Contracts and weakening") : text.index("## 6a.")]
    listed = re.findall(r"`([a-z]+(?:-[a-z]+)+)`", section)
    assert listed == [name for name, _ in receipts.WEAKENING_RULES]


def test_the_defect_code_table_lists_exactly_the_codes_the_verifier_emits() -> None:
    import ast

    emitted = {"evidence-missing", "evidence-altered"}  # returned by verify._evidence.blob_problem
    for path in (ROOT / "verify").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("Defect", "defect") and node.args and isinstance(node.args[0], ast.Constant):
                    emitted.add(str(node.args[0].value))
    text = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    table = text[text.index("## 8a. Defect codes") : text.index("## 9. Transparency")]
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    assert emitted == documented, "emitted only: %s; documented only: %s" % (
        sorted(emitted - documented),
        sorted(documented - emitted),
    )
