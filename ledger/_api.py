"""The public library API of `ledger`, loaded lazily (PEP 562): a name's module is
imported on first use, so that a short command imports only what it needs. `ledger`
re-exports it; the CLI imports this module directly (relative imports keep working even
where a `ledger/` directory in the working directory shadows the package name)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._clock import frozen_clock
    from ._config import describe_store, open_source, shared_store, write_store_config, write_text_atomic
    from ._contracts import ContractHistoryRow, contract_history, current_contract, register_contract, waive_check
    from ._demo import demo_contract, run_demo
    from ._environment import VERSION, environment_digest
    from ._errors import InputError, LedgerError, StoreError
    from ._events import begin_effect, end_effect, record_event, task_events, verified_receipt
    from ._evidence import (
        candidate_snapshot,
        evidence_bytes,
        evidence_json,
        receipt_snapshot,
        record_evidence,
        resolve_blob,
        snapshot_of,
    )
    from ._export import export_bundle, final_status, receipt_page
    from ._gate import GATE_MODES, GateResult, ReceiptCheck, check_receipts, gate, gate_check, verify_commit
    from ._git import git_root, resolve_candidate, resolve_commit
    from ._git_notes import (
        BUNDLE_REFS,
        NOTES_REF,
        NoteLine,
        attach,
        attached,
        bundle_ref,
        git_identity,
        has_bundle,
        open_bundle,
        receipt_commit,
    )
    from ._git_sync import SyncResult, fetch_receipts, fetch_refspecs, push_receipts
    from ._github import (
        COMMENT_MARKER,
        ActionReport,
        GithubApi,
        GithubEvent,
        annotation,
        parse_event,
        run_action,
        task_from,
    )
    from ._hook_install import (
        HookInstall,
        install_hooks,
        key_custody_warnings,
        plugin_dir,
        settings_path,
        start_task,
        uninstall_hooks,
    )
    from ._hooks import HookAnswer, run_hook, task_in
    from ._intoto import PAYLOAD_TYPE, PREDICATE_TYPE, VSA_PREDICATE_TYPE, export_intoto, export_vsa, pae, vsa_statement
    from ._keyring import add_key, allowed_signers, create_key, revoke_key
    from ._keys import generate_key_file, key_dir, key_path, load_signer, read_public_key
    from ._mirror import PullResult, pull
    from ._population import POPULATION_COLUMNS, ChangeRow, population, population_csv
    from ._proofs import prove_consistency, prove_inclusion
    from ._records import Evidence, record_by_hand, record_tier, seal_receipt
    from ._render import (
        chain_lines,
        commit_lines,
        entry_document,
        gate_lines,
        jsonable,
        keyring_rows,
        log_rows,
        pr_comment,
        pull_lines,
        status_lines,
        verify_lines,
    )
    from ._stats import FamilyStats, family_of, stats
    from ._status import DeterministicRun, Nudge, StatusReport, deterministic_runs, nudge, status_report, task_state
    from ._store import LEDGER_DIRNAME, Appended, Ledger, RecordRow, Store, find_ledger_dir
    from ._traces import TRACE_DECISIONS_FORMAT, ingest_trace, process_facts
    from ._trust import REPO_TRUST_PATH, TRUST_FILE, resolve_trust
    from ._witness import add_cosignatures, cosign
    from .tiers import CheckRun, JudgeRun, decide, run_deterministic, run_judge

__all__ = [
    # the store
    "Ledger",
    "Store",
    "Appended",
    "RecordRow",
    "LEDGER_DIRNAME",
    "find_ledger_dir",
    "shared_store",
    "open_source",
    "write_store_config",
    "write_text_atomic",
    "population",
    "population_csv",
    "ChangeRow",
    "POPULATION_COLUMNS",
    "describe_store",
    "pull",
    "PullResult",
    # errors
    "LedgerError",
    "InputError",
    "StoreError",
    # time
    "frozen_clock",
    # what ran
    "VERSION",
    "environment_digest",
    # keys and the keyring
    "key_dir",
    "key_path",
    "generate_key_file",
    "load_signer",
    "add_key",
    "create_key",
    "revoke_key",
    "allowed_signers",
    "read_public_key",
    # contracts and waivers
    "register_contract",
    "current_contract",
    "contract_history",
    "ContractHistoryRow",
    "waive_check",
    # candidates (git)
    "git_root",
    "resolve_commit",
    "resolve_candidate",
    # the ladder: records, the tier runners, receipts
    "Evidence",
    "record_tier",
    "record_by_hand",
    "seal_receipt",
    "run_deterministic",
    "CheckRun",
    "run_judge",
    "JudgeRun",
    "decide",
    # stored evidence, read back (re-hashed)
    "resolve_blob",
    "evidence_bytes",
    "evidence_json",
    "record_evidence",
    "snapshot_of",
    "receipt_snapshot",
    "candidate_snapshot",
    # events and effects
    "record_event",
    "task_events",
    "verified_receipt",
    "begin_effect",
    "end_effect",
    # agent traces
    "TRACE_DECISIONS_FORMAT",
    "ingest_trace",
    "process_facts",
    # status and the nudge
    "task_state",
    "deterministic_runs",
    "DeterministicRun",
    "nudge",
    "Nudge",
    "status_report",
    "StatusReport",
    # trial statistics
    "stats",
    "FamilyStats",
    "family_of",
    # receipts in git, and the gate
    "NOTES_REF",
    "attach",
    "attached",
    "receipt_commit",
    "gate",
    "gate_check",
    "GateResult",
    "GATE_MODES",
    "verify_commit",
    # exports and witnessing
    "export_bundle",
    "receipt_page",
    "final_status",
    "export_intoto",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPE",
    "pae",
    "cosign",
    "add_cosignatures",
    # proofs
    "prove_inclusion",
    "prove_consistency",
    # renderings and the demo
    "verify_lines",
    "pull_lines",
    "chain_lines",
    "pr_comment",
    "jsonable",
    "entry_document",
    "log_rows",
    "keyring_rows",
    "run_demo",
    "demo_contract",
    "resolve_trust",
    "TRUST_FILE",
    "REPO_TRUST_PATH",
    "gate_lines",
    "commit_lines",
    "ReceiptCheck",
    "check_receipts",
    "NoteLine",
    "bundle_ref",
    "has_bundle",
    "open_bundle",
    "BUNDLE_REFS",
    "git_identity",
    "SyncResult",
    "fetch_receipts",
    "push_receipts",
    "fetch_refspecs",
    "run_action",
    "ActionReport",
    "GithubApi",
    "GithubEvent",
    "parse_event",
    "task_from",
    "annotation",
    "COMMENT_MARKER",
    "export_vsa",
    "vsa_statement",
    "VSA_PREDICATE_TYPE",
    "status_lines",
    "install_hooks",
    "uninstall_hooks",
    "settings_path",
    "key_custody_warnings",
    "start_task",
    "HookInstall",
    "run_hook",
    "HookAnswer",
    "task_in",
    "plugin_dir",
]

_WHERE = {
    "Ledger": "_store",
    "Store": "_store",
    "Appended": "_store",
    "RecordRow": "_store",
    "LEDGER_DIRNAME": "_store",
    "find_ledger_dir": "_store",
    "shared_store": "_config",
    "open_source": "_config",
    "write_store_config": "_config",
    "write_text_atomic": "_config",
    "population": "_population",
    "population_csv": "_population",
    "ChangeRow": "_population",
    "POPULATION_COLUMNS": "_population",
    "describe_store": "_config",
    "pull": "_mirror",
    "PullResult": "_mirror",
    "LedgerError": "_errors",
    "InputError": "_errors",
    "StoreError": "_errors",
    "frozen_clock": "_clock",
    "VERSION": "_environment",
    "environment_digest": "_environment",
    "key_dir": "_keys",
    "key_path": "_keys",
    "generate_key_file": "_keys",
    "load_signer": "_keys",
    "add_key": "_keyring",
    "revoke_key": "_keyring",
    "create_key": "_keyring",
    "read_public_key": "_keys",
    "allowed_signers": "_keyring",
    "register_contract": "_contracts",
    "current_contract": "_contracts",
    "contract_history": "_contracts",
    "ContractHistoryRow": "_contracts",
    "waive_check": "_contracts",
    "git_root": "_git",
    "resolve_commit": "_git",
    "resolve_candidate": "_git",
    "Evidence": "_records",
    "record_tier": "_records",
    "seal_receipt": "_records",
    "record_by_hand": "_records",
    "run_deterministic": "tiers",
    "CheckRun": "tiers",
    "run_judge": "tiers",
    "JudgeRun": "tiers",
    "decide": "tiers",
    "evidence_bytes": "_evidence",
    "resolve_blob": "_evidence",
    "evidence_json": "_evidence",
    "record_evidence": "_evidence",
    "snapshot_of": "_evidence",
    "receipt_snapshot": "_evidence",
    "candidate_snapshot": "_evidence",
    "record_event": "_events",
    "task_events": "_events",
    "verified_receipt": "_events",
    "begin_effect": "_events",
    "end_effect": "_events",
    "TRACE_DECISIONS_FORMAT": "_traces",
    "ingest_trace": "_traces",
    "process_facts": "_traces",
    "task_state": "_status",
    "deterministic_runs": "_status",
    "DeterministicRun": "_status",
    "nudge": "_status",
    "status_report": "_status",
    "StatusReport": "_status",
    "Nudge": "_status",
    "stats": "_stats",
    "FamilyStats": "_stats",
    "family_of": "_stats",
    "NOTES_REF": "_git_notes",
    "attach": "_git_notes",
    "attached": "_git_notes",
    "receipt_commit": "_git_notes",
    "gate": "_gate",
    "gate_check": "_gate",
    "GateResult": "_gate",
    "GATE_MODES": "_gate",
    "verify_commit": "_gate",
    "export_bundle": "_export",
    "final_status": "_export",
    "receipt_page": "_export",
    "export_intoto": "_intoto",
    "PAYLOAD_TYPE": "_intoto",
    "PREDICATE_TYPE": "_intoto",
    "pae": "_intoto",
    "cosign": "_witness",
    "add_cosignatures": "_witness",
    "prove_inclusion": "_proofs",
    "prove_consistency": "_proofs",
    "verify_lines": "_render",
    "pull_lines": "_render",
    "keyring_rows": "_render",
    "log_rows": "_render",
    "entry_document": "_render",
    "chain_lines": "_render",
    "pr_comment": "_render",
    "jsonable": "_render",
    "run_demo": "_demo",
    "demo_contract": "_demo",
    "resolve_trust": "_trust",
    "TRUST_FILE": "_trust",
    "REPO_TRUST_PATH": "_trust",
    "gate_lines": "_render",
    "commit_lines": "_render",
    "ReceiptCheck": "_gate",
    "check_receipts": "_gate",
    "NoteLine": "_git_notes",
    "bundle_ref": "_git_notes",
    "has_bundle": "_git_notes",
    "open_bundle": "_git_notes",
    "BUNDLE_REFS": "_git_notes",
    "git_identity": "_git_notes",
    "SyncResult": "_git_sync",
    "fetch_receipts": "_git_sync",
    "push_receipts": "_git_sync",
    "fetch_refspecs": "_git_sync",
    "run_action": "_github",
    "ActionReport": "_github",
    "GithubApi": "_github",
    "GithubEvent": "_github",
    "parse_event": "_github",
    "task_from": "_github",
    "annotation": "_github",
    "COMMENT_MARKER": "_github",
    "export_vsa": "_intoto",
    "vsa_statement": "_intoto",
    "VSA_PREDICATE_TYPE": "_intoto",
    "status_lines": "_render",
    "install_hooks": "_hook_install",
    "uninstall_hooks": "_hook_install",
    "settings_path": "_hook_install",
    "key_custody_warnings": "_hook_install",
    "start_task": "_hook_install",
    "HookInstall": "_hook_install",
    "run_hook": "_hooks",
    "HookAnswer": "_hooks",
    "task_in": "_hooks",
    "plugin_dir": "_hook_install",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError("module 'ledger' has no attribute %r" % name)
    value = getattr(importlib.import_module("." + module, __package__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
