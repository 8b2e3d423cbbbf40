IF OBJECT_ID(%s, N'U') IS NULL
CREATE TABLE [dbo].[__dpone_publication_receipts] ([publication_id] CHAR(64) NOT NULL PRIMARY KEY, [invocation_id] VARCHAR(128) NOT NULL, [target_schema] NVARCHAR(128) NOT NULL, [target_table] NVARCHAR(128) NOT NULL, [mode] VARCHAR(16) NOT NULL, [row_count] BIGINT NOT NULL, [digest] CHAR(64) NOT NULL, [committed_at] DATETIME2(6) NOT NULL);
