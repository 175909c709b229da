-- Activity timeouts may be as long as timers (years, in milliseconds), which overflows a 32-bit
-- integer past 24.8 days: widen the columns so a long timeout is stored, not refused by the
-- database after the workflow asked for it.
ALTER TABLE amber_tasks
    ALTER COLUMN start_to_close_ms    TYPE bigint,
    ALTER COLUMN schedule_to_start_ms TYPE bigint,
    ALTER COLUMN heartbeat_ms         TYPE bigint;
