"""Deterministic identities of the cluster publication, both replication modes.

Why deterministic: an Airflow retry, a cleared run or a fresh worker must find the *same* operation, the same members
and the same candidate table without any state carried between processes other than the Keeper authority. So every
identity is a domain-separated SHA-256 (``tagged_digest``) over logical inputs only. The worker's try number, the
order in which hosts were listed, endpoint text (host names, ports, addresses) and random values never enter an id;
random values (fence token, DDL correlation token, candidate UUID intent) are *recorded* in the authority, not derived.

Each tag carries its own version (``...v1``): changing what an identity covers means a new tag, so old and new ids can
never be confused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Final

from airflow_provider_dpone.core.canonical import tagged_digest
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import MAX_IDENTIFIER_LENGTH, validate_identifier

PROTOCOL_VERSION: Final[str] = "dpone.clickhouse.cluster-external-full-refresh.v1"
"""The protocol version that enters ``operation_id``: a new protocol version never resumes an old operation."""

INTERNAL_PROTOCOL_VERSION: Final[str] = "dpone.clickhouse.cluster-full-refresh.v1"
"""The internal (replicated) protocol's version: the two modes never derive the same operation id."""

TAG_TARGET_KEY: Final[str] = "dpone.identity.target-key.v1"
TAG_OPERATION_ID: Final[str] = "dpone.identity.operation-id.v1"
TAG_MEMBER_ID: Final[str] = "dpone.identity.member-id.v1"
TAG_GENERATION_ID: Final[str] = "dpone.identity.generation-id.v1"
TAG_INVENTORY_DIGEST: Final[str] = "dpone.identity.inventory-digest.v1"
TAG_SCHEMA_DIGEST: Final[str] = "dpone.identity.schema-digest.v1"
TAG_LOAD_QUERY_ID: Final[str] = "dpone.identity.load-query-id.v1"
TAG_LOAD_DEDUP_TOKEN: Final[str] = "dpone.identity.load-dedup-token.v1"  # noqa: S105 (a domain tag, not a secret)
TAG_DDL_INTENT: Final[str] = "dpone.identity.ddl-intent.v1"

MEMBER_ID_PREFIX: Final[str] = "m"
MEMBER_ID_HEX: Final[int] = 16
"""A member id is ``"m"`` + the first 16 hex digits (64 bits) of its digest: short enough to read in evidence, and
checked for collisions within every admitted inventory (a collision blocks admission, it is never resolved silently)."""

CANDIDATE_INFIX: Final[str] = "__dpone_ext_"
INTERNAL_CANDIDATE_INFIX: Final[str] = "__dpone_int_"
OPERATION_PREFIX_HEX: Final[int] = 16
MAX_CANDIDATE_NAME: Final[int] = MAX_IDENTIFIER_LENGTH
"""Candidate names are at most 128 characters (the identifier bound). The operation-id suffix is never truncated; when
``target + infix + suffix`` is too long, the *target part* is cut to fit. Two targets that share a long prefix still get
distinct candidates because the suffix comes from ``operation_id``, which covers the full target key."""

_HEX64: Final[re.Pattern[str]] = re.compile(r"[0-9a-f]{64}")


def require_hex64(value: str, *, what: str) -> str:
    """Return ``value`` if it is a lower-case 64-digit hex digest, else fail with a stable code."""
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID", f"{what}: not a 64-digit lower-case hex digest")
    return value


@lru_cache(maxsize=1024, typed=True)
def target_key(cluster: str, database: str, target: str) -> str:
    """``H(cluster, database, target)``: the Keeper authority slot shared by V1 internal and V2 external records."""
    return tagged_digest(
        TAG_TARGET_KEY,
        validate_identifier(cluster, what="cluster"),
        validate_identifier(database, what="database"),
        validate_identifier(target, what="target"),
    )


@lru_cache(maxsize=1024, typed=True)
def operation_id(
    *,
    dag_id: str,
    run_id: str,
    target_key_hex: str,
    normalized_plan_digest: str,
    protocol_version: str = PROTOCOL_VERSION,
) -> str:
    """``H(protocol_version, scheduler_invocation, target_key, normalized_plan_digest)``.

    ``scheduler_invocation`` is ``(dag_id, run_id)``: every try of every task of one DAG run derives the same id, and a
    new run (or a changed plan) derives a new one. The try number is deliberately not a parameter.
    """
    if not dag_id or not run_id:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID", "scheduler invocation: empty dag_id or run_id")
    return tagged_digest(
        TAG_OPERATION_ID,
        protocol_version,
        [dag_id, run_id],
        require_hex64(target_key_hex, what="target_key"),
        require_hex64(normalized_plan_digest, what="normalized_plan_digest"),
    )


