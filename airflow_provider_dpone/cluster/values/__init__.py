"""Pure values of the cluster route: authority records and codecs (versioned), receipts, part digests, the
quality capsule and its bounded read. No I/O, no Airflow, no driver; every model is frozen and closed."""
