"""receipts: the frozen data model, canonical bytes, hashes, signatures and the
merge-eligibility rule of receipt-ledger. Pure: no file, database or network I/O."""

from ._b64 import b64decode_canonical
from ._cbor import canonical_dumps, canonical_loads
from ._chain import KEYRING_KINDS, TASK_KINDS, Entry, EntryKind
from ._contract import (
    NO_OP_KINDS,
    SIGNAL_TYPES,
    Check,
    Contract,
    ContractError,
    ContractRevision,
    JudgeSettings,
    ToolPolicy,
    Waiver,
    contract_roles,
    parse_contract,
    thaw,
    weakenings,
)
from ._codec import (
    Body,
    body_hash,
    body_kind,
    candidate_hash,
    config_hash,
    decode_body,
    decode_entry,
    decode_receipt,
    decode_tier_record,
    encode_body,
    encode_entry,
    encode_receipt,
    encode_tier_record,
    entry_hash,
    entry_signed_bytes,
    evidence_list_hash,
    new_tier_record,
    receipt_hash,
    required_role,
    tier_record_hash,
)
from ._deterministic import (
    CHECK_RESULT_FORMAT,
    CHECK_RESULT_MEDIA_TYPE,
    NON_TRIVIAL_SIGNALS,
    SNAPSHOT_FORMAT,
    SNAPSHOT_MEDIA_TYPE,
    Outcome,
    check_evidence_id,
    declared_params,
    derive_check,
    derive_deterministic,
    integrity_failure,
    parse_evidence_json,
)
from ._digest import ContentHasher, Digest, Domain, content_digest, domain_hash
from ._errors import FormatError, KeyringError, ReceiptsError, SignatureError
from ._judge import (
    JUDGE_RUN_FORMAT,
    JUDGE_RUN_MEDIA_TYPE,
    Answer,
    SampleOutcome,
    attempt_outcome,
    derive_judge,
    model_family,
    parse_answer,
    reply_text,
    sample_outcome,
)
from ._events import EVENT_ROLES, EffectOutcome, EventType, TaskEvent
from ._lifecycle import State, Step, TaskState, derive_state
from ._keyring import Genesis, KeyAdd, Keyring, KeyRevoke, KeySpec, KeyState
from ._merkle import (
    EMPTY_ROOT,
    MemoryTree,
    Nodes,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    tree_root,
    verify_consistency,
    verify_inclusion,
)
from ._note import (
    Checkpoint,
    NoteSignature,
    SignedNote,
    checkpoint_text,
    cosign_note,
    note_key_id,
    parse_checkpoint,
    parse_note,
    sign_note,
    verify_cosignature,
    verify_note,
)
from ._model import (
    FORMAT_VERSION,
    LADDER,
    EvidenceRef,
    LadderReceipt,
    Role,
    Tier,
    TierEntry,
    TierRecord,
    Verdict,
)
from ._policy import Eligibility, derive_merge_eligible, latest_human_decisions
from ._sshsig import (
    Ed25519Signer,
    Signer,
    armor,
    dearmor,
    ed25519_verify,
    fingerprint,
    is_weak_ed25519_key,
    namespace_for,
    parse_public_key_blob,
    parse_public_key_line,
    public_key_blob,
    public_key_line,
    sshsig_namespace,
    sshsig_public_key,
    sshsig_sign,
    sshsig_verify,
)

__all__ = [
    "b64decode_canonical",
    "thaw",
    "ed25519_verify", "is_weak_ed25519_key",
    "State", "Step", "TaskState", "derive_state", "integrity_failure",
    "EVENT_ROLES", "EffectOutcome", "EventType", "TaskEvent",
    "EMPTY_ROOT", "MemoryTree", "Nodes", "consistency_proof", "inclusion_proof", "leaf_hash", "node_hash", "tree_root",
    "verify_consistency", "verify_inclusion", "Checkpoint", "NoteSignature", "SignedNote", "checkpoint_text", "cosign_note",
    "note_key_id", "parse_checkpoint", "parse_note", "sign_note", "verify_cosignature", "verify_note",
    "KEYRING_KINDS", "TASK_KINDS",
    "NO_OP_KINDS", "SIGNAL_TYPES", "Check", "Contract", "ContractError", "ContractRevision", "JudgeSettings", "ToolPolicy", "Waiver", "contract_roles", "JUDGE_RUN_FORMAT",
    "JUDGE_RUN_MEDIA_TYPE", "Answer", "SampleOutcome", "attempt_outcome", "derive_judge", "model_family", "parse_answer",
    "reply_text", "sample_outcome",
    "parse_contract", "weakenings", "sshsig_namespace", "CHECK_RESULT_FORMAT", "CHECK_RESULT_MEDIA_TYPE",
    "NON_TRIVIAL_SIGNALS", "SNAPSHOT_FORMAT", "SNAPSHOT_MEDIA_TYPE", "Outcome", "check_evidence_id", "declared_params",
    "derive_check", "derive_deterministic", "parse_evidence_json", "latest_human_decisions",
    "FORMAT_VERSION", "LADDER", "Body", "ContentHasher", "Digest", "Domain", "Ed25519Signer",
    "Eligibility", "Entry", "EntryKind", "EvidenceRef", "FormatError", "Genesis", "KeyAdd",
    "KeyRevoke", "KeySpec", "KeyState", "Keyring", "KeyringError", "LadderReceipt", "ReceiptsError",
    "Role", "SignatureError", "Signer", "Tier", "TierEntry", "TierRecord", "Verdict", "armor",
    "body_hash", "body_kind", "candidate_hash", "canonical_dumps", "canonical_loads", "config_hash",
    "content_digest", "dearmor", "decode_body", "decode_entry", "decode_receipt",
    "decode_tier_record", "derive_merge_eligible", "domain_hash", "encode_body", "encode_entry",
    "encode_receipt", "encode_tier_record", "entry_hash", "entry_signed_bytes",
    "evidence_list_hash", "fingerprint", "namespace_for", "new_tier_record",
    "parse_public_key_blob", "parse_public_key_line", "public_key_blob", "public_key_line",
    "receipt_hash", "required_role", "sshsig_public_key", "sshsig_sign", "sshsig_verify",
    "tier_record_hash",
]
