"""Airflow operators: thin surface over the protocol (read connections, build adapters, shape XCom)."""
