DELETE FROM [dbo].[events] WHERE [ts3] >= CAST(%s AS DATETIME2(7)) AND [ts3] < CAST(%s AS DATETIME2(7));
