"""Pure values of the provider: manifest models, canonical JSON and digests, identities, authority records and codecs.

Nothing in this package performs I/O or imports Airflow or a database client; every model is frozen and closed.
"""
