"""Pure values of the transfer route: queries, windows, chunks, the stage codec, journal records, target plans
and receipts. No I/O, no Airflow, no driver."""
