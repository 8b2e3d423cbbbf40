"""The Airflow side of the alerts: every alert a protocol emits is counted as the Airflow metric of its name.

The protocols emit through :func:`airflow_provider_dpone.core.alerts.emit` (one structured log record, opaque facts
only) and hand the event to the sink the surface gives them (every publication task's environment, whatever built
it, and the transfer hook's route), :func:`count_alert`, which increments the metric
``dpone.alert.<route>.<name>`` with Airflow's ``Stats`` (statsd or OpenTelemetry, as ``[metrics]`` configures it;
a no-op when metrics are off). No fact becomes a tag: ids would make unbounded series; the log record has them.
"""

from __future__ import annotations

from airflow_provider_dpone.core.alerts import AlertEvent, AlertSink

try:  # Airflow 3.1+: the Task SDK's metrics facade
    from airflow.sdk.observability.stats import Stats
except ImportError:  # pragma: no cover - Airflow 3.0
    from airflow.stats import Stats


def count_alert(event: AlertEvent) -> None:
    """Increment the alert's metric by one."""
    Stats.incr(event.name)


def counted(sink: AlertSink | None) -> AlertSink:
    """A sink that hands each event to ``sink`` (if any) and then counts it (:func:`count_alert`)."""
    if sink is None:
        return count_alert
    inner = sink

    def both(event: AlertEvent) -> None:
        inner(event)
        count_alert(event)

    return both
