"""State machines and decisions of the cluster route, written against its ports only: no Airflow, no client, no I/O."""
