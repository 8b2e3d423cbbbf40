"""SQL Server implementation of the transfer-target port (pymssql via the Microsoft SQL Server provider's hook)."""
