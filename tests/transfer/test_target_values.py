"""Row values checked against target column types: exact fits pass in canonical form, the rest are refused by code."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Context, Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.typed_digest import LogicalType, TypedColumn, row_hash
from airflow_provider_dpone.transfer.values.target_types import parse_column_type
from airflow_provider_dpone.transfer.values.target_values import RowConverter, readback_normalizer

pytestmark = pytest.mark.unit

WIDE = Context(prec=200)


def _convert(source_type: str, value: object, *, text: bool = False, allow_nul: bool = True) -> object:
    mapping = StringMapping.TEXT if text else StringMapping.BINARY
    return RowConverter(["c"], [parse_column_type(source_type, mapping)], text_allows_nul=allow_nul)((value,))[0]


@pytest.mark.parametrize(
    ("source_type", "value", "expected"),
    [
        ("UInt64", 2**64 - 1, 2**64 - 1),
        ("Int8", -128, -128),
        ("Decimal(38, 10)", Decimal("1234567890123456789012345678.0123456789"), None),
        ("Decimal(18, 4)", 5, Decimal(5)),
        ("String", "é", "é".encode()),
        ("String", b"\xff\x00", b"\xff\x00"),
        ("FixedString(2)", b"ab", b"ab"),
        (
            "DateTime64(3, 'UTC')",
            dt.datetime(2026, 1, 1, 0, 0, 0, 5000),
            dt.datetime(2026, 1, 1, 0, 0, 0, 5000, tzinfo=dt.UTC),
        ),
        ("UUID", "00000000-0000-0000-0000-000000000001", uuid.UUID(int=1)),
        ("Date", dt.date(2026, 1, 1), dt.date(2026, 1, 1)),
    ],
)
def test_fitting_values_become_canonical(source_type: str, value: object, expected: object) -> None:
    assert _convert(source_type, value) == (value if expected is None else expected)


@pytest.mark.parametrize(
    ("source_type", "value"),
    [
        ("UInt64", 2**64),
        ("UInt8", -1),
        ("Int32", True),
        ("Int32", 1.0),
        ("Decimal(38, 10)", Decimal("1234567890123456789012345678.01234567891")),
        ("Decimal(4, 2)", Decimal("100.00")),
        ("Decimal(4, 2)", Decimal("NaN")),
        ("FixedString(2)", b"abc"),
        ("DateTime64(3, 'UTC')", dt.datetime(2026, 1, 1, 0, 0, 0, 5)),
        ("Date", dt.datetime(2026, 1, 1)),
        ("Bool", 1),
        ("UUID", "not-a-uuid"),
        ("Int32", None),
    ],
)
def test_values_that_do_not_fit_are_refused_without_echoing_them(source_type: str, value: object) -> None:
    with pytest.raises(DponeError) as refused:
        _convert(source_type, value)
    assert refused.value.code == "native_transfer.target_value_invalid"
    assert "column c" in refused.value.detail and repr(value) not in refused.value.detail


def test_text_mapping_refuses_non_utf8_and_optionally_nul() -> None:
    assert _convert("String", b"caf\xc3\xa9", text=True) == "café"
    with pytest.raises(DponeError, match="UTF-8"):
        _convert("String", b"\xff", text=True)
    with pytest.raises(DponeError, match="NUL"):
        _convert("String", "a\x00b", text=True, allow_nul=False)
    assert _convert("String", "a\x00b", text=True) == "a\x00b"


def test_readback_turns_uint64_decimals_back_into_integers() -> None:
    normalize = readback_normalizer([parse_column_type("UInt64"), parse_column_type("Int32")])
    assert list(normalize([Decimal(2**64 - 1), 5])) == [2**64 - 1, 5]
    assert normalize([Decimal("1.5"), 5])[0] == Decimal("1.5")  # left for the digest to refuse


def test_typed_digest_distinguishes_38_digit_decimals() -> None:
    """Regression: scaling under the default 28-digit context gave neighbouring DECIMAL(38,10) values one hash."""
    column = [TypedColumn(name="x", logical=LogicalType.DECIMAL, scale=10)]
    a = Decimal("1234567890123456789012345678.0123456789")
    assert row_hash(column, (a,)) != row_hash(column, (a + Decimal("1E-10"),))


def test_a_38_digit_decimal_at_the_limit_fits() -> None:
    """Regression: abs() under the default 28-digit context rounded a 38-digit value up to 10**38."""
    value = Decimal("-9999999999999999999999999999.9999999999")
    assert _convert("Decimal(38, 10)", value) == value


@given(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.integers(min_value=-45, max_value=5),
    st.integers(min_value=1, max_value=38),
    st.data(),
)
def test_decimal_fit_is_exactly_the_mathematical_rule(
    unscaled: int, exponent: int, precision: int, data: st.DataObject
) -> None:
    scale = data.draw(st.integers(min_value=0, max_value=precision))
    value = Decimal(unscaled).scaleb(exponent, context=WIDE)
    with localcontext(WIDE):
        fits = value * (Decimal(10) ** scale) % 1 == 0 and abs(value) < Decimal(10) ** (precision - scale)
    try:
        _convert(f"Decimal({precision}, {scale})", value)
        accepted = True
    except DponeError:
        accepted = False
    assert accepted == fits
