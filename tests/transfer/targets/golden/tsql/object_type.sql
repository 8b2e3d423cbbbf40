SELECT o.[type] FROM sys.objects AS o WHERE o.[object_id] = OBJECT_ID(%s);
