DROP TABLE [dbo].[__dpone_old_f160f0f373d6ae304cc726afc231507b];
