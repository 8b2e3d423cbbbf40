SELECT [__dpone_chunk], COUNT_BIG(*) FROM [dbo].[__dpone_stg_f160f0f373d6ae304cc726afc231507b] GROUP BY [__dpone_chunk];
