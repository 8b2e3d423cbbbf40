"""How a staged chunk is verified where PostgreSQL stores it: the typed digest, computed in SQL.

The same bytes as ``core/typed_digest.py``, hashed by the server: for each row, SHA-256 over the row tag and, per
column, a 4-byte big-endian length and the canonical encoding (``0x00`` for NULL, ``0x01`` + the value's canonical
text or bytes otherwise). The 32-byte row hashes are summed as eight 32-bit limbs (``sum`` over ``bigint`` is exact,
it returns ``numeric``), and ``typed_digest.fold_limb_sums`` folds them modulo 2**256. So verification reads the
staged chunk where it is stored and returns one row: no row travels back to the worker. A chunk's digest also
returns the one transaction that wrote every row it hashed, or NULL when the rows' ``xmin`` differ (the chunk's
writer, which the publishing transaction checks instead of hashing again: ``sql_target.ChunkSeal``).

The encodings per type, and why each is exact:

* integers and ``numeric(20,0)`` (UInt64): ``::text`` is the plain decimal spelling, as Python's ``str(int)``;
* ``numeric(P,S)``: ``trunc(value * 10^S)::text`` is the unscaled integer, as the digest's ``int(value.scaleb(S))``;
* ``timestamptz(p)``: ``trunc(extract(epoch ...) * 10^p)`` (``extract`` returns exact ``numeric`` since PostgreSQL 14),
  ticks at the column's precision, as the digest's;
* ``date``: ``YYYY-MM-DD``; ``uuid``: its lower-case hyphenated text; ``boolean``: ``1``/``0``;
* ``bytea``: the bytes themselves; ``text``: its UTF-8 bytes (``convert_to``).

The differential test (tests/transfer/targets/test_postgres_digest.py) checks these against the Python digest on boundary
values of every type.

With the plan's row digest ``pg-record-sha256.v1`` (``transfer/values/row_digest.py``) each row hash is instead
``sha256`` over the row as the server's own output functions render it, ``ROW(c1, ..., cn)::text`` (a ``text``
column as its UTF-8 bytes), under the pinned session: one function call renders the whole row, so no per-column
encoding, length prefix or concatenation is evaluated. The source renders the same text from its values
(``transfer/source/pg_record.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from airflow_provider_dpone.core.identifiers import quote_postgres
from airflow_provider_dpone.core.typed_digest import HASH_LIMBS
from airflow_provider_dpone.transfer.targets.postgres.statements import qualified, window_predicate
from airflow_provider_dpone.transfer.values.row_digest import RowDigest
from airflow_provider_dpone.transfer.values.target import CHUNK_COLUMN, TargetColumn, TargetPlan
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

_ROW_TAG: Final[str] = r"'\x64706f6e652e74797065642d726f772e763100'::bytea"  # b"dpone.typed-row.v1\x00"
_NULL_FIELD: Final[str] = r"'\x0000000100'::bytea"


def _encoding(name: str, column: ColumnType) -> str:
    """SQL for the canonical bytes of a present value (the caller handles NULL)."""
    storage = column.storage
    if storage in (StorageKind.INTEGER, StorageKind.UINT64, StorageKind.UUID):
        return f"convert_to({name}::text, 'UTF8')"
    if storage is StorageKind.DECIMAL:
        return f"convert_to(trunc({name} * 10::numeric ^ {int(column.scale)})::text, 'UTF8')"
    if storage is StorageKind.DATETIME:
        return f"convert_to(trunc(extract(epoch FROM {name}) * 10::numeric ^ {int(column.scale)})::text, 'UTF8')"
    if storage is StorageKind.DATE:
        return f"convert_to(to_char({name}, 'YYYY-MM-DD'), 'UTF8')"
    if storage is StorageKind.BOOLEAN:
        # no ELSE: a NULL boolean must stay NULL (the field is then encoded as NULL, not as false)
        return rf"CASE WHEN {name} THEN '\x31'::bytea WHEN NOT {name} THEN '\x30'::bytea END"
    if storage is StorageKind.TEXT:
        return f"convert_to({name}, 'UTF8')"
    return name  # bytea


_WRITER_FROM_AGE: Final[str] = "mod(mod(age('3'::xid)::bigint + 3 - min(w), 4294967296) + 4294967296, 4294967296)"
"""The writer's id from the rows' one ``age(xmin)``. ``age`` is the 32-bit difference, as ``int4``, between the
transaction's reference id (fixed for the transaction) and a normal id, so it is one-to-one on the ids a table can
hold (less than 2**31 old); the age of the first normal id (3) gives the reference, and the id is the reference
less the age, modulo 2**32: the number ``xmin::text`` spells, with no row's ``xmin`` rendered as text. (Frozen rows
have the largest ``int4`` as their age, which names no writer the publishing transaction can read, so their seal
never holds and they are hashed again there.)"""


def _limb(index: int) -> str:
    """Bytes 4i..4i+3 of the hash as an unsigned 32-bit integer (``get_byte`` arithmetic: cheaper than casts)."""
    first = 4 * index
    return (
        f"get_byte(h, {first})::bigint * 16777216 + get_byte(h, {first + 1}) * 65536 "
        f"+ get_byte(h, {first + 2}) * 256 + get_byte(h, {first + 3})"
    )


def _concat(parts: list[str]) -> str:
    """A balanced tree of ``||``: a left-deep chain would copy a wide row's growing prefix once per column."""
    if len(parts) == 1:
        return parts[0]
    middle = len(parts) // 2
    return f"({_concat(parts[:middle])} || {_concat(parts[middle:])})"


