"""What pymssql 2.4.6 and its bundled FreeTDS 1.5 db-lib do to one BCP value, modelled from their sources.

The stand-in must fail where the real stack would, so each step follows the source it names (quoted lines are from
``pymssql/_mssql.pyx`` and FreeTDS ``src/dblib/bcp.c`` / ``src/tds/data.c``, the versions pymssql 2.4.6 wheels link):

1. **pymssql binds** (``bcp_sendrow`` -> ``py2db_type`` -> ``convert_python_value``): ``str`` -> ``SQLVARCHAR``, the
   value encoded in the connection charset (UTF-8), or ``col_value.encode('utf-16le')`` for an nchar/nvarchar column;
   ``bytes``/``bytearray`` -> ``SQLVARBINARY``; ``int`` -> ``SQLINT4``/``SQLINT8``; ``bool`` -> ``SQLBITN``;
   ``datetime`` -> legacy ``SQLDATETIME`` text with milliseconds; ``date`` -> ``SQLDATETIME`` (``TypeError``: not a
   datetime); ``uuid.UUID`` -> no entry in ``DBTYPES`` (``MSSQLDriverException``). For text and binary
   ``length[0] = len(value)`` becomes ``bcp_bind(..., varlen=length, ...)``.
2. **FreeTDS reads the bind** (``_bcp_get_col_data``)::

       if (!data_is_null && bindcol->column_bindlen >= 0) {
           if (bindcol->column_bindlen == 0)
               data_is_null = 1;

   so a zero-length text or binary value is sent as NULL; into a NOT NULL column ``tds7_send_record`` then fails
   (``if (!bindcol->column_nullable && ...) { null_error(...); return TDS_FAIL; }``).
3. **FreeTDS converts client-side** (``_bcp_convert_in``, then ``dbconvert(dbproc, coltype, ..., desttype, ...)``)
   from the host type to the column type, and **puts the column on the wire** with the type's ``put_data``
   (``tds_generic_put``, ``tds_numeric_put``, ``tds_msdatetime_put``). :func:`wire` renders those bytes for the types
   whose encoding the route depends on; the tests pin them against values computed by hand from the TDS rules.
4. **FreeTDS trims character data** (:func:`freetds_rtrim`): right after the conversion, ``_bcp_get_col_data`` calls
   ``rtrim_bcpcol(bindcol)``, which for a character column (``is_ascii_type``: CHAR/VARCHAR) reads::

       /* A single NUL byte indicates an empty string. */
       if (bcpcol->bcp_column_data->datalen == 1 && bcpcol->bcp_column_data->data[0] == '\0') {
           bcpcol->bcp_column_data->datalen = 0;
           ...
       bcpcol->bcp_column_data->datalen = rtrim((char *) bcpcol->bcp_column_data->data,
                                                bcpcol->bcp_column_data->datalen);

   with ``rtrim``: ``char *p = str + len - 1; while (p > str && *p == ' ') { *p-- = '\0'; } return 1 + p - str;``
   (the first character is never trimmed); for a Unicode column (``is_unicode_type``: NCHAR/NVARCHAR, converted to
   UCS-2LE) the same on 16-bit units: a lone ``0x0000`` unit becomes empty, else ``rtrim_u16(data, datalen,
   0x0020)``. Binary columns are neither type and pass unchanged: FreeTDS never trims trailing zero bytes in BCP.
   (FreeTDS 1.5.19, the version pymssql 2.4.6's wheel links: its ``_mssql`` module carries the static symbols
   ``rtrim_bcpcol``, ``rtrim``, ``rtrim_u16``, and ``_bcp_get_col_data`` calls ``_bcp_convert_in`` then
   ``rtrim_bcpcol``, as its disassembly shows; bcp.c v1.220 of 2012 had no trim in ``_bcp_get_col_data``, so the
   behaviour depends on the FreeTDS a pymssql wheel links, and this models the one 2.4.6 ships.)
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from decimal import Context, Decimal

from pymssql import _mssql

INT4_RANGE = (-(2**31), 2**31 - 1)
INT8_RANGE = (-(2**63), 2**63 - 1)
# data.c tds_numeric_bytes_per_prec: sign byte + magnitude, by precision
_NUMERIC_BYTES = [1] + [5] * 9 + [9] * 10 + [13] * 9 + [17] * 10


@dataclass(frozen=True)
class HostBind:
    """One column as pymssql hands it to ``bcp_bind``: the host type, the bytes at ``varaddr`` and ``varlen``.

    ``varlen`` is -1 for fixed-length host types (their size comes from the type); ``data`` is None for NULL.
    """

    vartype: str
    data: bytes | None
    varlen: int


def pymssql_bind(value: object, *, unicode_column: bool) -> HostBind:
    """pymssql's ``bcp_sendrow`` + ``convert_python_value`` for one value (only the types it accepts)."""
    if value is None:
        return HostBind("SQLVARCHAR", None, 0)
    if isinstance(value, bool):
        return HostBind("SQLBITN", int(value).to_bytes(4, "little"), -1)
    if isinstance(value, int):
        if INT4_RANGE[0] <= value <= INT4_RANGE[1]:
            return HostBind("SQLINT4", value.to_bytes(4, "little", signed=True), -1)
        if not INT8_RANGE[0] <= value <= INT8_RANGE[1]:
            raise OverflowError("Python int too large to convert to C long")
        return HostBind("SQLINT8", value.to_bytes(8, "little", signed=True), -1)
    if isinstance(value, str):
        data = value.encode("utf-16le") if unicode_column else value.encode("utf-8")
        return HostBind("SQLVARCHAR", data, len(data))
    if isinstance(value, bytes | bytearray):
        return HostBind("SQLVARBINARY", bytes(value), len(value))
    if isinstance(value, dt.datetime):
        text = value.strftime(f"{value.year:04}-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        return HostBind("SQLCHAR", text.encode(), len(text))
    if isinstance(value, dt.date):
        raise TypeError(f"value can only be a datetime.datetime, got {type(value)}")
    if isinstance(value, Decimal):
        if len(value.as_tuple().digits) > 33:
            raise _mssql.MSSQLDriverException("decimal precision 33 exceeded")
        return HostBind("SQLDECIMAL", str(value).encode(), -1)
    raise _mssql.MSSQLDriverException(f"Unable to determine database type from python {type(value).__name__} type")


def freetds_is_null(bind: HostBind) -> bool:
    """``_bcp_get_col_data``: no data, or a zero bind length, is NULL (quoted in the module docstring)."""
    return bind.data is None or bind.varlen == 0


_ASCII_TYPES = frozenset({"CHAR", "VARCHAR"})  # FreeTDS is_ascii_type among the column types the route meets
_UNICODE_TYPES = frozenset({"NCHAR", "NVARCHAR"})  # is_unicode_type


def freetds_rtrim(column_type: str, data: bytes) -> bytes:
    """``rtrim_bcpcol`` on a converted value of ``column_type`` (quoted in the module docstring): a lone NUL is
    empty, trailing spaces go (never the first character); any other type passes unchanged."""
    base = column_type.split("(")[0]
    if base in _ASCII_TYPES:
        if data == b"\x00":
            return b""
        end = len(data)
        while end > 1 and data[end - 1] == 0x20:
            end -= 1
        return data[:end]
    if base in _UNICODE_TYPES:
        if data == b"\x00\x00":
            return b""
        units = len(data) // 2
        while units > 1 and data[2 * units - 2 : 2 * units] == b" \x00":
            units -= 1
        return data[: 2 * units]
    return data


def _le(number: int, size: int) -> bytes:
    return number.to_bytes(size, "little")


def wire(column_type: str, value: object) -> bytes | None:
    """The TDS 7.3 ROW bytes FreeTDS puts for one column value (None: a type this model does not render).

    * ``DECIMAL(p,s)`` (``tds_numeric_put``): a length byte ``tds_numeric_bytes_per_prec[p]``, a sign byte (1 positive,
      0 negative after ``tds_swap_numeric``) and the unscaled magnitude little-endian;
    * ``DATE``/``DATETIME2`` (``tds_msdatetime_put``, "TODO precision": FreeTDS declares scale 7 whatever the table
      says): a length byte, for DATETIME2 5 bytes of 100 ns ticks since midnight (``TDS_PUT_UA4LE`` + ``p[4]``), then
      3 bytes of days since 0001-01-01, little-endian;
    * ``UNIQUEIDENTIFIER`` (``tds_generic_put`` of a ``TDS_UNIQUE``): length 16, then Data1, Data2, Data3
      little-endian and Data4 as is;
    * ``VARBINARY(MAX)``/``NVARCHAR(MAX)`` (``tds_generic_put``, ``column_varint_size == 8``, bcp7):
      ``tds_put_int8(tds, bcp7 ? -2 : colsize); tds_put_int(tds, colsize);`` the bytes, then ``tds_put_int(tds, 0)``
      (NULL: ``tds_put_int8(tds, -1)``).
    """
    base = column_type.split("(")[0]
    if column_type in {"VARBINARY(MAX)", "NVARCHAR(MAX)"}:
        if value is None:
            return b"\xff" * 8
        data = value.encode("utf-16le") if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]
        return b"\xfe" + b"\xff" * 7 + _le(len(data), 4) + data + (_le(0, 4) if data else b"")
    if value is None:
        return b"\x00" if base in {"DECIMAL", "DATE", "DATETIME2", "UNIQUEIDENTIFIER"} else None
    if base == "DECIMAL":
        precision, scale = (int(x) for x in column_type[8:-1].split(","))
        assert isinstance(value, Decimal)
        unscaled = int(value.scaleb(scale, context=Context(prec=80)))  # the default 28 digits would round
        size = _NUMERIC_BYTES[precision]
        return bytes([size, 1 if unscaled >= 0 else 0]) + _le(abs(unscaled), size - 1)
    if base == "DATE":
        assert isinstance(value, dt.date)
        return b"\x03" + _le(value.toordinal() - 1, 3)
    if base == "DATETIME2":
        assert isinstance(value, dt.datetime)
        midnight = value.replace(hour=0, minute=0, second=0, microsecond=0)
        ticks = (value - midnight) // dt.timedelta(microseconds=1) * 10
        return b"\x08" + _le(ticks, 5) + _le(value.date().toordinal() - 1, 3)
    if base == "UNIQUEIDENTIFIER":
        assert isinstance(value, uuid.UUID)
        return b"\x10" + value.bytes_le
    return None


__all__ = ["HostBind", "freetds_is_null", "freetds_rtrim", "pymssql_bind", "wire"]
