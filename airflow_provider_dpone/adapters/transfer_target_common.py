"""What the SQL Server and PostgreSQL transfer targets decide the same way, whatever the dialect.

Both adapters run the same transaction shape (see their module docstrings); the checks on what a transaction observed
(staged chunks against the request, rows outside the window, rows inserted), the receipt row they write and read back,
and the values they report are one logic, kept here so the two cannot drift. Statements, locks, drivers and value
conversions stay in each dialect's own modules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_dpone.contracts.errors import DponeError
from airflow_provider_dpone.contracts.transfer_target import PublicationMode, TargetPlan
from airflow_provider_dpone.contracts.transfer_target_receipts import (
    ChunkExpectation,
    ChunkVerification,
    PublicationObservation,
    PublicationReceipt,
    PublicationRequest,
    PublicationState,
)
from airflow_provider_dpone.contracts.typed_digest import native_multiset_digest


def short(plan: TargetPlan) -> str:
    """The publication as error details name it: a prefix of its opaque id."""
    return f"publication {plan.publication_id[:16]}"


def refuse_committed(plan: TargetPlan, receipt: PublicationReceipt | None) -> None:
    """A publication whose receipt exists is done: nothing may stage or publish it again."""
    if receipt is not None:
        raise DponeError("mssql_native.target_publication_already_committed", short(plan))


def staging_missing(plan: TargetPlan, *, committed: bool) -> DponeError:
    """The error for an absent staging table: the publication already committed (the swap or the cleanup consumed
    the table), or its staging is gone."""
    if committed:
        return DponeError("mssql_native.target_publication_already_committed", short(plan))
    return DponeError("mssql_native.target_staging_missing", short(plan))


def require_window_target(exists: bool) -> None:
    """Window replace writes into an existing table; it never creates one."""
    if not exists:
        raise DponeError("mssql_native.target_schema_mismatch", "window_replace target does not exist")


def check_staged_chunks(counts: Mapping[int, int], request: PublicationRequest) -> None:
    """The staged rows per chunk ordinal must be exactly the requested chunks, none missing, extra or short.

    An extra ordinal is refused like a missing one: it is how a row nobody requested (a bulk-copy probe row under
    ordinal -1 orphaned by a crash, a chunk of another attempt) is kept out of the publication.
    """
    expected = request.chunk_rows
    if counts != expected:
        extra = sorted(set(counts) - set(expected))
        differing = sorted(o for o in expected if counts.get(o) != expected[o])
        raise DponeError(
            "mssql_native.target_staging_incomplete",
            f"{len(counts)} staged chunks, {len(expected)} requested; "
            f"ordinals not requested: {extra[:8]}; missing or short: {differing[:8]}",
        )


def check_no_rows_outside_window(outside: Sequence[Any] | None) -> None:
    """``outside``: the one-row count of staged rows outside the window (or with a NULL window value); must be 0."""
    if outside is None or int(outside[0]):
        raise DponeError("mssql_native.target_rows_outside_window", f"{outside and outside[0]} staged rows")


def check_inserted(inserted: int, request: PublicationRequest) -> None:
    """The window insert must have moved every requested row."""
    if inserted != request.rows:
        raise DponeError("mssql_native.target_staging_incomplete", f"inserted {inserted} of {request.rows}")


def receipt_values(plan: TargetPlan, request: PublicationRequest) -> tuple[str, str, str, str, str, int, str]:
    """The parameters of the receipt insert, in the column order of both dialects' ``insert_receipt``."""
    return (
        plan.publication_id,
        plan.invocation_id,
        plan.target_schema,
        plan.target_table,
        plan.mode.value,
        request.rows,
        request.digest,
    )


def committed_receipt(plan: TargetPlan, request: PublicationRequest, committed_at: Any) -> PublicationReceipt:
    """The receipt of the publishing transaction, with the commit time the receipt insert returned."""
    return PublicationReceipt(
        publication_id=plan.publication_id,
        invocation_id=plan.invocation_id,
        target_schema=plan.target_schema,
        target_table=plan.target_table,
        mode=plan.mode,
        rows=request.rows,
        digest=request.digest,
        committed_at=committed_at,
    )


def stored_receipt(row: Sequence[Any]) -> PublicationReceipt:
    """The receipt read back from a row of both dialects' ``select_receipt``."""
    publication_id, invocation_id, schema, table, mode, rows, digest, committed_at = row
    return PublicationReceipt(
        publication_id=publication_id,
        invocation_id=invocation_id,
        target_schema=schema,
        target_table=table,
        mode=PublicationMode(mode),
        rows=int(rows),
        digest=digest,
        committed_at=committed_at,
    )


def observation(plan: TargetPlan, receipt: PublicationReceipt | None) -> PublicationObservation:
    """What reconcile reports: committed with its receipt, or absent."""
    if receipt is None:
        return PublicationObservation(publication_id=plan.publication_id, state=PublicationState.ABSENT)
    return PublicationObservation(publication_id=plan.publication_id, state=PublicationState.COMMITTED, receipt=receipt)


def chunk_verification(expectation: ChunkExpectation, rows: int, total: int) -> ChunkVerification:
    """The verification of one chunk from the row count and typed sum the target recomputed over its staged rows."""
    return ChunkVerification(
        ordinal=expectation.ordinal,
        expected_rows=expectation.rows,
        observed_rows=rows,
        expected_digest=expectation.digest,
        observed_digest=native_multiset_digest(rows, total),
        observed_typed_sum=f"{total:064x}",
    )
