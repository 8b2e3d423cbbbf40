"""Versioned codec between authority records and KeeperMap rows.

Encode: record -> canonical JSON payload + its SHA-256 + the projected columns. Decode dispatches on the payload's
``schema`` and fails closed, each with a stable code, on: an oversize payload (> :data:`MAX_AUTHORITY_PAYLOAD_BYTES`),
a payload whose digest differs from ``payload_sha256``, non-canonical bytes (including any value that validation would
have to coerce: the decoded record must re-encode to the identical bytes), a malformed record, or projected columns
that disagree with the payload. A record of another build's format -- an unknown ``schema``, or a known schema holding
a field only pre-release builds wrote (content digest v1, an unpinned or "abandoned" permit) -- is refused with
``DPONE_RECORD_FORMAT_UNSUPPORTED``, naming the format found and the build that wrote it (``core/record_format.py``). A record malformed only inside its quality-replay capsule fails with
the quality codes of seed 002's failure table instead: a capsule without its core is evidence that is absent
(``DPONE_REPLAY_QUALITY_EVIDENCE_REQUIRED``), any other defect of the capsule is malformed evidence
(``..._INVALID``). V1/V2 internal and V2 external records share one target-key namespace and are told apart only by
``schema``.

Decoding is pure, so results are memoized by (payload, digest): the protocol re-reads the same row many times, and
a row this process just encoded is memoized at encode time (the round trip ``decode(encode(r)) == r`` is tested for
every schema and phase).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from pydantic import ValidationError

from airflow_provider_dpone.cluster.values.authority.external import EXTERNAL_SCHEMA, ExternalAuthorityRecord
from airflow_provider_dpone.cluster.values.authority.internal import (
    INTERNAL_SCHEMA_V1,
    INTERNAL_SCHEMA_V2,
    InternalAuthorityRecord,
    InternalAuthorityRecordV1,
    InternalAuthorityRecordV2,
)
from airflow_provider_dpone.cluster.values.authority.row import AuthorityRow
from airflow_provider_dpone.core import record_format
from airflow_provider_dpone.core.canonical import canonical_json, parse_canonical_json, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.errors.replay import INVALID, REQUIRED

MAX_AUTHORITY_PAYLOAD_BYTES: Final[int] = 256 * 1024
"""Envelope bound: an authority payload is at most 256 KiB of canonical UTF-8 JSON."""

AuthorityRecord = ExternalAuthorityRecord | InternalAuthorityRecord
"""Every record version the codec reads and writes (the protocol calls it a publication record)."""

_SCHEMAS: Final[dict[str, type[AuthorityRecord]]] = {
    EXTERNAL_SCHEMA: ExternalAuthorityRecord,
    INTERNAL_SCHEMA_V1: InternalAuthorityRecordV1,
    INTERNAL_SCHEMA_V2: InternalAuthorityRecordV2,
}

KNOWN_SCHEMAS: Final[frozenset[str]] = frozenset(_SCHEMAS)


def encode_payload(record: AuthorityRecord) -> str:
    """The canonical JSON text of ``record`` (bounded)."""
    try:
        return canonical_json(record.model_dump(mode="json", by_alias=True), max_bytes=MAX_AUTHORITY_PAYLOAD_BYTES)
    except DponeError as error:
        if error.code == "DPONE_CANONICAL_JSON_OVERSIZE":
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_PAYLOAD_OVERSIZE", error.detail) from None
        raise


_MEMO_SIZE: Final[int] = 4096
_memo: OrderedDict[tuple[str, str], AuthorityRecord] = OrderedDict()


def _remember(key: tuple[str, str], record: AuthorityRecord) -> None:
    _memo[key] = record
    _memo.move_to_end(key)
    while len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)


def encode(record: AuthorityRecord) -> AuthorityRow:
    """The KeeperMap row for ``record``: payload, digest and the projected columns."""
    payload = encode_payload(record)
    digest = sha256_hex(payload)
    _remember((payload, digest), record)
    return AuthorityRow(
        target_key=record.target_key,
        operation_id=record.operation_id,
        fence_token=record.fence_token,
        phase=record.phase.value,
        dispatch_epoch=record.dispatch_epoch,
        payload=payload,
        payload_sha256=digest,
    )


def decode(row: AuthorityRow) -> AuthorityRecord:
    """The record stored in ``row``; any doubt fails closed with a stable code (see module docstring)."""
    record = _decode_payload(row.payload, row.payload_sha256)
    projected = (record.target_key, record.operation_id, record.fence_token, record.phase.value, record.dispatch_epoch)
    observed = (row.target_key, row.operation_id, row.fence_token, row.phase, row.dispatch_epoch)
    if projected != observed:
        fields = ("target_key", "operation_id", "fence_token", "phase", "dispatch_epoch")
        differing = [name for name, a, b in zip(fields, projected, observed, strict=True) if a != b]
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", f"column/payload mismatch: {differing}")
    return record


def _decode_payload(payload: str, payload_sha256: str) -> AuthorityRecord:
    key = (payload, payload_sha256)
    known = _memo.get(key)
    if known is not None:
        return known
    record = _decode_uncached(payload, payload_sha256)
    _remember(key, record)
    return record


def _decode_uncached(payload: str, payload_sha256: str) -> AuthorityRecord:
    raw = payload.encode("utf-8")
    if len(raw) > MAX_AUTHORITY_PAYLOAD_BYTES:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_PAYLOAD_OVERSIZE", f"{len(raw)} bytes > {MAX_AUTHORITY_PAYLOAD_BYTES}"
        )
    if sha256_hex(raw) != payload_sha256:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_DIGEST_MISMATCH", "payload_sha256 differs from payload")
    try:
        value = parse_canonical_json(raw, max_bytes=MAX_AUTHORITY_PAYLOAD_BYTES)
    except DponeError as error:
        code = (
            "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_PAYLOAD_NONCANONICAL"
            if error.code == "DPONE_CANONICAL_JSON_NONCANONICAL"
            else "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID"
        )
        raise DponeError(code, error.code) from None
    if not isinstance(value, dict) or not isinstance(value.get("schema"), str):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID", "payload has no schema name")
    model = _SCHEMAS.get(value["schema"])
    if model is None:
        raise record_format.refusal(f"authority record schema {record_format.format_name(value['schema'])}")
    try:
        record = model.model_validate(value)
    except ValidationError as error:
        refused = record_format.refusal_of(error, f"authority record {value['schema']}")
        if refused is not None:
            raise refused from None
        locations = sorted({".".join(str(part) for part in item["loc"]) or "$" for item in error.errors()})
        raise DponeError(_invalid_code(error), f"fields: {locations[:8]}") from None
    if encode_payload(record) != payload:
        raise DponeError(
            "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_PAYLOAD_NONCANONICAL",
            "payload is not the canonical encoding of a record",
        )
    return record


def _invalid_code(error: ValidationError) -> str:
    """The code of a record that failed validation: the quality codes when every defect is inside the capsule."""
    problems = error.errors()
    if not all(item["loc"][:1] == ("quality",) for item in problems):
        return "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_RECORD_INVALID"
    if any(item["loc"] == ("quality", "core") and item["type"] == "missing" for item in problems):
        return REQUIRED
    return INVALID
