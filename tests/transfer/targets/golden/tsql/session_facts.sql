DECLARE @dpone_protocol INT = NULL;
IF HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW SERVER STATE') = 1
    SELECT @dpone_protocol = c.[protocol_version] FROM sys.dm_exec_connections AS c WHERE c.[session_id] = @@SPID;
SELECT @@OPTIONS AS session_options, @@TRANCOUNT AS open_transactions, @dpone_protocol AS protocol_version;
