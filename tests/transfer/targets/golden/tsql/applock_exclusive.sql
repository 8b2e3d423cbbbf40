DECLARE @dpone_lock_result INT = -999;
IF @@TRANCOUNT > 0
    EXEC @dpone_lock_result = sp_getapplock @Resource = %s, @LockMode = N'Exclusive', @LockOwner = N'Transaction', @LockTimeout = %s;
SELECT @dpone_lock_result AS lock_result, @@TRANCOUNT AS open_transactions;
