SET TEXTSIZE 2147483647;
SELECT [__dpone_row], CONVERT(VARCHAR(41), [id]) AS [id], CAST([note] AS VARBINARY(MAX)) AS [note] FROM [dbo].[__dpone_stg_404851a1276bb266298993bfdfbaa7a4] WHERE [__dpone_chunk] = %s;
