"""The typed multiset digest of one staged chunk, computed inside SQL Server.

The same bytes as ``core/typed_digest.py``, hashed by the server from what it stores: per row,
``HASHBYTES('SHA2_256', ...)`` over the row tag and, per column, a 4-byte big-endian length and the canonical
encoding (``0x00`` for NULL, ``0x01`` + the value's canonical bytes otherwise); the hashes are summed as eight 32-bit
limbs (``SUM`` over ``BIGINT``) and folded by ``typed_digest.fold_limb_sums``. Reading back through pymssql/FreeTDS
could verify a consistent client-side error (GUID byte order, a text re-encoding) as equal; this cannot, because the
encoding is the server's own rendering of the stored value.

Encodings (each an exact ``CONVERT`` with an explicit style where one applies):

* integers, ``DECIMAL(20,0)`` (UInt64): ``CONVERT(VARCHAR(40), v)``, the plain decimal spelling;
* ``DECIMAL(P,S)``: the unscaled integer (the digest's ``int(value.scaleb(S))``): ``CONVERT(VARCHAR(48), ABS(v))``
  always prints S fractional digits, so removing the point and the leading zeros, then prefixing ``-``, is exact;
* ``DATETIME2(p)``: ticks at precision p since 1970-01-01: ``DATEDIFF_BIG(SECOND, epoch, v)`` (whole seconds,
  floor: the epoch lies on a second boundary) times 10^p plus ``DATEPART(MICROSECOND, v)`` / 10^(6-p);
* ``DATE``: ``CONVERT(CHAR(10), v, 23)`` (``yyyy-mm-dd``); ``BIT``: ``0x31``/``0x30``;
* ``UNIQUEIDENTIFIER``: ``LOWER(CONVERT(CHAR(36), v))``, the standard field order whatever the storage byte order;
* ``VARBINARY``/``BINARY``: the bytes; ``NVARCHAR``: UTF-8 through a ``_UTF8`` collation (SQL Server 2019+).

Text columns need SQL Server 2019 (``UTF8_MIN_VERSION``); on older servers :func:`server_digest_supported` is false and
the target verifies by reading the chunk back instead.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.core.identifiers import quote_tsql
from airflow_provider_dpone.core.typed_digest import HASH_LIMBS
from airflow_provider_dpone.transfer.targets.mssql.tsql import CHUNK, staging
from airflow_provider_dpone.transfer.values.target import TargetPlan
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

UTF8_MIN_VERSION: Final[int] = 15  # SERVERPROPERTY('ProductMajorVersion'): SQL Server 2019 has _UTF8 collations
UTF8_COLLATION: Final[str] = "Latin1_General_100_CI_AS_SC_UTF8"
ROW_TAG: Final[str] = "0x64706f6e652e74797065642d726f772e763100"  # b"dpone.typed-row.v1\x00"
NULL_FIELD: Final[str] = "0x0000000100"  # length 1, then the NULL marker 0x00
SERVER_VERSION: Final[str] = "SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) AS major_version;"
EPOCH: Final[str] = "CONVERT(DATETIME2(7), '1970-01-01T00:00:00', 126)"


def server_digest_supported(plan: TargetPlan, major_version: int | None) -> bool:
    """Only text columns depend on the server version (UTF-8 collations)."""
    has_text = any(c.column_type.storage is StorageKind.TEXT for c in plan.columns)
    return not has_text or (major_version is not None and major_version >= UTF8_MIN_VERSION)


def _ascii(expression: str) -> str:
    return f"CAST({expression} AS VARBINARY(MAX))"


def _encoding(name: str, column: ColumnType) -> str:
    """T-SQL for the canonical bytes of a present value of ``s.<name>`` (the caller handles NULL)."""
    value = f"s.{name}"
    storage = column.storage
    if storage in (StorageKind.INTEGER, StorageKind.UINT64):
        return _ascii(f"CONVERT(VARCHAR(40), {value})")
    if storage is StorageKind.DECIMAL:
        digits = f"REPLACE(CONVERT(VARCHAR(48), ABS({value})), '.', '')"
        return _ascii(
            f"CASE WHEN {value} = 0 THEN '0' ELSE CASE WHEN {value} < 0 THEN '-' ELSE '' END "
            f"+ SUBSTRING({digits}, PATINDEX('%[^0]%', {digits}), 48) END"
        )
    if storage is StorageKind.DATETIME:
        precision = int(column.scale)
        return _ascii(
            f"CONVERT(VARCHAR(40), DATEDIFF_BIG(SECOND, {EPOCH}, {value}) * {10**precision} "
            f"+ DATEPART(MICROSECOND, {value}) / {10 ** (6 - precision)})"
        )
    if storage is StorageKind.DATE:
        return _ascii(f"CONVERT(CHAR(10), {value}, 23)")
    if storage is StorageKind.BOOLEAN:
        return f"CASE WHEN {value} = 1 THEN 0x31 ELSE 0x30 END"
    if storage is StorageKind.UUID:
        return _ascii(f"LOWER(CONVERT(CHAR(36), {value}))")
    if storage is StorageKind.TEXT:
        return _ascii(f"CONVERT(VARCHAR(MAX), {value} COLLATE {UTF8_COLLATION})")
    return f"CAST({value} AS VARBINARY(MAX))"  # binary


def _field(index: int, name: str) -> str:
    encoded = f"enc.e{index}"
    length = f"CAST(CAST(DATALENGTH({encoded}) + 1 AS INT) AS BINARY(4))"
    return f"CASE WHEN s.{name} IS NULL THEN {NULL_FIELD} ELSE {length} + 0x01 + {encoded} END"


def chunk_digest(plan: TargetPlan) -> str:
    """One row: the chunk's row count and the eight limb sums of its row hashes; the ordinal is the parameter."""
    names = [quote_tsql(c.name) for c in plan.columns]
    encoded = ", ".join(
        f"{_encoding(name, column.column_type)} AS e{i}"
        for i, (name, column) in enumerate(zip(names, plan.columns, strict=True))
    )
    preimage = " + ".join([ROW_TAG, *(_field(i, n) for i, n in enumerate(names))])
    limbs = ", ".join(
        f"COALESCE(SUM(CAST(SUBSTRING(hashed.h, {4 * i + 1}, 4) AS BIGINT)), 0)" for i in range(HASH_LIMBS)
    )
    return (
        f"SELECT COUNT_BIG(*), {limbs} FROM (SELECT HASHBYTES('SHA2_256', {preimage}) AS h "
        f"FROM {staging(plan)} AS s CROSS APPLY (SELECT {encoded}) AS enc WHERE s.{CHUNK} = %s) AS hashed;"
    )
