SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) AS major_version;
