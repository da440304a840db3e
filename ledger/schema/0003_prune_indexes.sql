-- gatehouse ledger, schema version 3: fewer index writes per decision.
-- Searches match customers by substring, which an index cannot serve;
-- attempts still in flight are found through attempts_one_in_flight; and the
-- refusals metrics count are kept in counters, written only when a refusal
-- happens, instead of indexing every history line by kind.
DROP INDEX actions_customer;
DROP INDEX attempts_outcome;
DROP INDEX events_kind;

CREATE TABLE counters (
  kind  TEXT PRIMARY KEY,
  n     INTEGER NOT NULL
);
INSERT INTO counters (kind, n)
  SELECT kind, count(*) FROM events
  WHERE kind IN ('duplicate_block', 'denied', 'ownership_conflict', 'unknown', 'recovered_unknown')
  GROUP BY kind;
