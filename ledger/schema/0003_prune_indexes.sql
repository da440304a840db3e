-- gatehouse ledger, schema version 3: fewer index writes per decision, and
-- indexes that serve the pages an inspector asks for.
--
-- Searches match customers by substring, which an index cannot serve;
-- attempts still in flight are found through attempts_one_in_flight; the
-- refusals metrics count are kept in counters, written only when a refusal
-- happens, instead of indexing every history line by kind; and actions are
-- listed newest first by rowid, so a state change no longer rewrites two
-- indexes keyed by time.
DROP INDEX actions_customer;
DROP INDEX attempts_outcome;
DROP INDEX events_kind;
DROP INDEX actions_updated;
DROP INDEX actions_state;
CREATE INDEX actions_state ON actions(state);
CREATE INDEX tasks_updated ON tasks(updated_at, id);

CREATE TABLE counters (
  kind  TEXT PRIMARY KEY,
  n     INTEGER NOT NULL
);
INSERT INTO counters (kind, n)
  SELECT kind, count(*) FROM events
  WHERE kind IN ('duplicate_block', 'denied', 'ownership_conflict', 'unknown', 'recovered_unknown')
  GROUP BY kind;
