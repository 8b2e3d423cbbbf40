"""The alert registry and ``emit``: stable unique names, registered codes, opaque facts only, one record per emit."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_dpone.core.alerts import (
    ALERTS,
    PREFIX,
    REDACTED,
    SOURCE_DRIFT_OBSERVED,
    TOPOLOGY_DRIFT,
    Alert,
    AlertEvent,
    emit,
)
from airflow_provider_dpone.core.errors import REGISTRY
from airflow_provider_dpone.hooks.alerts import count_alert, counted

pytestmark = pytest.mark.unit


def test_every_alert_has_one_stable_metric_safe_name_and_registered_codes() -> None:
    assert len(ALERTS) == 15  # each is driven by its own scenario in tests/core/test_alerts.py
    for name, alert in ALERTS.items():
        assert name == alert.name and name.startswith(f"{PREFIX}{alert.route}.")
        assert all(ch.isalnum() or ch in "._" for ch in name) and len(name) < 250  # a valid statsd/OTel name
        assert all(code in REGISTRY for code in alert.codes)
        assert alert.codes or alert is SOURCE_DRIFT_OBSERVED  # the one observation that lets the run go on


def test_emit_logs_one_structured_record_and_hands_the_event_to_the_sink(caplog) -> None:
    events: list[AlertEvent] = []
    with caplog.at_level(logging.WARNING, logger="airflow_provider_dpone.alerts"):
        event = emit(events.append, TOPOLOGY_DRIFT, operation_id="a" * 64, members=2, live_members=3)
    assert events == [event]
    [record] = caplog.records
    assert record.dpone_alert == {  # type: ignore[attr-defined]
        "alert": "dpone.alert.cluster.topology_drift",
        "live_members": 3,
        "members": 2,
        "operation_id": "a" * 64,
    }


def test_a_value_without_its_facts_shape_is_redacted_never_logged() -> None:
    event = emit(
        None,
        TOPOLOGY_DRIFT,
        member_id="ch-node-1.prod.example.com",
        operation_id="password=hunter2",
        code="DPONE_NOT_A_CODE",
        phase="select * from t",
    )
    assert set(dict(event.facts).values()) == {REDACTED}
    assert "example.com" not in event.line() and "hunter2" not in event.line()


def test_an_unregistered_alert_or_fact_key_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="not registered facts"):
        emit(None, TOPOLOGY_DRIFT, host="x")
    rogue = Alert("dpone.alert.cluster.rogue", "cluster", "c", "a", ())
    with pytest.raises(ValueError, match="unregistered alert"):
        emit(None, rogue)


def test_the_airflow_sink_counts_each_event_by_its_name_after_the_protocols_sink(monkeypatch) -> None:
    from airflow_provider_dpone.hooks import alerts

    calls: list[str] = []
    monkeypatch.setattr(alerts.Stats, "incr", lambda stat: calls.append(f"stats:{stat}"))
    event = emit(None, TOPOLOGY_DRIFT)
    count_alert(event)
    counted(lambda e: calls.append(f"inner:{e.name}"))(event)
    name = "dpone.alert.cluster.topology_drift"
    assert calls == [f"stats:{name}", f"inner:{name}", f"stats:{name}"]


class _Unequal:
    """A value whose comparison itself fails (as a foreign object's ``__eq__`` may)."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison")

    __hash__ = object.__hash__


@pytest.mark.parametrize("value", [["publication"], {"phase": "STAGE"}, {"a", "b"}, ("x",), None, 1.5, _Unequal()])
def test_a_fact_of_any_type_is_redacted_and_never_raises(value: object) -> None:
    from airflow_provider_dpone.core.alerts import FACTS

    for key in FACTS:
        event = emit(None, TOPOLOGY_DRIFT, **{key: value})  # type: ignore[arg-type]
        assert event.facts == ((key, REDACTED),), key