@lru_cache(maxsize=4096, typed=True)
def member_id(shard_num: int, replica_num: int) -> str:
    """``H(shard_num, replica_num)`` shortened to ``m`` + 16 hex digits (see :data:`MEMBER_ID_HEX`). Memoized: pure."""
    for name, value in (("shard_num", shard_num), ("replica_num", replica_num)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID", f"{name}: must be a positive integer")
    return MEMBER_ID_PREFIX + tagged_digest(TAG_MEMBER_ID, shard_num, replica_num)[:MEMBER_ID_HEX]


@lru_cache(maxsize=1024, typed=True)
def candidate_name(target: str, operation_id_hex: str, infix: str = CANDIDATE_INFIX) -> str:
    """``bounded(target + infix + operation_id_prefix)``, at most :data:`MAX_CANDIDATE_NAME` characters.

    The infix names the mode (``__dpone_ext_`` external, ``__dpone_int_`` internal), so a candidate left behind by one
    mode is never mistaken for the other's."""
    if infix not in (CANDIDATE_INFIX, INTERNAL_CANDIDATE_INFIX):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID", "candidate infix")
    validate_identifier(target, what="target")
    suffix = infix + require_hex64(operation_id_hex, what="operation_id")[:OPERATION_PREFIX_HEX]
    room = MAX_CANDIDATE_NAME - len(suffix)
    return validate_identifier(target[:room] + suffix, what="candidate")


def schema_digest(columns: Sequence[tuple[str, str]]) -> str:
    """Digest of the ordered ``(name, type)`` column list: order is part of the schema."""
    if not columns:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID", "schema: no columns")
    return _schema_digest(tuple((str(name), str(type_)) for name, type_ in columns))


@lru_cache(maxsize=1024)
def _schema_digest(columns: tuple[tuple[str, str], ...]) -> str:
    return tagged_digest(TAG_SCHEMA_DIGEST, [[name, type_] for name, type_ in columns])


def generation_id(*, operation_id_hex: str, artifact_sha256: str, schema_digest_hex: str, row_count: int) -> str:
    """``H(operation_id, artifact_sha256, schema_digest, row_count)``: the logical generation every member must expose."""
    if isinstance(row_count, bool) or not isinstance(row_count, int) or row_count < 0:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_IDENTITY_INVALID", "row_count: must be a non-negative integer")
    return tagged_digest(
        TAG_GENERATION_ID,
        require_hex64(operation_id_hex, what="operation_id"),
        require_hex64(artifact_sha256, what="artifact_sha256"),
        require_hex64(schema_digest_hex, what="schema_digest"),
        row_count,
    )


def inventory_digest(*, cluster: str, internal_replication: bool, members: Iterable[tuple[int, int]]) -> str:
    """Digest of the admitted topology: cluster, the uniform replication flag and the sorted ``(shard, replica)`` set.

    Endpoints are excluded on purpose (they are secrets-adjacent and change with DNS); a replaced host at the same
    position is caught by physical UUID observation instead. A member added or removed changes this digest, and a
    changed digest fences the operation (it never derives a second operation id).
    """
    positions = tuple(sorted({(int(shard), int(replica)) for shard, replica in members}))
    return _inventory_digest(validate_identifier(cluster, what="cluster"), bool(internal_replication), positions)


@lru_cache(maxsize=1024)
def _inventory_digest(cluster: str, internal_replication: bool, positions: tuple[tuple[int, int], ...]) -> str:
    return tagged_digest(
        TAG_INVENTORY_DIGEST,
        cluster,
        internal_replication,
        [[shard, replica, member_id(shard, replica)] for shard, replica in positions],
    )


def load_query_id(*, operation_id_hex: str, member: str, candidate_uuid: str) -> str:
    """Deterministic ``query_id`` of one member load: one candidate table (by UUID) gets exactly one load id."""
    return "dpone-load-" + tagged_digest(TAG_LOAD_QUERY_ID, operation_id_hex, member, candidate_uuid)[:32]


def load_dedup_token(*, operation_id_hex: str, member: str, candidate_uuid: str, artifact_sha256: str) -> str:
    """Deterministic ``insert_deduplication_token``: defense in depth only, never the recovery decision."""
    return tagged_digest(TAG_LOAD_DEDUP_TOKEN, operation_id_hex, member, candidate_uuid, artifact_sha256)


def ddl_intent_digest(intent: object) -> str:
    """Normalized query digest of a DDL *intent* (kind and names), independent of how an adapter renders SQL."""
    return tagged_digest(TAG_DDL_INTENT, intent)
