-- A run's trace: the W3C `traceparent` of the call that started it (empty when the caller sent
-- none and the server exports no spans). Every task of the run is handed out with it, so the
-- spans of the worker and the surgical pool join the run's one trace. Children, continued and
-- reset runs inherit their origin's.
ALTER TABLE amber_runs ADD COLUMN traceparent text NOT NULL DEFAULT '';
