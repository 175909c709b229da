-- What the server handed a worker when it leased a task, so that the worker's report is judged
-- against the server's own record rather than the worker's word: the history position the
-- activation saw (a replay check's verdict holds for that history only) and the automatic
-- upgrade version it was offered (the only version its completion may move the run to).
ALTER TABLE amber_tasks
    ADD COLUMN claimed_seq   bigint,
    ADD COLUMN upgrade_offer text;
