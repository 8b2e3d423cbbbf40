DELETE FROM [dbo].[events] WHERE [day] >= CAST(%s AS DATE) AND [day] < CAST(%s AS DATE);
