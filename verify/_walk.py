"""Steps 2 and 3 of docs/format.md §8: replay the chain in order, judging each entry
against the keyring replayed so far, and the genesis against the trust root.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from receipts import (
    KEYRING_KINDS,
    TASK_ENTRY_KINDS,
    Body,
    CompactRange,
    Contract,
    ContractRevision,
    Digest,
    Entry,
    EntryKind,
    EventType,
    Genesis,
    Keyring,
    KeyringError,
    NamedRetention,
    ReceiptsError,
    Role,
    TaskEvent,
    Waiver,
    authorize_entry,
    body_hash,
    contract_roles,
    decode_as,
    decode_body,
    decode_entry,
    encode_body,
    entry_hash,
    entry_signed_bytes,
    named_retention,
    namespace_for,
    next_keyring,
    parse_checkpoint,
    parse_note,
    replay_keyring,
    required_role,
    sshsig_verify,
    weakenings,
)

from ._errors import CannotVerify
from ._result import Defect
from ._source import StoredEntry
from ._trust import Trust

if TYPE_CHECKING:  # a single-receipt verify never starts processes nor keeps a state: keep its start-up light
    from concurrent.futures import Future, ProcessPoolExecutor

    from ._state import AuditState

__all__ = ["Walk", "SignatureQueue", "describe_waiver"]


def describe_waiver(seq: int, waiver: Waiver, label: str) -> str:
    return waiver.describe(seq, label)


@dataclass(slots=True)
class Walk:
    """State while replaying the chain in order. ``defects`` is what steps 2 and 3 found."""

    trust: Trust
    sparse: bool = False
    defects: list[Defect] = field(default_factory=list)
    keyring: Keyring | None = None
    genesis_admins: tuple[str, ...] = ()
    prev_hash: Digest | None = None
    prev_time: int = 0
    expected_seq: int = 0
    bodies: dict[bytes, tuple[Entry, Body]] = field(default_factory=dict)
    signers: dict[bytes, str] = field(default_factory=dict)  # body hash -> label of a signature that verified
    latest_contract: dict[str, tuple[ContractRevision, Contract]] = field(default_factory=dict)
    contracts: dict[tuple[str, bytes], Contract] = field(default_factory=dict)
    weakened: list[tuple[str, str]] = field(default_factory=list)  # (task, description)
    waivers: list[tuple[int, Waiver, str]] = field(default_factory=list)  # (seq, waiver, signer label)
    reveals: list[tuple[int, TaskEvent, str]] = field(default_factory=list)  # sealed sets made public (§6e)
    last_ring: Digest | None = None
    origin: str | None = None
    # When set, signatures are queued (authorization is still judged in order) and checked on worker processes.
    deferred: SignatureQueue | None = None
    last_task: dict[str, Digest] = field(default_factory=dict)
    entries: int = 0  # entries walked (a bundle holds only some)
    # False for a chain audit: keep only what later entries are judged by (keyring, task
    # heads, latest contracts), so that memory does not grow with the ledger.
    keep: bool = True
    ring_log: list[tuple[bytes, bytes]] = field(default_factory=list)  # keyring entries and bodies, in order
    # A receipt's walk keeps the bodies, contracts and waivers of its own task only: memory
    # grows with that task, not the ledger (a record of another task is read again on demand).
    only_task: str | None = None
    # The newest retention policy entry walked, which a checkpoint's retention line must
    # name (format.md §9); None when unknown (resumed from a state whose checkpoint has no line).
    last_retention: NamedRetention | None = NamedRetention(None, None)

    def retention_line(self, checkpoint: str) -> list[Defect]:
        """Whether the checkpoint (a signed note, at the size walked so far) names the newest
        retention policy entry walked: `checkpoint-retention` when it names another, or its
        line is malformed, or (resumed from a state whose checkpoint had no line) cannot be
        checked. A checkpoint without the line names nothing; proof then walks instead.
        """
        try:
            said = named_retention(parse_checkpoint(parse_note(checkpoint).text).extensions)
        except ReceiptsError as exc:
            return [Defect("checkpoint-retention", "the checkpoint's retention line is malformed: %s" % exc, None)]
        if said is None or said == self.last_retention:
            return []
        if self.last_retention is None:
            why = (
                "the audit state's checkpoint predates retention lines, so it cannot be checked: audit once without it"
            )
        else:
            why = "the newest retention policy below its size is %s" % (
                "none" if self.last_retention.seq is None else "entry %d" % self.last_retention.seq
            )
        named = "no policy" if said.seq is None else "entry %d" % said.seq
        return [
            Defect("checkpoint-retention", "the checkpoint names %s as its retention policy; %s" % (named, why), None)
        ]

    def defect(self, code: str, message: str, seq: int | None) -> None:
        self.defects.append(Defect(code, message, seq))

    def snapshot(self, leaves: CompactRange, checkpoint: str) -> AuditState | None:
        """What a later audit resumes from, at the size ``leaves`` reached (None before a genesis)."""
        if self.origin is None or self.prev_hash is None:
            return None
        from ._state import AuditState

        return AuditState(
            origin=self.origin,
            checkpoint=checkpoint,
            size=leaves.size,
            range=tuple(leaves.hashes),
            prev_hash=self.prev_hash.value,
            prev_time=self.prev_time,
            last_ring=self.last_ring.value if self.last_ring is not None else None,
            ring=tuple(self.ring_log),
            tasks=tuple(sorted((t, d.value) for t, d in self.last_task.items())),
            contracts=tuple(encode_body(rev) for _, (rev, _c) in sorted(self.latest_contract.items())),
        )

    @classmethod
    def resumed(cls, state: AuditState, trust: Trust, deferred: SignatureQueue | None) -> Walk:
        """A chain audit's walk as it stood at ``state.size``: the keyring replayed (its
        signatures checked again) from the state's keyring entries, the trust root judged
        against its genesis. A state that does not replay is bad input (`CannotVerify`).
        """
        walk = cls(trust, deferred=deferred, keep=False)
        try:
            changes = [(decode_entry(e), b) for e, b in state.ring]
            ring = replay_keyring([(entry, decode_body(entry.kind, b)) for entry, b in changes], verify_signatures=True)
            genesis = decode_as(Genesis, state.ring[0][1])
            contracts = [decode_as(ContractRevision, c) for c in state.contracts]
            parsed = [(rev, rev.parse()) for rev in contracts]
        except ReceiptsError as exc:
            raise CannotVerify("the audit state's keyring or contracts do not decode: %s" % exc) from None
        if ring is None or changes[0][0].kind is not EntryKind.GENESIS:
            raise CannotVerify("the audit state's keyring does not start with a valid genesis")
        walk.keyring, walk.ring_log = ring, list(state.ring)
        try:
            walk.last_retention = named_retention(parse_checkpoint(parse_note(state.checkpoint).text).extensions)
        except ReceiptsError:
            walk.last_retention = None
        walk.genesis_admins = tuple(
            sorted(s.key_id for s in Keyring.from_genesis(genesis) if Role.ADMIN in s.spec.roles)
        )
        walk.origin = genesis.origin
        if walk.origin != state.origin:
            raise CannotVerify("the audit state's keyring is for log %r, not %r" % (walk.origin, state.origin))
        if not trust.pins(changes[0][0].signer):
            walk.defect(
                "trust-root",
                "genesis is signed by %s, which the trust root (%s) does not pin"
                % (changes[0][0].signer, walk.trust_label),
                0,
            )
        walk.prev_hash, walk.prev_time, walk.expected_seq = Digest(state.prev_hash), state.prev_time, state.size
        walk.last_ring = Digest(state.last_ring) if state.last_ring is not None else None
        walk.last_task = {t: Digest(h) for t, h in state.tasks}
        walk.latest_contract = {rev.task_id: (rev, contract) for rev, contract in parsed}
        return walk

    @property
    def trust_label(self) -> str:
        return self.trust.label(self.genesis_admins)

    def step(self, stored: StoredEntry, check_signature: bool) -> Body | None:
        """Judge the next entry (steps 2 and 3, in the order format.md gives them).

        Args:
            stored: the entry's row as the source holds it.
            check_signature: whether to check its signature now (keyring, contract and waiver
                entries are always checked; tier records only when a receipt relies on them).

        Returns:
            Its body if it decoded, else None (the defects say why).
        """
        self.entries += 1
        placed = self._place(stored)
        if placed is None:
            return None
        entry, this_hash = placed
        body = self._open(stored, entry)
        if body is None:
            return None
        self._links(stored, entry, body, this_hash)
        if isinstance(body, Genesis):
            self._genesis(entry, body)
        if self.keyring is None:
            self.defect("no-genesis", "entry %d comes before any valid genesis entry" % stored.seq, stored.seq)
            return body
        self._authorize(entry, body, check_signature, self.keyring)
        if self.keeps(body):
            self.bodies.setdefault(entry.body_hash.value, (entry, body))
        return body

    def _place(self, stored: StoredEntry) -> tuple[Entry, Digest] | None:
        """Steps 2a and 2b: the entry decodes, sits at its position and links to the one before."""
        seq = stored.seq
        # 2a. The entry decodes canonically, sits at its position, and its index columns agree.
        try:
            entry = decode_entry(stored.entry)
        except ReceiptsError as exc:
            self.defect("entry-malformed", "entry %d does not decode: %s" % (seq, exc), seq)
            self._lose_link(stored)
            return None
        # A sparse copy (a bundle) may skip entries; its inclusion proofs fix each entry's place.
        contiguous = seq == self.expected_seq
        if entry.seq != seq or (not self.sparse and not contiguous):
            found = "expected entry %d, found entry %d stored at %d" % (self.expected_seq, entry.seq, seq)
            self.defect("chain-gap", found, seq)
        self.expected_seq = seq + 1
        this_hash = entry_hash(stored.entry)
        if (
            stored.hash != this_hash.value
            or stored.kind != entry.kind.value
            or stored.body_hash != entry.body_hash.value
        ):
            self.defect("index-mismatch", "entry %d: stored index columns disagree with its bytes" % seq, seq)
        # 2b. It links to the entry before it.
        if (contiguous or not self.sparse) and entry.prev != self.prev_hash:
            self.defect("chain-link", "entry %d does not link to the entry before it" % seq, seq)
        self.prev_hash = this_hash
        return entry, this_hash

    def _open(self, stored: StoredEntry, entry: Entry) -> Body | None:
        """Steps 2c and 2d's clock: the body re-hashes and decodes; time never runs backwards."""
        seq = stored.seq
        # 2c. Its body re-hashes to the body hash it commits to, and decodes canonically.
        body: Body | None = None
        if body_hash(entry.kind, stored.body) != entry.body_hash:
            self.defect("body-hash", "entry %d: body bytes do not hash to the committed body hash" % seq, seq)
        else:
            try:
                body = decode_body(entry.kind, stored.body)
            except ReceiptsError as exc:
                self.defect("body-malformed", "entry %d: body does not decode: %s" % (seq, exc), seq)
        # 2d. Time never runs backwards along the chain (no back-dating past a revocation).
        if entry.time < self.prev_time:
            self.defect("time-order", "entry %d is dated before the entry it follows" % seq, seq)
        self.prev_time = max(self.prev_time, entry.time)
        return body

    def _links(self, stored: StoredEntry, entry: Entry, body: Body, this_hash: Digest) -> None:
        """Step 2d's back-pointers, and 2a's task column: the latest keyring entry and the task's previous entry."""
        seq = stored.seq
        task = getattr(body, "task_id", None) if entry.kind in TASK_ENTRY_KINDS else None
        # 2a. ... including the task column, which `ledger log --task` and `ledger status` select by.
        if stored.task != task:
            found = "entry %d: its stored task column says %r, its body %r" % (seq, stored.task, task)
            self.defect("index-mismatch", found, seq)
        if entry.ring != self.last_ring:
            self.defect("ring-link", "entry %d does not name the latest keyring entry before it" % seq, seq)
        if entry.task_prev != (self.last_task.get(task) if task is not None else None):
            self.defect("task-link", "entry %d does not name the previous entry of its task" % seq, seq)
        if entry.kind is EntryKind.RETENTION and entry.seq > 0:
            self.last_retention = NamedRetention(entry.seq, this_hash)
        if entry.kind in KEYRING_KINDS:
            self.last_ring = this_hash
            self.ring_log.append((stored.entry, stored.body))
        if task is not None:
            self.last_task[task] = this_hash

    def _genesis(self, entry: Entry, body: Genesis) -> None:
        self.keyring = Keyring.from_genesis(body)
        self.genesis_admins = tuple(sorted(s.key_id for s in self.keyring if Role.ADMIN in s.spec.roles))
        self.origin = body.origin
        # 3. The trust root: the genesis signer must be pinned (unless trust is explicitly on first use).
        if not self.trust.pins(entry.signer):
            found = "genesis is signed by %s, which the trust root (%s) does not pin" % (entry.signer, self.trust_label)
            self.defect("trust-root", found, entry.seq)

    def _authorize(self, entry: Entry, body: Body, check_signature: bool, keyring: Keyring) -> None:
        """Steps 2e to 2g: who may sign this, and what a keyring change does after it."""
        # 2e. Its signer may sign this kind now, and the signature verifies (keyring, waiver,
        # contract, event and receipt entries here; tier records when a receipt relies on them).
        if isinstance(body, ContractRevision):
            self._contract(entry, body)
        elif isinstance(body, Waiver):
            label = self.sign_check(entry, body)
            if label is not None and self.keeps(body):
                self.waivers.append((entry.seq, body, label))
        elif isinstance(body, TaskEvent) and body.type is EventType.SEALED_REVEALED:
            # A reveal changes what a sealed check's verdict is judged by: its signature always counts.
            label = self.sign_check(entry, body)
            if label is not None and self.keeps(body):
                self.reveals.append((entry.seq, body, label))
        elif check_signature or entry.kind in KEYRING_KINDS:
            self.sign_check(entry, body)
        # 2g. Keyring changes take effect for the entries after this one.
        try:
            self.keyring = next_keyring(keyring, body, entry.seq)
        except KeyringError as exc:
            self.defect("keyring-change", "entry %d: %s" % (entry.seq, exc), entry.seq)

    def keeps(self, body: Body) -> bool:
        """Whether the walk keeps this body for the steps after it."""
        return self.keep and (self.only_task is None or getattr(body, "task_id", None) == self.only_task)

    def _contract(self, entry: Entry, body: ContractRevision) -> None:
        # 2f. A revision that lowers the bar must be an admin's; it is listed, naming the signer.
        try:
            contract = body.parse()
        except ReceiptsError as exc:
            self.defect("body-malformed", "entry %d: contract does not parse: %s" % (entry.seq, exc), entry.seq)
            return
        prev = self.latest_contract.get(body.task_id)
        if body.previous != (prev[0].config_hash if prev else None):
            self.defect(
                "contract-previous",
                "entry %d: contract revision of %s does not name the revision it replaces" % (entry.seq, body.task_id),
                entry.seq,
            )
        lowered = weakenings(prev[1], contract) if prev else ()
        signer = self.sign_check(entry, body, contract_roles(bool(lowered)))
        if lowered:
            self.weakened.append(
                (
                    body.task_id,
                    "entry %d: %s weakened the contract of %s: %s (%s)"
                    % (entry.seq, signer or entry.signer, body.task_id, "; ".join(lowered), body.provenance()),
                )
            )
        self.latest_contract[body.task_id] = (body, contract)
        if self.keeps(body):
            self.contracts[(body.task_id, body.config_hash.value)] = contract

    def signature(self, entry: Entry, body: Body, roles: tuple[Role, ...] | None = None) -> str | Defect:
        """The signer's label if it may sign this entry and its signature verifies (or is
        queued for a worker); else the defect saying why. Records a verified signer.
        """
        if self.keyring is None:
            return Defect("no-genesis", "entry %d comes before any valid genesis entry" % entry.seq, entry.seq)
        try:
            state, role = authorize_entry(self.keyring, entry, roles or (required_role(entry.kind, body),))
        except KeyringError as exc:
            return Defect("signer-unauthorized", "entry %d: %s" % (entry.seq, exc), entry.seq)
        except ReceiptsError as exc:
            return Defect("signature-invalid", "entry %d: %s" % (entry.seq, exc), entry.seq)
        label = "%s (%s)" % (state.spec.name, state.key_id)
        if self.deferred is not None:
            self.deferred.append(
                (
                    state.spec.public_key,
                    namespace_for(role),
                    entry_signed_bytes(entry),
                    entry.signature,
                    entry.seq,
                    state.spec.name,
                )
            )
            return label
        try:
            sshsig_verify(state.spec.public_key, namespace_for(role), entry_signed_bytes(entry), entry.signature)
        except ReceiptsError as exc:
            return Defect(
                "signature-invalid", "entry %d: signature by %s: %s" % (entry.seq, state.spec.name, exc), entry.seq
            )
        self.signers[entry.body_hash.value] = label
        return label

    def later_reveals(self, source_entries: Iterable[StoredEntry], after: int) -> None:
        """The task's ``sealed_revealed`` events appended after the receipt (at ``after``),
        each re-hashed, decoded and signature-checked under the keyring the walk reached: a
        reveal made after a receipt still decides how its sealed checks are judged (§6e).
        """
        for stored in source_entries:
            if stored.seq <= after or stored.kind != EntryKind.EVENT.value:
                continue
            try:
                entry = decode_entry(stored.entry)
                if body_hash(entry.kind, stored.body) != entry.body_hash:
                    self.defect(
                        "body-hash",
                        "entry %d: body bytes do not hash to the committed body hash" % stored.seq,
                        stored.seq,
                    )
                    continue
                body = decode_body(entry.kind, stored.body)
            except ReceiptsError as exc:
                self.defect("body-malformed", "entry %d: %s" % (stored.seq, exc), stored.seq)
                continue
            if isinstance(body, TaskEvent) and body.type is EventType.SEALED_REVEALED:
                label = self.sign_check(entry, body)
                if label is not None:
                    self.reveals.append((entry.seq, body, label))

    def sign_check(self, entry: Entry, body: Body, roles: tuple[Role, ...] | None = None) -> str | None:
        """`signature` during the walk: a defect joins the walk's own."""
        found = self.signature(entry, body, roles)
        if isinstance(found, Defect):
            self.defects.append(found)
            return None
        return found

    def _lose_link(self, stored: StoredEntry) -> None:
        # An undecodable entry still occupies its place; carry its stored hash so the next link is judged.
        self.expected_seq = stored.seq + 1
        self.prev_hash = entry_hash(stored.entry)


