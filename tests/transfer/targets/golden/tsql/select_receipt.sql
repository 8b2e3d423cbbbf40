SELECT [publication_id], [invocation_id], [target_schema], [target_table], [mode], [row_count], [digest], [committed_at] FROM [dbo].[__dpone_publication_receipts] WHERE [publication_id] = %s;
