"""State machines and decisions of the provider, written against ``ports`` only: no Airflow, no client, no I/O."""
