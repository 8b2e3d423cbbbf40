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

Text columns need SQL Server 2019 (``UTF8_MIN_VERSION``) for the in-server UTF-8. On older servers
:func:`server_digest_supported` is false and :func:`chunk_fields` reads the chunk back exactly instead: every non-text
field as the server renders it above, and each text value as its stored UTF-16LE code units
(``CAST(v AS VARBINARY(MAX))``, whatever the collation); :func:`fields_row_hash` decodes those strictly to UTF-8 and
hashes the same preimage. Nothing passes through FreeTDS's character conversion, which would substitute ``?`` for
what it cannot convert and so could read a stored difference back as the value sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import quote_tsql
from airflow_provider_dpone.core.typed_digest import HASH_LIMBS
from airflow_provider_dpone.transfer.targets.mssql.tsql import CHUNK, staging, target, window_predicate
from airflow_provider_dpone.transfer.values.target import TargetPlan
from airflow_provider_dpone.transfer.values.target_types import ColumnType, StorageKind

UTF8_MIN_VERSION: Final[int] = 15  # SERVERPROPERTY('ProductMajorVersion'): SQL Server 2019 has _UTF8 collations
UTF8_COLLATION: Final[str] = "Latin1_General_100_CI_AS_SC_UTF8"
ROW_TAG: Final[str] = "0x64706f6e652e74797065642d726f772e763100"  # b"dpone.typed-row.v1\x00"
NULL_FIELD: Final[str] = "0x0000000100"  # length 1, then the NULL marker 0x00
SERVER_VERSION: Final[str] = "SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) AS major_version;"
EPOCH: Final[str] = "CONVERT(DATETIME2(7), '1970-01-01T00:00:00', 126)"
TEXTSIZE: Final[str] = "SET TEXTSIZE 2147483647;"  # (MAX) values come back whole, whatever the session's default


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


def _encodings(plan: TargetPlan, *, text: bool = True) -> str:
    return ", ".join(
        f"{_encoding(quote_tsql(column.name), column.column_type)} AS e{i}"
        for i, column in enumerate(plan.columns)
        if text or column.column_type.storage is not StorageKind.TEXT
    )


def _digest(plan: TargetPlan, relation: str, where: str) -> str:
    """One row over the rows of ``relation`` (as ``s``) that ``where`` selects: their count and the eight limb sums
    of their row hashes."""
    names = [quote_tsql(c.name) for c in plan.columns]
    encoded = _encodings(plan)
    preimage = " + ".join([ROW_TAG, *(_field(i, n) for i, n in enumerate(names))])
    limbs = ", ".join(
        f"COALESCE(SUM(CAST(SUBSTRING(hashed.h, {4 * i + 1}, 4) AS BIGINT)), 0)" for i in range(HASH_LIMBS)
    )
    return (
        f"SELECT COUNT_BIG(*), {limbs} FROM (SELECT HASHBYTES('SHA2_256', {preimage}) AS h "
        f"FROM {relation} AS s CROSS APPLY (SELECT {encoded}) AS enc WHERE {where}) AS hashed;"
    )


def chunk_digest(plan: TargetPlan) -> str:
    """One row: the chunk's row count and the eight limb sums of its row hashes; the ordinal is the parameter."""
    return _digest(plan, staging(plan), f"s.{CHUNK} = %s")


def window_digest(plan: TargetPlan) -> str:
    """The same digest over the target table's rows inside the replaced window (the bounds are the parameters)."""
    return _digest(plan, target(plan), window_predicate(plan, "s"))


def text_columns(plan: TargetPlan) -> tuple[bool, ...]:
    return tuple(c.column_type.storage is StorageKind.TEXT for c in plan.columns)


def _fields(plan: TargetPlan, relation: str, where: str) -> str:
    fields = [
        f"CAST(s.{name} AS VARBINARY(MAX))" if text else _field(i, name)
        for i, (name, text) in enumerate(
            zip((quote_tsql(c.name) for c in plan.columns), text_columns(plan), strict=True)
        )
    ]
    return (
        f"{TEXTSIZE}\nSELECT {', '.join(fields)} FROM {relation} AS s "
        f"CROSS APPLY (SELECT {_encodings(plan, text=False)}) AS enc WHERE {where};"
    )


def chunk_fields(plan: TargetPlan) -> str:
    """Per staged row of the ordinal (the parameter), one value per column: the digest field as the server renders
    it, or for a text column its stored UTF-16LE code units (``NULL`` for NULL)."""
    return _fields(plan, staging(plan), f"s.{CHUNK} = %s")


def window_fields(plan: TargetPlan) -> str:
    """As :func:`chunk_fields`, per row of the target inside the replaced window (the bounds are the parameters)."""
    return _fields(plan, target(plan), window_predicate(plan, "s"))


_NULL: Final[bytes] = bytes.fromhex(NULL_FIELD[2:])
_TAG: Final[bytes] = bytes.fromhex(ROW_TAG[2:])


def _named(what: int | str) -> str:
    """A chunk ordinal as ``chunk N``; any other subject (``window``) as it is."""
    return f"chunk {what}" if isinstance(what, int) else what


def fields_row_hash(fields: Sequence[object], text: Sequence[bool], what: int | str) -> int:
    """The row hash over one row of :func:`chunk_fields`: stored text decoded strictly (an unpaired surrogate or a
    cut code unit is no text the load could have sent: ``target_verification_failed``)."""
    hasher = hashlib.sha256(_TAG)
    for value, is_text in zip(fields, text, strict=True):
        if not isinstance(value, bytes | bytearray):
            if value is None and is_text:
                hasher.update(_NULL)
                continue
            raise DponeError("native_transfer.target_verification_failed", f"{_named(what)}: a field is not bytes")
        if not is_text:
            hasher.update(value)
            continue
        try:
            encoded = bytes(value).decode("utf-16-le").encode("utf-8")
        except UnicodeError:
            raise DponeError(
                "native_transfer.target_verification_failed", f"{_named(what)}: a stored text value is not UTF-16"
            ) from None
        hasher.update((len(encoded) + 1).to_bytes(4, "big") + b"\x01" + encoded)
    return int.from_bytes(hasher.digest(), "big")
