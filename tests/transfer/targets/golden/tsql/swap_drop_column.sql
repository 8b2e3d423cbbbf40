ALTER TABLE [dbo].[__dpone_stg_f160f0f373d6ae304cc726afc231507b] DROP COLUMN [__dpone_chunk], [__dpone_row];
