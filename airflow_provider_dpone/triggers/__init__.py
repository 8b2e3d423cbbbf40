"""Airflow triggers: deferrable, async pollers that observe without mutating."""
