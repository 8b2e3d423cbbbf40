"""Records of the native transfer recovery journal, and their closed, canonical, hash-chained encoding.

The journal is an append-only sequence of create-once objects. Each record names its sequence number and the
SHA-256 of the previous record's bytes, so a gap, a reorder or an edited record is detected on read. Bodies are
closed models per kind; stored bytes must be exactly the canonical encoding of the decoded record, so a reader
proves it holds the bytes whose digests it later relies on. The size cap is a hard fail-closed bound. A record of
another build's format (an unknown kind, plan kind or stage format) is refused with
``DPONE_RECORD_FORMAT_UNSUPPORTED`` (``core/record_format.py``), naming the format found and its writer.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airflow_provider_dpone.core import record_format
from airflow_provider_dpone.core.canonical import Hex64, canonical_json_bytes, parse_canonical_json, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.chunk import ChunkReceipt, NativeChunkPlan, NativeStageComplete
from airflow_provider_dpone.transfer.values.raw_snapshot_eof import EXTENSION_KEY

MAX_RECORD_BYTES: Final[int] = 256 * 1024
GENESIS: Final = "0" * 64
_Id = Field(pattern=r"^[0-9a-f]{32}$")


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LeaseRecord(_Body):
    """Writer custody: who may write, until when. ``fenced_holder`` names an expired lease this one replaced."""

    holder: str = _Id
    action: Literal["acquired", "renewed", "released"]
    expires_at: str
    fenced_holder: str | None = None


class InvocationSettled(_Body):
    """A pre-EOF invocation whose writer and target custody were proven settled: it must be re-extracted."""

    invocation_id: str = _Id
    outcome: Literal["reextract_required"]
    reason: str
    stage_retired: bool


class TargetAttempt(_Body):
    """One attempt at staging the sealed chunks into the target (the target's staging is per invocation)."""

    invocation_id: str = _Id
    attempt: int = Field(ge=1)


class TargetPrepareIntent(TargetAttempt):
    """Journaled before ``prepare``: the target may hold staging of this invocation from now on."""


class TargetVerified(TargetAttempt):
    """Every chunk was read back from staging and matched; totals as the target computed them."""

    rows: int = Field(ge=0)
    typed_sum: Hex64


class TargetCleaned(TargetAttempt):
    """The attempt's staging was dropped (after a failed verification)."""


class PublishIntent(TargetAttempt):
    """Journaled before ``publish``: from now on the outcome is unknown until recorded."""


class Published(_Body):
    publication_id: str
    rows: int = Field(ge=0)
    workload_digest: Hex64
    receipt_sha256: Hex64


class PublishAbsent(TargetAttempt):
    """``reconcile`` proved the attempt's publication absent (final)."""


class Succeeded(_Body):
    invocation_id: str = _Id
    publication_id: str
    rows: int = Field(ge=0)
    workload_digest: Hex64
    evidence_sha256: Hex64


_BODIES: Final[dict[str, type[BaseModel]]] = {
    "lease": LeaseRecord,
    "plan": NativeChunkPlan,
    "chunk": ChunkReceipt,
    "stage_complete": NativeStageComplete,
    "invocation_settled": InvocationSettled,
    "target_prepare_intent": TargetPrepareIntent,
    "target_verified": TargetVerified,
    "target_cleaned": TargetCleaned,
    "publish_intent": PublishIntent,
    "published": Published,
    "publish_absent": PublishAbsent,
    "succeeded": Succeeded,
}

RecordKind = Literal[
    "lease",
    "plan",
    "chunk",
    "stage_complete",
    "invocation_settled",
    "target_prepare_intent",
    "target_verified",
    "target_cleaned",
    "publish_intent",
    "published",
    "publish_absent",
    "succeeded",
]


def body_json(body: BaseModel) -> dict[str, Any]:
    """The JSON form of a body (stage-complete keeps its legacy shape: no empty extension)."""
    if isinstance(body, NativeStageComplete):
        return body.to_json()
    return body.model_dump(mode="json")


class JournalRecord:
    """A decoded record: sequence number, previous digest, kind, closed body, and its exact stored bytes."""

    def __init__(self, seq: int, prev_sha256: str, kind: str, body: BaseModel, raw: bytes) -> None:
        self.seq = seq
        self.prev_sha256 = prev_sha256
        self.kind = kind
        self.body = body
        self.raw = raw

    @property
    def sha256(self) -> str:
        return sha256_hex(self.raw)


def encode_record(seq: int, prev_sha256: str, kind: str, body: BaseModel) -> bytes:
    if _BODIES.get(kind) is not type(body):
        raise DponeError("native_transfer.journal_corrupt", f"record kind {kind} does not match its body")
    return canonical_json_bytes(
        {"seq": seq, "prev_sha256": prev_sha256, "kind": kind, "body": body_json(body)}, max_bytes=MAX_RECORD_BYTES
    )


def _mentions_extension(value: object) -> bool:
    if isinstance(value, dict):
        return EXTENSION_KEY in value or any(_mentions_extension(item) for item in value.values())
    if isinstance(value, list):
        return any(_mentions_extension(item) for item in value)
    return False


def decode_record(raw: bytes) -> JournalRecord:
    """Decode one stored record; anything not exactly canonical and closed fails closed."""
    try:
        envelope = parse_canonical_json(raw, max_bytes=MAX_RECORD_BYTES)
    except DponeError as exc:
        raise DponeError("native_transfer.journal_corrupt", f"record is not canonical JSON ({exc.code})") from None
    if not isinstance(envelope, dict) or set(envelope) != {"seq", "prev_sha256", "kind", "body"}:
        raise DponeError("native_transfer.journal_corrupt", "record envelope is not closed")
    kind, body, seq, prev = envelope["kind"], envelope["body"], envelope["seq"], envelope["prev_sha256"]
    if not isinstance(kind, str) or not isinstance(seq, int) or not isinstance(prev, str) or not isinstance(body, dict):
        raise DponeError("native_transfer.journal_corrupt", "malformed record envelope")
    model = _BODIES.get(kind)
    if model is None:
        raise record_format.refusal(f"journal record kind {record_format.format_name(kind)}")
    if kind != "stage_complete" and _mentions_extension(body):
        raise DponeError("native_transfer.recovery_binding_invalid", f"completion extension inside a {kind} record")
    code = "native_transfer.recovery_binding_invalid" if kind == "stage_complete" else "native_transfer.journal_corrupt"
    try:
        decoded = model.model_validate(body)
    except ValidationError as exc:
        refused = record_format.refusal_of(exc, f"journal {kind} record")
        if refused is not None:
            raise refused from None
        fields = sorted({".".join(str(p) for p in err["loc"]) for err in exc.errors()})[:8]
        raise DponeError(code, f"{kind} record fields: {', '.join(fields)}") from None
    except DponeError as exc:
        if exc.code == "native_transfer.row_digest_unknown":
            raise  # a newer version's record, not a corrupt one
        raise DponeError(code, f"{kind} record: {exc.code}") from None
    if encode_record(seq, prev, kind, decoded) != raw:
        raise DponeError("native_transfer.journal_corrupt", f"{kind} record does not re-encode to its stored bytes")
    return JournalRecord(seq, prev, kind, decoded, raw)
