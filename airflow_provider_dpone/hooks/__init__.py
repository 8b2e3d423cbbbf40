"""Airflow hooks: read connections and build adapters; no protocol decisions live here."""
