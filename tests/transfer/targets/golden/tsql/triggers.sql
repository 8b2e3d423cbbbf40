SELECT COUNT_BIG(*) FROM sys.triggers AS t WHERE t.[parent_id] IN (OBJECT_ID(%s), OBJECT_ID(%s));
