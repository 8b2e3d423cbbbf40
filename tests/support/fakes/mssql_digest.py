"""The stand-in's evaluation of the T-SQL chunk digest (``transfer/targets/mssql/digest.py``), modelled on T-SQL semantics.

Each encoding template the adapter emits is recognized by its text and evaluated with a model of the T-SQL functions
it uses (``CONVERT`` to character types and its styles, ``REPLACE``/``PATINDEX``/``SUBSTRING``, ``DATEDIFF_BIG`` and
``DATEPART``, ``LOWER``, ``DATALENGTH``, ``CAST(int AS BINARY(4))``, ``HASHBYTES``), never with the project's typed
digest: a template that encoded a value differently from ``core/typed_digest.py`` gives a different total here.
An unknown template fails the test loudly.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import uuid
from collections.abc import Callable, Sequence
from decimal import Decimal

_COLUMN = r"s\.\[(\w+)\]"
_EPOCH = dt.datetime(1970, 1, 1)


def _convert_varchar(value: object) -> str:
    """CONVERT(VARCHAR, v) of an integer or a DECIMAL: digits with exactly the declared scale."""
    if isinstance(value, Decimal):
        return format(value, "f")  # the stand-in stores decimals quantized to the column's scale
    assert isinstance(value, int) and not isinstance(value, bool)
    return str(value)


def _patindex_first_non_zero(text: str) -> int:
    """PATINDEX('%[^0]%', text): 1-based position of the first character other than '0', 0 if none."""
    return next((i + 1 for i, ch in enumerate(text) if ch != "0"), 0)


def _substring(text: str, start: int, length: int) -> str:
    """SUBSTRING(text, start, length): characters from ``start`` (1-based) up to ``start + length - 1``."""
    end = start + length - 1
    return text[max(start, 1) - 1 : max(end, 0)]


def _decimal(value: object) -> bytes:
    assert isinstance(value, Decimal)
    if value == 0:
        return b"0"
    digits = _convert_varchar(value.copy_abs()).replace(".", "")  # ABS keeps every digit (abs() would round to 28)
    sign = "-" if value < 0 else ""
    return (sign + _substring(digits, _patindex_first_non_zero(digits), 48)).encode("ascii")


def _datetime(multiplier: int, divisor: int) -> Callable[[object], bytes]:
    def encode(value: object) -> bytes:
        assert isinstance(value, dt.datetime)
        seconds = (value.replace(microsecond=0) - _EPOCH) // dt.timedelta(seconds=1)  # DATEDIFF_BIG(SECOND, ...)
        return str(seconds * multiplier + value.microsecond // divisor).encode("ascii")

    return encode


def _date(value: object) -> bytes:
    assert isinstance(value, dt.date)
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}".encode("ascii")  # CONVERT(CHAR(10), v, 23)


def _uuid(value: object) -> bytes:
    assert isinstance(value, uuid.UUID)
    return str(value).upper().lower().encode("ascii")  # SQL Server renders GUIDs upper-case; LOWER(...)


_TEMPLATES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Callable[[object], bytes]]]] = [
    (re.compile(rf"CAST\(CONVERT\(VARCHAR\(40\), {_COLUMN}\) AS VARBINARY\(MAX\)\)"),
     lambda m: lambda v: _convert_varchar(v).encode("ascii")),
    (re.compile(rf"CAST\(CASE WHEN {_COLUMN} = 0 THEN '0' ELSE CASE WHEN s\.\[\1\] < 0 THEN '-' ELSE '' END \+ "
                rf"SUBSTRING\(REPLACE\(CONVERT\(VARCHAR\(48\), ABS\(s\.\[\1\]\)\), '\.', ''\), PATINDEX\('%\[\^0\]%', "
                rf"REPLACE\(CONVERT\(VARCHAR\(48\), ABS\(s\.\[\1\]\)\), '\.', ''\)\), 48\) END AS VARBINARY\(MAX\)\)"),
     lambda m: _decimal),
    (re.compile(rf"CAST\(CONVERT\(VARCHAR\(40\), DATEDIFF_BIG\(SECOND, CONVERT\(DATETIME2\(7\), '1970-01-01T00:00:00', "
                rf"126\), {_COLUMN}\) \* (\d+) \+ DATEPART\(MICROSECOND, s\.\[\1\]\) / (\d+)\) AS VARBINARY\(MAX\)\)"),
     lambda m: _datetime(int(m.group(2)), int(m.group(3)))),
    (re.compile(rf"CAST\(CONVERT\(CHAR\(10\), {_COLUMN}, 23\) AS VARBINARY\(MAX\)\)"), lambda m: _date),
    (re.compile(rf"CASE WHEN {_COLUMN} = 1 THEN 0x31 ELSE 0x30 END"), lambda m: lambda v: b"1" if v else b"0"),
    (re.compile(rf"CAST\(LOWER\(CONVERT\(CHAR\(36\), {_COLUMN}\)\) AS VARBINARY\(MAX\)\)"), lambda m: _uuid),
    (re.compile(rf"CAST\(CONVERT\(VARCHAR\(MAX\), {_COLUMN} COLLATE Latin1_General_100_CI_AS_SC_UTF8\) "
                r"AS VARBINARY\(MAX\)\)"),
     lambda m: lambda v: str(v).encode("utf-8")),
    (re.compile(rf"CAST\({_COLUMN} AS VARBINARY\(MAX\)\)"), lambda m: lambda v: bytes(v)),  # type: ignore[call-overload]
]  # fmt: skip


def encoders(encodings_sql: str) -> list[tuple[str, Callable[[object], bytes]]]:
    """(column name, encoder) for each ``<template> AS e<i>`` of the digest's CROSS APPLY, in order."""
    parts = [p for p in re.split(r" AS e\d+(?:, |$)", encodings_sql) if p]
    found = []
    for part in parts:
        for pattern, build in _TEMPLATES:
            if match := pattern.fullmatch(part):
                found.append((match.group(1), build(match)))
                break
        else:
            raise AssertionError(f"digest encoding unknown to the SQL Server fake: {part[:120]!r}")
    return found


def field(encode: Callable[[object], bytes], value: object) -> bytes:
    """CASE WHEN v IS NULL THEN 0x0000000100 ELSE CAST(DATALENGTH(e) + 1 AS BINARY(4)) + 0x01 + e END."""
    if value is None:
        return bytes.fromhex("0000000100")
    encoded = encode(value)
    return (len(encoded) + 1).to_bytes(4, "big") + b"\x01" + encoded


def row_hash(tag: bytes, columns: Sequence[tuple[Callable[[object], bytes], object]]) -> bytes:
    """HASHBYTES('SHA2_256', tag + each column's field)."""
    return hashlib.sha256(tag + b"".join(field(encode, value) for encode, value in columns)).digest()


def limb_sums(hashes: Sequence[bytes]) -> list[int]:
    """SUM(CAST(SUBSTRING(h, 4i + 1, 4) AS BIGINT)) for i in 0..7: binary(4) -> BIGINT is unsigned big-endian."""
    return [sum(int.from_bytes(h[4 * i : 4 * i + 4], "big") for h in hashes) for i in range(8)]
