"""A local ClickHouse cluster on the real engine (chdb), for the demo and the tests."""