def record_text(columns: Sequence[TargetColumn]) -> str:
    """``pg-record-sha256.v1``'s preimage: the row's record text, a ``text`` column entering as its UTF-8 bytes."""
    values = ", ".join(
        f"convert_to({quote_postgres(c.name)}, 'UTF8')"
        if c.column_type.storage is StorageKind.TEXT
        else quote_postgres(c.name)
        for c in columns
    )
    return f"ROW({values})::text"


def record_hash(columns: Sequence[TargetColumn]) -> str:
    """``pg-record-sha256.v1``: SHA-256 of the row's record text as UTF-8."""
    return f"sha256(convert_to({record_text(columns)}, 'UTF8'))"


def _digest(plan: TargetPlan, relation: str, where: str, *, writer: bool = False) -> str:
    """One row over the rows of ``relation`` that ``where`` selects: their count, the eight limb sums of their row
    hashes and, with ``writer``, the one writer (``xmin``) of every row hashed, or NULL."""
    sums = ", ".join(f"coalesce(sum({_limb(i)}), 0)" for i in range(HASH_LIMBS))
    inner = outer = ""
    if writer:
        sums += f", CASE WHEN min(w) = max(w) THEN {_WRITER_FROM_AGE} END"
        inner, outer = "age(xmin) AS w, ", "w, "
    if plan.row_digest is RowDigest.PG_RECORD_SHA256:
        return (
            f"SELECT count(*), {sums} FROM (SELECT {inner}{record_hash(plan.columns)} AS h "
            f"FROM {relation} WHERE {where} OFFSET 0) AS hashed"
        )
    encoded = ", ".join(
        f"{_encoding(quote_postgres(c.name), c.column_type)} AS e{i}" for i, c in enumerate(plan.columns)
    )
    fields = _concat(
        [_ROW_TAG]
        + [
            f"(CASE WHEN e{i} IS NULL THEN {_NULL_FIELD} ELSE int4send(octet_length(e{i}) + 1) || '\\x01'::bytea || e{i} END)"
            for i in range(len(plan.columns))
        ]
    )
    # OFFSET 0 keeps each subquery from being inlined: inlined, every reference to e<i> or h would recompute it.
    return (
        f"SELECT count(*), {sums} FROM (SELECT {outer}sha256({fields}) AS h FROM "
        f"(SELECT {inner}{encoded} FROM {relation} WHERE {where} OFFSET 0) AS encoded OFFSET 0) AS hashed"
    )


def chunk_digest(plan: TargetPlan, ordinal: int) -> str:
    """One row: the chunk's row count, the eight limb sums of its row hashes, and the one writer (``xmin``) of every
    row hashed, or NULL (rows of several writers, or none)."""
    staging = qualified(plan.target_schema, plan.staging_table)
    return _digest(plan, staging, f"{quote_postgres(CHUNK_COLUMN)} = {int(ordinal)}", writer=True)


def window_digest(plan: TargetPlan) -> str:
    """The same digest over the target table's rows inside the replaced window (the bounds are the two parameters):
    what the window holds after a window replace, as the publishing transaction sees it."""
    return _digest(plan, qualified(plan.target_schema, plan.target_table), window_predicate(plan))


def table_digest(plan: TargetPlan, schema: str, table: str) -> str:
    """The same digest over every row of ``schema.table`` (a table of the plan's columns)."""
    return _digest(plan, qualified(schema, table), "TRUE")
