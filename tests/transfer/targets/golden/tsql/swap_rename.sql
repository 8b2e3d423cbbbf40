EXEC sp_rename @objname = %s, @newname = %s, @objtype = N'OBJECT';
