"""Which row hash a transfer computes: the one value the source's SELECT, its anchor and the target's digest share.

Every method is a 32-byte hash per row, summed modulo 2**256, so the chunk receipts, the source anchor and the
workload digest keep one shape whatever the method. The method is chosen for the target when the route is planned,
sealed in the journal's chunk plan, and read back from it by every later step (source-free recovery included):

* ``typed-sha256.v1``: SHA-256 over the canonical typed encoding (``core/typed_digest.py``); every target computes it
  (SQL Server does, in T-SQL).
* ``pg-record-sha256.v1``: SHA-256 over the row as PostgreSQL's own output functions render it,
  ``ROW(c1, ..., cn)::text`` under the target's pinned session (``DateStyle`` ISO, ``TimeZone`` UTC, ``bytea_output``
  hex), a ``text`` column entering as its UTF-8 bytes (``convert_to``, so rendered as ``bytea``). ClickHouse renders
  the same text from its own values inside the SELECT; PostgreSQL hashes what it stores. Both renderings are
  one-to-one per admitted type (``record_out`` quotes and escapes, NULL is an empty field, an empty value a quoted one):
  tests/transfer/targets/test_pg_record_digest.py proves it on both engines.

A journal naming any other method is refused (``native_transfer.row_digest_unknown``) before anything runs.
"""

from __future__ import annotations

from enum import StrEnum

from airflow_provider_dpone.core.errors import DponeError


class RowDigest(StrEnum):
    """The row hash of one transfer."""

    TYPED_SHA256 = "typed-sha256.v1"
    PG_RECORD_SHA256 = "pg-record-sha256.v1"


def parse_row_digest(raw: object) -> RowDigest:
    """A recorded method, or ``native_transfer.row_digest_unknown``: no step guesses how a sealed stage was hashed."""
    if isinstance(raw, RowDigest):
        return raw
    try:
        return RowDigest(str(raw))
    except ValueError:
        raise DponeError(
            "native_transfer.row_digest_unknown", f"row digest method {str(raw)[:40]!r} is not one this version knows"
        ) from None
