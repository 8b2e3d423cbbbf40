DROP INDEX [__dpone_stg_f160f0f373d6ae304cc726afc231507b_c] ON [dbo].[__dpone_stg_f160f0f373d6ae304cc726afc231507b];
