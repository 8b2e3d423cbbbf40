"""The transfer targets: one SQL transaction shape (``sql_target``) in two dialects, SQL Server and PostgreSQL."""
