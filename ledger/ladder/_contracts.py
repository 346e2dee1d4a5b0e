"""Completion contracts in the chain: register a revision (a weakening needs an admin,
the store decides), read a task's history, and waive a named check until a date.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from receipts import (
    Contract,
    ContractRevision,
    Digest,
    FormatError,
    ReceiptsError,
    Signer,
    Waiver,
    check_for_registration,
    decode_entry,
    weakenings,
)

from .. import _clock
from .._errors import InputError
from .._layout import contract_path
from ..keys._trust import branch_file
from ..store._ledger import Appended, Store

__all__ = [
    "register_contract",
    "register_in_force",
    "TargetContract",
    "target_contract",
    "current_contract",
    "contract_history",
    "ContractHistoryRow",
    "waive_check",
]


def register_contract(
    store: Store,
    task_id: str,
    data: bytes,
    signer: Signer,
    source: str = "contract",
    reason: str = "",
    criteria_from: str = "",
) -> tuple[Contract, Appended | None]:
    """Record ``data`` as the task's current contract unless it already is. A revision that
    weakens the bar is refused unless ``signer`` is an admin key and ``reason`` says why
    (the store decides); ``criteria_from`` names where the criteria came from.
    """
    try:
        ContractRevision(task_id, data, None, reason, criteria_from)  # the task id and the fields' own limits
        # Refused before anything is signed: a typo signed once is a weakening to correct.
        contract = check_for_registration(data, source)
    except ReceiptsError as exc:
        raise InputError(str(exc).replace("contract of %s" % task_id, source, 1)) from None
    if contract.task_id != task_id:
        raise InputError("%s names task %s" % (source, contract.task_id))
    latest = store.latest_contract(task_id)
    if latest is not None and latest.contract == data:
        return contract, None
    revision = ContractRevision(task_id, data, None if latest is None else latest.config_hash, reason, criteria_from)
    return contract, store.append(revision, signer)


@dataclass(frozen=True, slots=True)
class TargetContract:
    """The task's contract as committed on the target branch (``data`` None: it has none)."""

    where: str  # e.g. origin/main:.ledger/contracts/T-3.toml
    data: bytes | None


def target_contract(repo: Path, ledger_dir: Path, task_id: str, trust_ref: str | None) -> TargetContract | None:
    """The task's contract on the target branch (`ledger.keys._trust.branch_file`: the
    trust ref given, else origin/main, else main), at the path the ledger directory gives
    it in the repository (``.ledger/contracts/`` for a ledger kept outside); None when
    there is no target branch.
    """
    path = contract_path(ledger_dir, task_id)
    try:
        named = path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        named = Path(".ledger", *path.parts[-2:]).as_posix()
    found = branch_file(repo, trust_ref, named)
    return None if found is None else TargetContract(*found)


def register_in_force(
    store: Store,
    task_id: str,
    data: bytes,
    signer: Signer,
    source: str,
    target: TargetContract | None,
) -> tuple[Contract, Appended | None]:
    """The contract a candidate is checked against: never one it brings on its own.

    The contract in force is the ledger's latest registered revision, else the target
    branch's copy (registered first, by ``signer``, as the task's first revision). The
    candidate's copy ``data`` is then a revision of that one, judged by the weakening rules
    (`register_contract`: a weakening needs an admin key).

    Args:
        store: the ledger.
        task_id: the task.
        data: the candidate's contract file.
        signer: the key that registers (the deterministic role's, in CI).
        source: where ``data`` was read (for messages).
        target: the target branch's copy (None: no target branch was found).

    Raises:
        InputError: nothing registered and nothing on the target branch; a weakening
            without an admin key; a contract that does not parse.
    """
    if store.latest_contract(task_id) is None:
        if target is None or target.data is None:
            where = target.where if target is not None else "the target branch (none was found)"
            raise InputError(
                "task %s has no contract at %s and none registered in the ledger: a candidate cannot bring its"
                " own; commit it to the target branch, or register it (`ledger contract set %s --key KEY`)"
                % (task_id, where, task_id)
            )
        register_contract(store, task_id, target.data, signer, target.where)
    return register_contract(store, task_id, data, signer, source)


def current_contract(store: Store, task_id: str, config: Digest) -> Contract:
    """The task's registered contract with this config hash; refuse an unregistered one."""
    for _, revision in store.contract_revisions(task_id):
        if revision.config_hash == config:
            return revision.parse()
    raise InputError(
        "no registered contract of %s has config %s: register it with `ledger contract set` (or run `ledger check`)"
        % (task_id, config.short())
    )


def waive_check(
    store: Store, admin: Signer, task_id: str, check_id: str, reason: str, expires: int, config: Digest | None = None
) -> Appended:
    """Let a named failing check of the task's current contract stop blocking until ``expires``."""
    if config is None:
        latest = store.latest_contract(task_id)
        if latest is None:
            raise InputError("task %s has no registered contract to waive a check of" % task_id)
        config = latest.config_hash
    contract = current_contract(store, task_id, config)
    if contract.check(check_id) is None:
        raise InputError("the contract of %s has no check %r" % (task_id, check_id))
    if expires <= _clock.now():
        raise InputError("a waiver must expire in the future")
    try:
        body = Waiver(task_id, check_id, config, reason, expires)
    except FormatError as exc:
        raise InputError(str(exc)) from None
    return store.append(body, admin)


@dataclass(frozen=True, slots=True)
class ContractHistoryRow:
    """One revision of a task's contract: where it sits, its hash, who signed it, what it lowered."""

    seq: int
    config: Digest
    signer: str
    weakenings: tuple[str, ...]
    reason: str = ""
    criteria_from: str = ""
    signer_name: str = ""  # the key's name in the keyring ("" for a key it does not hold)

    def as_dict(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "config": str(self.config),
            "signer": self.signer,
            "signer_name": self.signer_name,
            "weakenings": list(self.weakenings),
            "reason": self.reason,
            "criteria_from": self.criteria_from,
        }


def contract_history(store: Store, task_id: str) -> list[ContractHistoryRow]:
    """The task's contract revisions, oldest first, each with what it weakened."""
    rows, prev = [], None
    names = {state.key_id: state.spec.name for state in store.keyring()}
    for seq, revision in store.contract_revisions(task_id):
        stored = store.reader.by_seq(seq)
        if stored is None:
            continue
        current = revision.parse()
        rows.append(
            ContractHistoryRow(
                seq,
                revision.config_hash,
                decode_entry(stored.entry).signer,
                weakenings(prev, current) if prev else (),
                revision.reason,
                revision.criteria_from,
                names.get(decode_entry(stored.entry).signer, ""),
            )
        )
        prev = current
    return rows
