"""PostgreSQL implementation of the transfer-target port (psycopg 3, binary COPY, one transaction per mutation)."""
