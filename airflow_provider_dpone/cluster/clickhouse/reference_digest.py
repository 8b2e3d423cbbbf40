"""The reference content digest of an artifact, computed by ClickHouse from the artifact's own bytes.

Why server-side, and why from the artifact: a member's candidate is verified by the server's multiset digest
(``sql_digest``). The reference it must equal has to come from the *artifact*, never from a member (a member that
loaded wrong data would otherwise vouch for itself), and it has to be computed by the *same* engine function over the
*same* typed values -- a Python re-implementation of ``sipHash128(tuple(*))`` over decoded rows could differ in a
corner of a type's binary form, and decoding rows in Python is what the publication path avoids. So the artifact's
bytes are streamed once into a session-scoped ``TEMPORARY`` table on the coordinator and the same ``count(), sum(...)``
query (``sql_digest.aggregates`` of the receipt's digest version) runs there; the temporary table vanishes with its session. Its engine is ``MergeTree`` (on disk), not
``Memory``: an artifact may be as large as ``max_source_bytes`` allows, and the coordinator's RAM is not a bound.

The temporary table is also the artifact's schema check. ClickHouse's Native input maps columns *by name*, so the
load runs with the strict input settings of member loads (an unknown column or a different type is an error) and
every column carries ``DEFAULT if(throwIf(1, ...) = 0, ...)``: a declared column the bytes lack would otherwise be
filled silently with defaults -- on the reference *and* on every member, where the digests would still agree.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Final

from clickhouse_connect.driver.exceptions import Error

from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_type
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.literals import string_literal
from airflow_provider_dpone.cluster.clickhouse.oneshot import TIMEOUT_EXCEEDED, Refused, classify
from airflow_provider_dpone.cluster.clickhouse.sql_digest import (
    content_digest,
    temporary_content,
    verification_settings,
)
from airflow_provider_dpone.cluster.clickhouse.sql_member import STRICT_NATIVE_INPUT
from airflow_provider_dpone.cluster.values.receipts import CURRENT_CONTENT_DIGEST, ContentDigestVersion
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import quote_clickhouse

REFERENCE_PREFIX: Final[str] = "dpone_artifact_reference_"
MISSING_COLUMN_MESSAGE: Final[str] = "dpone: a declared column is missing from the artifact"
SCHEMA_MISMATCH_CODES: Final[frozenset[int]] = frozenset({10, 16, 53, 117, 395})
"""NOT_FOUND_COLUMN_IN_BLOCK, NO_SUCH_COLUMN_IN_TABLE, TYPE_MISMATCH, INCORRECT_DATA (unknown column),
FUNCTION_THROW_IF_VALUE_IS_NON_ZERO (a declared column is missing)."""


def create_reference_table(table: str, columns: Sequence[tuple[str, str]]) -> str:
    """``CREATE TEMPORARY TABLE`` with the declared columns, each failing loudly when the artifact omits it."""
    parts = []
    for index, (name, type_) in enumerate(columns):
        canonical = canonical_type(type_, what=f"columns[{index}]")
        default = string_literal(canonical)
        parts.append(
            f"{quote_clickhouse(name)} {canonical} DEFAULT if(throwIf(1, {string_literal(MISSING_COLUMN_MESSAGE)}) = 0,"
            f" defaultValueOfTypeName({default}), defaultValueOfTypeName({default}))"
        )
    return f"CREATE TEMPORARY TABLE {quote_clickhouse(table)} ({', '.join(parts)}) ENGINE = MergeTree ORDER BY tuple()"


def drop_reference_table(table: str) -> str:
    return f"DROP TEMPORARY TABLE IF EXISTS {quote_clickhouse(table)}"


def reference_digest(
    endpoint: Endpoint,
    columns: Sequence[tuple[str, str]],
    chunks: Iterable[bytes],
    version: ContentDigestVersion = CURRENT_CONTENT_DIGEST,
) -> tuple[int, str]:
    """``(row_count, content_digest)`` of the Native bytes in ``chunks``, computed by the server of ``endpoint`` with
    the digest function of ``version``.

    Raises ``DPONE_ARTIFACT_SCHEMA_MISMATCH`` when the bytes do not carry exactly the declared columns and types,
    ``DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED`` when the server stops the digest read at the
    verification budget, ``DPONE_ARTIFACT_DIGEST_FAILED`` for any other failure. Nothing durable is written: a failed or repeated
    computation runs in a new session with a new temporary table.
    """
    nonce = uuid.uuid4().hex
    table = REFERENCE_PREFIX + nonce
    client = endpoint.scratch(f"dpone-reference-{nonce}")
    try:
        client.command(create_reference_table(table, columns))
        client.raw_insert(
            quote_clickhouse(table),
            column_names=[name for name, _ in columns],
            insert_block=iter(chunks),
            fmt="Native",
            settings=dict(STRICT_NATIVE_INPUT),
        )
        rows = client.query(temporary_content(table, columns, version), settings=verification_settings()).result_rows
        client.command(drop_reference_table(table))
    except Error as error:
        failure = classify(error)
        if isinstance(failure, Refused) and failure.code in SCHEMA_MISMATCH_CODES:
            raise DponeError("DPONE_ARTIFACT_SCHEMA_MISMATCH", f"Code {failure.code}") from None
        if isinstance(failure, Refused) and failure.code == TIMEOUT_EXCEEDED:
            raise DponeError("DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED", "artifact digest") from None
        code = f"Code {failure.code}" if isinstance(failure, Refused) else "no answer"
        raise DponeError("DPONE_ARTIFACT_DIGEST_FAILED", code) from None
    finally:
        endpoint.release(client)
    count, hash_sum = rows[0]
    return int(count), content_digest(int(count), int(hash_sum), version)
