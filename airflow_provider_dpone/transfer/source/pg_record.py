"""Each row's ``pg-record-sha256.v1`` hash, computed by ClickHouse from its own values inside the data SELECT.

ClickHouse renders the row as PostgreSQL's ``record_out`` renders ``ROW(c1, ..., cn)::text`` on the target under the
pinned session (``transfer/targets/postgres/session.py``), and hashes it with SHA-256: ``(`` fields joined by ``,``
``)``, a NULL as the empty field. Per admitted type (PostgreSQL's rendering in parentheses):

* integers, ``UInt64`` (``numeric(20,0)``): ``toString``, the plain decimal spelling;
* ``Decimal(P,S)`` (``numeric(P,S)``: always ``S`` fractional digits, no negative zero): ``toDecimalString(v, S)``;
* ``Date``/``Date32`` (ISO ``date``): ``toString``; ``UUID``: ``toString``, lower-case hyphenated;
* ``Bool`` (``boolean``): ``t``/``f``;
* ``DateTime``/``DateTime64(p)`` (``timestamptz`` in UTC: ``YYYY-MM-DD HH:MM:SS`` then the fraction without its
  trailing zeros, then ``+00``, quoted by ``record_out`` for its space): ``toString(v, 'UTC')`` with the fraction's
  trailing zeros and a bare point trimmed;
* ``String``/``FixedString`` (``bytea`` in hex, quoted for its backslash, which ``record_out`` doubles):
  ``"\\x`` + lower-case hex + ``"``. A ``text`` target column is hashed by the target as its UTF-8 bytes, so it has
  the same rendering: no quoting rule of ``record_out`` for text (which depends on the server's ``isspace``) enters.

No rendering contains an unquoted ``,``, ``(``, ``)`` or ``"``, and every present value renders non-empty, so the row
text is one-to-one with the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from airflow_provider_dpone.core.columns import NativeColumn
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.identifiers import quote_clickhouse
from airflow_provider_dpone.core.typed_digest import LogicalType

_LOW_CARDINALITY: Final = "LowCardinality("


def _present(column: NativeColumn, value: str) -> str:
    """SQL for the PostgreSQL text of a present value."""
    logical = column.logical
    if column.source_type.startswith(_LOW_CARDINALITY) or column.source_type.startswith(f"Nullable({_LOW_CARDINALITY}"):
        value = f"CAST({value} AS String)" if logical is LogicalType.STRING else value
    if logical is LogicalType.INTEGER or logical is LogicalType.DATE or logical is LogicalType.UUID:
        return f"toString({value})"
    if logical is LogicalType.DECIMAL:
        return f"toDecimalString({value}, {int(column.scale)})"
    if logical is LogicalType.BOOLEAN:
        return f"if({value}, 't', 'f')"
    if logical is LogicalType.DATETIME:
        text = f"toString({value}, 'UTC')"
        if column.scale:
            text = f"trim(TRAILING '.' FROM trim(TRAILING '0' FROM {text}))"
        return f"concat('\"', {text}, '+00\"')"
    if logical is LogicalType.STRING:
        return f"concat('\"\\\\\\\\x', lower(hex({value})), '\"')"
    raise DponeError("native_transfer.target_type_unsupported", f"{column.source_type[:80]}: no PostgreSQL rendering")


def _field(column: NativeColumn) -> str:
    quoted = quote_clickhouse(column.name)
    if not column.nullable:
        return _present(column, quoted)
    return f"if(isNull({quoted}), '', {_present(column, f'assumeNotNull({quoted})')})"


def pg_record_text(columns: Sequence[NativeColumn]) -> str:
    """The row's PostgreSQL record text (a ``String``)."""
    pieces = ", ',', ".join(_field(column) for column in columns)
    return f"concat('(', {pieces}, ')')"


def pg_record_hash(columns: Sequence[NativeColumn]) -> str:
    """Each row's SHA-256 of its PostgreSQL record text (a ``FixedString(32)``)."""
    return f"SHA256({pg_record_text(columns)})"
