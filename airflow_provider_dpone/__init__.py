"""Apache Airflow provider for fenced, exactly-once ClickHouse publication and ClickHouse -> SQL Server transfer.

The package is layered (see ``docs/architecture.md``): ``contracts`` holds pure values, ``ports`` the interfaces the
protocol needs, ``protocol`` the state machines, ``adapters`` the real systems, and ``hooks``/``operators``/``triggers``
the thin Airflow surface. Importing the package itself stays cheap: nothing here imports Airflow or a database client.
"""

__version__ = "0.1.0"
