SELECT COUNT_BIG(*) FROM [dbo].[__dpone_stg_f160f0f373d6ae304cc726afc231507b] WHERE [day] IS NULL OR NOT ([day] >= CAST(%s AS DATE) AND [day] < CAST(%s AS DATE));