def _signature_ok(item: tuple[bytes, str, bytes, bytes]) -> str | None:
    try:
        sshsig_verify(*item)
    except ReceiptsError as exc:
        return str(exc)
    return None


_Queued = tuple[bytes, str, bytes, bytes, int, str]  # key, namespace, signed bytes, signature, seq, signer name


def _signatures_ok(chunk: list[tuple[bytes, str, bytes, bytes]]) -> list[str | None]:
    return [_signature_ok(item) for item in chunk]


def _failures(items: list[_Queued], outcomes: list[str | None]) -> list[Defect]:
    return [
        Defect("signature-invalid", "entry %d: signature by %s: %s" % (item[4], item[5], why), item[4])
        for item, why in zip(items, outcomes, strict=True)
        if why is not None
    ]


def _not_run(exc: Exception) -> CannotVerify:
    # A worker died (killed, out of memory): its signatures were not checked, so nothing is verified.
    return CannotVerify("signature checks could not run: %s" % (str(exc) or type(exc).__name__))


class SignatureQueue:
    """Ed25519 is most of an audit's cost. Checks are queued in chunks that worker
    processes verify while the ordered walk goes on; a chain too short to repay the
    processes is checked in this one.
    """

    CHUNK = 2000

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pending: list[_Queued] = []
        self.sent: list[tuple[list[_Queued], Future[list[str | None]]]] = []
        self.pool: ProcessPoolExecutor | None = None
        self.failed: list[Defect] = []

    def append(self, item: _Queued) -> None:
        self.pending.append(item)
        if self.workers > 1 and len(self.pending) >= self.CHUNK:
            if self.pool is None:
                from concurrent.futures import ProcessPoolExecutor

                self.pool = ProcessPoolExecutor(self.workers)
            try:
                self.sent.append((self.pending, self.pool.submit(_signatures_ok, [i[:4] for i in self.pending])))
            except Exception as exc:
                raise _not_run(exc) from None
            self.pending = []
            # A few chunks in flight keep every worker busy; more would only hold memory.
            while len(self.sent) > 2 * self.workers:
                items, future = self.sent.pop(0)
                self._collect(items, future)

    def _collect(self, items: list[_Queued], future: Future[list[str | None]]) -> None:
        try:
            outcomes = future.result()
        except Exception as exc:
            raise _not_run(exc) from None
        self.failed += _failures(items, outcomes)

    def defects(self) -> list[Defect]:
        for items, future in self.sent:
            self._collect(items, future)
        self.sent = []
        self.failed += _failures(self.pending, _signatures_ok([i[:4] for i in self.pending]))
        self.pending = []
        return self.failed

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
