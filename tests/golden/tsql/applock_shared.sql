DECLARE @dpone_lock_result INT;
EXEC @dpone_lock_result = sp_getapplock @Resource = %s, @LockMode = N'Shared', @LockOwner = N'Transaction', @LockTimeout = %s;
SELECT @dpone_lock_result AS lock_result;
